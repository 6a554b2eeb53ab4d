// Tokenizers from GGUF metadata (keys as llama.cpp's gguf-py writes them: tokenizer.ggml.model,
// .tokens, .token_type, .scores, .merges, .pre, .bos/eos/unknown_token_id, .add_bos_token,
// .add_space_prefix, tokenizer.chat_template[s]), built on the same BPE model and text pipeline as
// tokenizer.json files:
//   "gpt2"   byte-level BPE: tokens in GPT-2's byte alphabet, merges "LEFT RIGHT" by rank, and
//            the pre-tokenizer named by tokenizer.ggml.pre (a small table of llama.cpp's names).
//   "llama"  SentencePiece BPE (as llama.cpp's llm_tokenizer_spm runs it): spaces become U+2581
//            with one prepended per text section, then adjacent symbols merge highest score of
//            the merged token first (leftmost among equal scores); characters without a token
//            fall back to <0xNN> byte tokens. Implemented as derived merges: every pair of tokens
//            that concatenates to a token, ranked by that token's score (equal scores, equal rank).
// Not supported (refused by name): "bert", "t5", "rwkv" vocabularies and unknown pre types.
#include <algorithm>
#include <map>

#include "lmstack/core/error.h"
#include "lmstack/core/gguf.h"
#include "lmstack/tokenizer/byte_level.h"
#include "lmstack/tokenizer/tokenizer_impl.h"
#include "lmstack/tokenizer/unicode.h"

