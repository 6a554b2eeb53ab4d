// Loaders for tiktoken rank files (`base64(bytes) rank` per line) and GPT-2's encoder.json +
// vocab.bpe. Both use tiktoken's merge rule (the rank of a token is its id and its merge
// priority), which is what makes GPT-2 via encoder.json identical to r50k_base.
#include <charconv>

#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/byte_level.h"
#include "lmstack/tokenizer/encodings.h"
#include "lmstack/tokenizer/token_ids.h"
#include "lmstack/tokenizer/tokenizer_impl.h"

namespace lmstack::tokenizer {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding; nullopt if malformed.
std::optional<std::string> base64_decode(std::string_view s) {
  if (s.empty() || s.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < s.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s[i + k];
      if (c == '=' && i + 4 == s.size() && k >= 2) {
        v[k] = 0, ++pad;
      } else {
        if (pad > 0 || (v[k] = base64_value(c)) < 0) return std::nullopt;
      }
    }
    const uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>(n >> 16);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(n & 0xFF);
  }
  return out;
}

const EncodingPreset& require_encoding(const std::string& encoding, const std::string& source) {
  const EncodingPreset* p = find_encoding(encoding);
  if (p == nullptr)
    throw_error<ConfigError>("{}: unknown encoding '{}' (known: {})", source, encoding,
                             known_encoding_names());
  return *p;
}

// Pattern, special tokens and bos/eos of a rank-based encoding; finalizes.
void apply_preset(TokenizerImpl& t, const EncodingPreset& p, const std::string& source) {
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    if (!t.bpe.find(std::string_view(&c, 1)))
      throw_error<FormatError>("{}: no token for the single byte 0x{:02X}", source, b);
  }
  t.bpe.finalize(BpeOptions{});  // kByRank, whole pieces first
  PreTokenizerStep split;
  split.scanner = p.scanner;
  t.pipeline = TextPipeline({}, {split});
  for (const auto& [content, id] : p.special_tokens) {
    if (!t.bpe.symbol(id).empty())
      throw_error<FormatError>("{}: special token {} id {} is also an ordinary token's rank",
                               source, content, id);
    t.added.push_back({content, id, true});
  }
  t.name = p.name;
  t.bos_token = p.bos_token;
  t.eos_token = p.eos_token;
  t.add_bos_token = p.add_bos_token;
  t.finalize();
}

}  // namespace

std::shared_ptr<TokenizerImpl> build_tiktoken(std::string_view data, const std::string& encoding,
                                              const std::string& source) {
  const EncodingPreset& preset = require_encoding(encoding, source);
  auto t = std::make_shared<TokenizerImpl>();
  size_t line_no = 0;
  for (size_t pos = 0; pos < data.size();) {
    size_t eol = data.find('\n', pos);
    if (eol == std::string_view::npos) eol = data.size();
    std::string_view line = data.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos)
      throw_error<FormatError>("{}:{}: expected 'BASE64 RANK', got '{}'", source, line_no,
                               line.substr(0, 60));
    const auto bytes = base64_decode(line.substr(0, sp));
    if (!bytes)
      throw_error<FormatError>("{}:{}: invalid base64 '{}'", source, line_no, line.substr(0, sp));
    int32_t rank = -1;
    const std::string_view r = line.substr(sp + 1);
    const auto [end, ec] = std::from_chars(r.data(), r.data() + r.size(), rank);
    if (ec != std::errc() || end != r.data() + r.size() || rank < 0)
      throw_error<FormatError>("{}:{}: invalid rank '{}'", source, line_no, r);
    t->bpe.add_token(rank, *bytes, fmt::format("{}:{}", source, line_no));
  }
  if (t->bpe.num_tokens() == 0) throw_error<FormatError>("{}: no tokens", source);
  apply_preset(*t, preset, source);
  return t;
}

std::shared_ptr<TokenizerImpl> build_gpt2(std::string_view encoder_json, std::string_view vocab_bpe,
                                          const std::string& source) {
  const EncodingPreset& preset = require_encoding("gpt2", source);
  const std::string enc_src = source + "/encoder.json", bpe_src = source + "/vocab.bpe";
  const Json j = parse_json(std::string(encoder_json), enc_src);
  if (!j.is_object()) throw_error<FormatError>("{}: expected a JSON object", enc_src);
  auto t = std::make_shared<TokenizerImpl>();
  for (const auto& [key, value] : j.items()) {
    if (!value.is_number_integer())
      throw_error<FormatError>("{}: token '{}' has a non-integer id", enc_src, key);
    const int32_t id = checked_token_id(value.get<int64_t>(), enc_src + ": token '" + key + "'");
    bool special = false;
    for (const auto& [content, sid] : preset.special_tokens) special |= content == key;
    if (special) continue;
    const auto bytes = byte_level_decode(key);
    if (!bytes)
      throw_error<FormatError>(
          "{}: token '{}' (id {}) uses characters outside GPT-2's byte "
          "alphabet",
          enc_src, key, id);
    t->bpe.add_token(id, *bytes, enc_src);
  }
  // vocab.bpe: "#version" line, then merge i = "left right" must create token 256 + i.
  size_t line_no = 0, merge = 0;
  for (size_t pos = 0; pos < vocab_bpe.size();) {
    size_t eol = vocab_bpe.find('\n', pos);
    if (eol == std::string_view::npos) eol = vocab_bpe.size();
    const std::string_view line = vocab_bpe.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t sp = line.find(' ');
    const auto left = byte_level_decode(line.substr(0, std::min(sp, line.size())));
    const auto right =
        sp == std::string_view::npos ? std::nullopt : byte_level_decode(line.substr(sp + 1));
    if (!left || !right)
      throw_error<FormatError>("{}:{}: expected 'LEFT RIGHT' in the byte alphabet, got '{}'",
                               bpe_src, line_no, line);
    const auto id = t->bpe.find(*left + *right);
    const int32_t expected = static_cast<int32_t>(256 + merge++);
    if (!id || *id != expected)
      throw_error<FormatError>(
          "{}:{}: merge '{}' should create token {} of encoder.json, "
          "found {}",
          bpe_src, line_no, line, expected, id ? std::to_string(*id) : "no token");
  }
  if (merge + 256 != t->bpe.num_tokens())
    throw_error<FormatError>("{}: {} merges for {} tokens in encoder.json (expected {})", bpe_src,
                             merge, t->bpe.num_tokens(), t->bpe.num_tokens() - 256);
  apply_preset(*t, preset, source);
  return t;
}

Tokenizer Tokenizer::from_tiktoken(std::string_view rank_file, const std::string& encoding,
                                   const std::string& source) {
  return Tokenizer(build_tiktoken(rank_file, encoding, source));
}

Tokenizer Tokenizer::from_gpt2(std::string_view encoder_json, std::string_view vocab_bpe,
                               const std::string& source) {
  return Tokenizer(build_gpt2(encoder_json, vocab_bpe, source));
}

}  // namespace lmstack::tokenizer
