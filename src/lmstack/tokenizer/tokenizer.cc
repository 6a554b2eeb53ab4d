// Encoding, decoding and metadata of Tokenizer (see tokenizer.h). Loading lives in load*.cc.
#include "lmstack/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/tokenizer/token_ids.h"
#include "lmstack/tokenizer/tokenizer_impl.h"
#include "lmstack/tokenizer/unicode.h"

namespace lmstack::tokenizer {
namespace {

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// "<0x0A>" -> 0x0A (SentencePiece byte-fallback token spelling).
std::optional<char> byte_fallback_value(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(s[3]), lo = hex(s[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<char>(hi * 16 + lo);
}

}  // namespace

void TokenizerImpl::finalize() {
  std::stable_sort(added.begin(), added.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();  // longest match first
  });
  int32_t max_id = bpe.max_id();
  for (const AddedToken& t : added) max_id = std::max(max_id, checked_token_id(t.id, name));
  check_token_id_density(max_id, bpe.num_tokens() + added.size(), name);
  vocab_size = max_id + 1;
  kinds.assign(vocab_size, TokenKind::kUnused);
  decode_span.assign(vocab_size, {0, 0});
  decode_arena.clear();
  for (int32_t id = 0; id <= bpe.max_id(); ++id) {
    std::string_view sym = bpe.symbol(id);
    if (sym.empty()) continue;
    kinds[id] = TokenKind::kNormal;
    std::string bytes(sym);
    std::optional<char> fb = decode_byte_fallback ? byte_fallback_value(sym) : std::nullopt;
    if (fb) {
      bytes.assign(1, *fb);
    } else {
      for (const auto& [from, to] : decode_replacements) replace_all(bytes, from, to);
    }
    decode_span[id] = {static_cast<uint32_t>(decode_arena.size()),
                       static_cast<uint32_t>(bytes.size())};
    decode_arena += bytes;
  }
  added_first_byte.fill(false);
  for (const AddedToken& t : added) {
    if (t.content.empty()) throw_error<FormatError>("{}: added token {} is empty", name, t.id);
    if (kinds[t.id] == TokenKind::kSpecial || kinds[t.id] == TokenKind::kAdded) {
      const std::string_view before =
          std::string_view(decode_arena).substr(decode_span[t.id].first, decode_span[t.id].second);
      if (before != t.content)
        throw_error<FormatError>("{}: added tokens '{}' and '{}' share the id {}", name, before,
                                 t.content, t.id);
    }
    kinds[t.id] = t.special ? TokenKind::kSpecial : TokenKind::kAdded;
    decode_span[t.id] = {static_cast<uint32_t>(decode_arena.size()),
                         static_cast<uint32_t>(t.content.size())};
    decode_arena += t.content;
    added_first_byte[static_cast<uint8_t>(t.content[0])] = true;
    (t.special ? any_special : any_plain_added) = true;
  }
}

std::optional<AddedMatch> TokenizerImpl::find_added(std::string_view text, size_t from,
                                                    bool include_special) const {
  if (!any_plain_added && !(any_special && include_special)) return std::nullopt;
  for (size_t i = from; i < text.size(); ++i) {
    if (!added_first_byte[static_cast<uint8_t>(text[i])]) continue;
    for (const AddedToken& t : added) {
      if ((t.special && !include_special) || text.compare(i, t.content.size(), t.content) != 0)
        continue;
      size_t b = i, e = i + t.content.size();
      if (t.lstrip)
        while (b > from && is_ascii_space(text[b - 1])) --b;
      if (t.rstrip)
        while (e < text.size() && is_ascii_space(text[e])) ++e;
      return AddedMatch{b, e - b, &t};
    }
  }
  return std::nullopt;
}

void TokenizerImpl::encode_ordinary(std::string_view text, bool at_input_start,
                                    std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (pipeline.has_normalizer()) {  // tokenizers without one (tiktoken, GPT-2) touch nothing
    thread_local std::string normalized;
    pipeline.normalize(text, normalized);
    text = normalized;
  }
  if (pipeline.has_fast_path()) {
    thread_local std::vector<uint32_t> ends;
    ends.clear();
    pipeline.split_fast(text, ends);
    uint32_t b = 0;
    for (uint32_t e : ends) {
      bpe.encode_piece(text.substr(b, e - b), out);
      b = e;
    }
    return;
  }
  std::vector<std::string> pieces;
  pipeline.split(text, at_input_start, pieces);
  for (const std::string& p : pieces) bpe.encode_piece(p, out);
}

std::string_view TokenizerImpl::bytes_of(int32_t id) const {
  if (id < 0 || id >= vocab_size)
    throw_error<RequestError>("token id {} is out of range (vocabulary size {})", id, vocab_size);
  if (kinds[id] == TokenKind::kUnused)
    throw_error<RequestError>("token id {} is not assigned to any token in {}", id, name);
  return std::string_view(decode_arena).substr(decode_span[id].first, decode_span[id].second);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, SpecialMode mode) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  encode_append(text, mode, out);
  return out;
}

void Tokenizer::encode_append(std::string_view text, SpecialMode mode,
                              std::vector<int32_t>& out) const {
  const TokenizerImpl& t = *impl_;
  size_t pos = 0;
  while (true) {
    const auto m = t.find_added(text, pos, mode != SpecialMode::kAsText);
    if (m && m->token->special && mode == SpecialMode::kError)
      throw_error<RequestError>(
          "the input contains the special token '{}' at byte {}; allow it (--special allow / "
          "SpecialMode::kAllow) or encode it as text (--special text / SpecialMode::kAsText)",
          m->token->content, m->pos);
    const size_t end = m ? m->pos : text.size();
    t.encode_ordinary(text.substr(pos, end - pos), pos == 0, out);
    if (!m) break;
    out.push_back(m->token->id);
    pos = m->pos + m->len;
  }
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(ThreadPool& pool,
                                                          const std::vector<std::string>& texts,
                                                          SpecialMode mode) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  pool.parallel_for(static_cast<int64_t>(texts.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = encode(texts[i], mode);
  });
  return out;
}

void Tokenizer::clear_thread_cache() { BpeModel::clear_thread_cache(); }

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
  std::vector<std::string> pieces;
  std::string normalized;
  if (impl_->pipeline.has_normalizer()) {
    impl_->pipeline.normalize(text, normalized);
    text = normalized;
  }
  if (impl_->pipeline.has_fast_path()) {
    std::vector<uint32_t> ends;
    impl_->pipeline.split_fast(text, ends);
    uint32_t b = 0;
    for (uint32_t e : ends) pieces.emplace_back(text.substr(b, e - b)), b = e;
  } else {
    impl_->pipeline.split(text, true, pieces);
  }
  return pieces;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += impl_->bytes_of(id);
  for (int k = 0; k < impl_->decode_strip_leading_spaces && !out.empty() && out[0] == ' '; ++k)
    out.erase(0, 1);
  return out;
}

