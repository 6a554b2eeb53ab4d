// The KV transfer message (see kv_transfer.h; byte layout in docs/disaggregation.md). All
// integers are little-endian; the reader checks every length against the bytes it has before
// it reads or allocates, so a truncated or corrupt message is refused, never over-read.
#include "lmstack/serve/kv_transfer.h"

#include <array>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/model/kv_cache.h"

namespace lmstack::serve {
namespace {

uint8_t dtype_code(DType t) {
  if (t == DType::kF32) return 0;
  if (t == DType::kBF16) return 1;
  if (t == DType::kI8) return 2;
  LMSTACK_CHECK(false, "KV transfer of dtype {}", dtype_name(t));
  return 0;
}

DType dtype_of_code(uint8_t code) {
  if (code == 0) return DType::kF32;
  if (code == 1) return DType::kBF16;
  if (code == 2) return DType::kI8;
  throw_error<FormatError>("KV transfer: header field kv_dtype has unknown code {}", code);
}

// Appends little-endian values (x86 and ARM are little-endian; lmstack builds on nothing else).
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  template <class T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  // The CRC of everything since `from`, appended.
  void seal(size_t from) { put<uint32_t>(crc32(out_.data() + from, out_.size() - from)); }
  size_t size() const { return out_.size(); }

 private:
  std::string& out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  const char* take(size_t n) {
    LMSTACK_CHECK(pos_ + n <= in_.size(), "KV reader past its checked length");
    const char* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  // Reads the CRC that ends the section begun at `from`; FormatError naming it on mismatch.
  void check_seal(size_t from, const std::string& section) {
    const uint32_t want = crc32(in_.data() + from, pos_ - from);
    const uint32_t got = get<uint32_t>();
    if (got != want)
      throw_error<FormatError>("KV transfer: {} checksum mismatch (stored {:08x}, computed {:08x})",
                               section, got, want);
  }
  size_t pos() const { return pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

void check_layout(const KvLayout& got, const KvLayout& want) {
  auto field = [](const char* name, uint64_t g, uint64_t w) {
    if (g != w)
      throw_error<FormatError>(
          "KV transfer: model mismatch: {} is {} on the prefill server, {} on this one", name, g,
          w);
  };
  field("num_layers", got.num_layers, want.num_layers);
  field("kv_heads", got.kv_heads, want.kv_heads);
  field("head_dim", got.head_dim, want.head_dim);
  field("vocab_size", got.vocab_size, want.vocab_size);
  if (got.dtype != want.dtype)
    throw_error<FormatError>(
        "KV transfer: model mismatch: kv_dtype is {} on the prefill server, {} on this one",
        model::kv_dtype_name(got.dtype), model::kv_dtype_name(want.dtype));
  field("layer_token_bytes", got.layer_token_bytes, want.layer_token_bytes);
}

}  // namespace

uint64_t kv_message_bytes(const KvLayout& l, uint64_t num_tokens, uint64_t num_top) {
  return kKvHeaderBytes + (4 * num_tokens + 8 * num_top + 4) +
         uint64_t{l.num_layers} * (num_tokens * l.layer_token_bytes + 4);
}

std::string encode_kv_message(const KvHandoff& h) {
  const KvLayout& l = h.layout;
  const uint64_t T = h.prompt.size();
  LMSTACK_CHECK(h.kv.size() == uint64_t{l.num_layers} * T * l.layer_token_bytes,
                "KV handoff of {} bytes for {} layers x {} tokens x {} bytes", h.kv.size(),
                l.num_layers, T, l.layer_token_bytes);
  std::string out;
  out.reserve(kv_message_bytes(l, T, h.first.top.size()));
  Writer w(out);
  w.put<uint32_t>(kKvMagic);
  w.put<uint16_t>(kKvVersion);
  w.put<uint8_t>(dtype_code(l.dtype));
  w.put<uint8_t>(0);
  for (uint32_t v : {l.num_layers, l.kv_heads, l.head_dim, l.vocab_size, l.layer_token_bytes,
                     static_cast<uint32_t>(T), static_cast<uint32_t>(h.first.top.size())})
    w.put<uint32_t>(v);
  w.put<int32_t>(h.first.token);
  w.put<float>(h.first.logprob);
  w.put<uint64_t>(h.seed);
  w.put<uint64_t>(h.rng_draws);
  w.seal(0);
  const size_t tokens_at = w.size();
  w.bytes(h.prompt.data(), T * sizeof(int32_t));
  for (const model::TokenLogprob& t : h.first.top) {
    w.put<int32_t>(t.token);
    w.put<float>(t.logprob);
  }
  w.seal(tokens_at);
  const size_t layer_bytes = T * l.layer_token_bytes;
  for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
    const size_t at = w.size();
    w.bytes(h.kv.data() + layer * layer_bytes, layer_bytes);
    w.seal(at);
  }
  return out;
}

// One pass over the sections in order; each is length-checked before it is read and its
// CRC checked before its contents are used.
KvHandoff decode_kv_message(std::string_view bytes, const KvLayout& expected) {
  if (bytes.size() < kKvHeaderBytes)
    throw_error<FormatError>("KV transfer: truncated: the header needs {} bytes, got {}",
                             kKvHeaderBytes, bytes.size());
  Reader r(bytes);
  if (const uint32_t magic = r.get<uint32_t>(); magic != kKvMagic)
    throw_error<FormatError>("KV transfer: bad magic {:08x} (not an lmstack KV message)", magic);
  if (const uint16_t v = r.get<uint16_t>(); v != kKvVersion)
    throw_error<FormatError>("KV transfer: version {} is not supported (this server reads {})", v,
                             kKvVersion);
  const uint8_t code = r.get<uint8_t>();
  r.get<uint8_t>();
  KvHandoff h;
  KvLayout& l = h.layout;
  l.num_layers = r.get<uint32_t>();
  l.kv_heads = r.get<uint32_t>();
  l.head_dim = r.get<uint32_t>();
  l.vocab_size = r.get<uint32_t>();
  l.layer_token_bytes = r.get<uint32_t>();
  const uint32_t T = r.get<uint32_t>(), num_top = r.get<uint32_t>();
  h.first.token = r.get<int32_t>();
  h.first.logprob = r.get<float>();
  h.seed = r.get<uint64_t>();
  h.rng_draws = r.get<uint64_t>();
  r.check_seal(0, "header");
  l.dtype = dtype_of_code(code);
  check_layout(l, expected);
  if (T == 0 || T > kKvMaxTokens)
    throw_error<FormatError>("KV transfer: num_tokens {} is outside [1, {}]", T, kKvMaxTokens);
  if (num_top > kKvMaxTop)
    throw_error<FormatError>("KV transfer: num_top {} exceeds {}", num_top, kKvMaxTop);
  const uint64_t total = kv_message_bytes(l, T, num_top);
  if (bytes.size() != total)
    throw_error<FormatError>("KV transfer: {}: {} bytes, the header says {}",
                             bytes.size() < total ? "truncated" : "trailing bytes", bytes.size(),
                             total);
  const size_t tokens_at = r.pos();
  h.prompt.resize(T);
  std::memcpy(h.prompt.data(), r.take(size_t{T} * 4), size_t{T} * 4);
  for (uint32_t i = 0; i < num_top; ++i) {
    const int32_t token = r.get<int32_t>();
    h.first.top.push_back({token, r.get<float>()});
  }
  r.check_seal(tokens_at, "token section");
  auto in_vocab = [&](int32_t t) { return t >= 0 && static_cast<uint32_t>(t) < l.vocab_size; };
  for (uint32_t i = 0; i < T; ++i)
    if (!in_vocab(h.prompt[i]))
      throw_error<FormatError>(
          "KV transfer: prompt token {} at position {} is outside the vocabulary", h.prompt[i], i);
  if (!in_vocab(h.first.token))
    throw_error<FormatError>("KV transfer: first_token {} is outside the vocabulary",
                             h.first.token);
  const size_t layer_bytes = size_t{T} * l.layer_token_bytes;
  h.kv.resize(layer_bytes * l.num_layers);
  for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
    const size_t at = r.pos();
    std::memcpy(h.kv.data() + layer * layer_bytes, r.take(layer_bytes), layer_bytes);
    r.check_seal(at, fmt::format("layer {} KV", layer));
  }
  return h;
}

}  // namespace lmstack::serve