namespace lmstack::tokenizer {
namespace {

// llama.cpp's llama_token_type values (tokenizer.ggml.token_type).
enum GgufTokenType : int64_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// A pre-tokenizer by llama.cpp's tokenizer.ggml.pre name: the splits its regex list makes.
struct PrePreset {
  const char* name;
  std::vector<std::string> regexes;  // applied in order, each isolating its matches
  bool digits_first = false;         // split every digit apart first (SmolLM's Digits step)
  bool ignore_merges = false;        // a piece that is a token is that token (Llama 3)
};

const std::vector<PrePreset>& pre_presets() {
  const std::string gpt2 = scanner_pattern({ScannerKind::kGpt2, 0});
  const std::string cl100k = scanner_pattern({ScannerKind::kCl100k, 3});
  const std::string qwen2 = scanner_pattern({ScannerKind::kCl100k, 1});
  static const std::vector<PrePreset> presets = {
      {"gpt-2", {gpt2}},
      {"default", {R"([\p{P}\$\+<=>\^~\|]+)", gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {"llama-bpe", {cl100k}, false, true},
      {"llama3", {cl100k}, false, true},
      {"smaug-bpe", {cl100k}},
      {"dbrx", {cl100k}},
      {"qwen2", {qwen2}},
      {"smollm", {gpt2}, true},
  };
  return presets;
}

std::string pre_names() {
  std::string s;
  for (const PrePreset& p : pre_presets()) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::vector<PreTokenizerStep> pre_steps(const std::string& pre, const std::string& src,
                                        bool& ignore_merges) {
  for (const PrePreset& p : pre_presets()) {
    if (pre != p.name) continue;
    std::vector<PreTokenizerStep> steps;
    if (p.digits_first) {
      PreTokenizerStep d;
      d.kind = PreTokenizerStep::Kind::kDigits;
      d.individual_digits = true;
      steps.push_back(d);
    }
    for (const std::string& r : p.regexes) steps.push_back(make_split_step(r));
    ignore_merges = p.ignore_merges;
    return steps;
  }
  throw_error<ConfigError>(
      "{}: tokenizer.ggml.pre '{}' is not supported (supported: {}); its split regex is not "
      "known to lmstack",
      src, pre, pre_names());
}

std::vector<int64_t> token_types(const GgufFile& f, size_t n) {
  if (!f.has("tokenizer.ggml.token_type")) return std::vector<int64_t>(n, kNormal);
  std::vector<int64_t> types = f.get_ints("tokenizer.ggml.token_type");
  if (types.size() != n)
    throw_error<FormatError>("{}: tokenizer.ggml.token_type has {} entries for {} tokens", f.path(),
                             types.size(), n);
  return types;
}

// Control/unknown tokens become special added tokens, user-defined ones plain added tokens.
// Returns false for tokens that are not special (the caller adds them to the BPE model).
bool add_special(TokenizerImpl& t, int64_t type, const std::string& text, int32_t id) {
  if (type == kControl || type == kUnknown) {
    if (!text.empty()) t.added.push_back({text, id, true});
    return true;
  }
  if (type == kUserDefined) {
    if (!text.empty()) t.added.push_back({text, id, false});
    return true;
  }
  return type == kUnused;
}

void build_byte_level(const GgufFile& f, TokenizerImpl& t) {
  const std::string src = f.path();
  const std::vector<std::string>& tokens = f.get_strings("tokenizer.ggml.tokens");
  const std::vector<int64_t> types = token_types(f, tokens.size());
  bool ignore_merges = false;
  t.pipeline = TextPipeline(
      {}, pre_steps(f.get_string("tokenizer.ggml.pre", "default"), src, ignore_merges));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (add_special(t, types[i], tokens[i], id)) continue;
    t.bpe.add_token(id, byte_level_decode(tokens[i]).value_or(tokens[i]),
                    src + ": tokenizer.ggml.tokens");
  }
  const std::vector<std::string> no_merges;
  const std::vector<std::string>& merges =
      f.has("tokenizer.ggml.merges") ? f.get_strings("tokenizer.ggml.merges") : no_merges;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos || m.find(' ', sp + 1) != std::string::npos)
      throw_error<FormatError>("{}: tokenizer.ggml.merges[{}]: expected 'LEFT RIGHT', got '{}'",
                               src, i, m);
    const std::string left = byte_level_decode(m.substr(0, sp)).value_or(m.substr(0, sp));
    const std::string right = byte_level_decode(m.substr(sp + 1)).value_or(m.substr(sp + 1));
    const auto l = t.bpe.find(left), r = t.bpe.find(right), merged = t.bpe.find(left + right);
    if (!l || !r || !merged)
      throw_error<FormatError>(
          "{}: tokenizer.ggml.merges[{}] '{}': a part or the merged token "
          "is not in tokenizer.ggml.tokens",
          src, i, m);
    t.bpe.add_merge(*l, *r, *merged);
  }
  BpeOptions o;
  o.rule = MergeRule::kByMergeList;
  o.whole_piece_first = ignore_merges;
  t.bpe.finalize(o);
  t.byte_level = true;
}

// SentencePiece: dense rank of each normal token's score, highest score = rank 0.
std::map<double, int32_t, std::greater<>> score_ranks(const std::vector<double>& scores,
                                                      const std::vector<int64_t>& types) {
  std::map<double, int32_t, std::greater<>> ranks;
  for (size_t i = 0; i < scores.size(); ++i)
    if (types[i] == kNormal) ranks.emplace(scores[i], 0);
  int32_t r = 0;
  for (auto& [score, rank] : ranks) rank = r++;
  return ranks;
}

// Every split of a normal token into two tokens is a merge ranked by the token's score.
void add_spm_merges(const std::vector<std::string>& tokens, const std::vector<int64_t>& types,
                    const std::vector<double>& scores, BpeModel& bpe) {
  const auto ranks = score_ranks(scores, types);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] != kNormal) continue;
    const std::string& tok = tokens[i];
    const int32_t rank = ranks.at(scores[i]);
    const auto* s = reinterpret_cast<const uint8_t*>(tok.data());
    for (size_t k = decode_utf8(s, tok.size()).len; k < tok.size();
         k += decode_utf8(s + k, tok.size() - k).len) {
      const auto l = bpe.find(std::string_view(tok).substr(0, k));
      const auto r = bpe.find(std::string_view(tok).substr(k));
      if (l && r) bpe.add_merge(*l, *r, static_cast<int32_t>(i), rank);
    }
  }
}