std::string Tokenizer::decode_text(std::span<const int32_t> ids) const {
  return replace_invalid_utf8(decode(ids));
}

Tokenizer::IncrementalDecoder Tokenizer::incremental_decoder() const {
  return IncrementalDecoder(*this);
}

std::string Tokenizer::IncrementalDecoder::push(int32_t id) {
  std::string_view bytes = tok_.impl_->bytes_of(id);
  if (!started_) {
    for (int k = 0;
         k < tok_.impl_->decode_strip_leading_spaces && !bytes.empty() && bytes[0] == ' '; ++k)
      bytes.remove_prefix(1);
    started_ = !bytes.empty();
  }
  pending_ += bytes;
  const size_t keep = incomplete_utf8_suffix(pending_);  // may still become a character
  std::string out =
      replace_invalid_utf8(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string Tokenizer::IncrementalDecoder::flush() {
  std::string out = replace_invalid_utf8(pending_);
  pending_.clear();
  return out;
}

int Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  for (const AddedToken& t : impl_->added)
    if (t.content == token) return t.id;
  if (impl_->byte_level) return impl_->bpe.find(token);
  for (int32_t id = 0; id < impl_->vocab_size; ++id)  // SentencePiece style: by decoded text
    if (impl_->kinds[id] == TokenKind::kNormal && impl_->bytes_of(id) == token) return id;
  return impl_->bpe.find(token);
}

std::string Tokenizer::token_bytes(int32_t id) const { return std::string(impl_->bytes_of(id)); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->kinds[id] == TokenKind::kSpecial;
}

std::vector<std::pair<std::string, int32_t>> Tokenizer::special_tokens() const {
  std::vector<std::pair<std::string, int32_t>> s;
  for (const AddedToken& t : impl_->added)
    if (t.special) s.emplace_back(t.content, t.id);
  std::sort(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return s;
}

const std::string& Tokenizer::name() const { return impl_->name; }
size_t Tokenizer::num_merges() const {
  return impl_->bpe.options().rule == MergeRule::kByMergeList
             ? impl_->bpe.num_merges()
             : impl_->bpe.num_tokens() - std::min<size_t>(256, impl_->bpe.num_tokens());
}
bool Tokenizer::is_byte_level() const { return impl_->byte_level; }
const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos_token.empty() ? std::nullopt : token_id(impl_->bos_token);
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos_token.empty() ? std::nullopt : token_id(impl_->eos_token);
}
bool Tokenizer::add_bos_token() const { return impl_->add_bos_token; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace lmstack::tokenizer