void build_sentencepiece(const GgufFile& f, TokenizerImpl& t) {
  const std::string src = f.path();
  const std::vector<std::string>& tokens = f.get_strings("tokenizer.ggml.tokens");
  const std::vector<int64_t> types = token_types(f, tokens.size());
  const std::vector<double>& scores = f.get_floats("tokenizer.ggml.scores");
  if (scores.size() != tokens.size())
    throw_error<FormatError>("{}: tokenizer.ggml.scores has {} entries for {} tokens", src,
                             scores.size(), tokens.size());
  bool has_bytes = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (add_special(t, types[i], tokens[i], id)) continue;
    has_bytes |= types[i] == kByte;
    t.bpe.add_token(id, tokens[i], src + ": tokenizer.ggml.tokens");
  }
  add_spm_merges(tokens, types, scores, t.bpe);
  BpeOptions o;
  o.rule = MergeRule::kByMergeList;
  o.whole_piece_first = false;
  o.char_symbols = true;
  o.byte_fallback = has_bytes;
  const int64_t unk = f.get_int("tokenizer.ggml.unknown_token_id", -1);
  if (unk >= 0 && unk < static_cast<int64_t>(tokens.size())) o.unk_id = static_cast<int32_t>(unk);
  t.bpe.finalize(o);
  const bool space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", true);
  std::vector<NormalizerStep> normalizer;
  if (space_prefix) normalizer.push_back({NormalizerStep::Kind::kPrepend, kSpace, ""});
  normalizer.push_back({NormalizerStep::Kind::kReplace, " ", kSpace});
  t.pipeline = TextPipeline(std::move(normalizer), {});
  t.byte_level = false;
  t.decode_replacements.emplace_back(kSpace, " ");
  t.decode_byte_fallback = has_bytes;
  t.decode_strip_leading_spaces = space_prefix ? 1 : 0;
}

std::string token_text(const GgufFile& f, const char* key) {
  const int64_t id = f.get_int(key, -1);
  const std::vector<std::string>& tokens = f.get_strings("tokenizer.ggml.tokens");
  if (id < 0) return "";
  if (id >= static_cast<int64_t>(tokens.size()))
    throw_error<FormatError>("{}: {} = {} is outside the {} tokens", f.path(), key, id,
                             tokens.size());
  return tokens[static_cast<size_t>(id)];
}

}  // namespace

std::shared_ptr<TokenizerImpl> build_gguf(const GgufFile& f) {
  auto t = std::make_shared<TokenizerImpl>();
  t->name = f.path();
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model == "gpt2")
    build_byte_level(f, *t);
  else if (model == "llama")
    build_sentencepiece(f, *t);
  else
    throw_error<ConfigError>(
        "{}: tokenizer.ggml.model '{}' is not supported (supported: gpt2 = byte-level BPE, "
        "llama = SentencePiece BPE)",
        f.path(), model);
  t->bos_token = token_text(f, "tokenizer.ggml.bos_token_id");
  t->eos_token = token_text(f, "tokenizer.ggml.eos_token_id");
  t->add_bos_token = f.get_bool("tokenizer.ggml.add_bos_token", model == "llama");
  t->chat_template = f.get_string("tokenizer.chat_template", "");
  if (f.has("tokenizer.chat_templates")) {  // gguf-py's named templates
    for (const std::string& name : f.get_strings("tokenizer.chat_templates"))
      t->chat_templates[name] = f.get_string("tokenizer.chat_template." + name);
    if (!t->chat_template.empty()) t->chat_templates["default"] = t->chat_template;
  }
  t->finalize();
  return t;
}

Tokenizer Tokenizer::from_gguf(const GgufFile& file) { return Tokenizer(build_gguf(file)); }

}  // namespace lmstack::tokenizer
