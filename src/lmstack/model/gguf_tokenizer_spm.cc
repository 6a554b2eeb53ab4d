// tokenizer.* keys of llama.cpp's SentencePiece vocabulary ("llama") for a SentencePiece-style
// tokenizer.json (see gguf_tokenizer_keys.h). llama.cpp's convert_hf_to_gguf.py reads these
// from tokenizer.model (piece, score, type); lmstack reads tokenizer.json, which holds the same
// vocabulary in the same id order, and writes what that converter would:
//   token_type  6 byte (<0xNN>), 3 control / 4 user-defined (added tokens, special or not, as
//               its added_tokens_decoder pass does), 1 normal, 5 unused ([PAD<id>] up to
//               config.vocab_size);
//   scores      SentencePiece BPE merges the adjacent pair whose merged piece scores highest.
//               tokenizer.json keeps that order as its merge list, so a normal token's score is
//               minus the rank of the first merge that makes it: the order of the
//               tokenizer.model scores, and llama.cpp then merges exactly as HF's BPE does.
//               Tokens no merge makes (single characters) score below every merge (a
//               multi-character one would then still be merged last by llama.cpp, never by
//               HF; tokenizer.json files converted from SentencePiece have none); control,
//               byte and unknown tokens 0, user-defined and padding -1000, as the converter.
//   add_space_prefix from the Prepend normalizer or Metaspace's prepend_scheme.
// Refused by name: Metaspace(split=true) (HF then merges within words only; llama.cpp's
// SentencePiece cannot), other normalizers or pre-tokenizers, continuing_subword_prefix /
// end_of_word_suffix.
#include <cctype>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lmstack/core/file.h"
#include "lmstack/model/gguf_tokenizer_keys.h"

namespace lmstack::model {
namespace {

// SentencePiece's byte-fallback pieces: exactly "<0xHH>" with two hex digits.
bool is_byte_token(const std::string& t) {
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

bool is_replace_space(const Json& n) {
  return n.value("type", "") == "Replace" && n.value("content", "") == kSpace &&
         n.value("pattern", Json::object()).value("String", "") == " ";
}

// Whether a space is prepended to the text (SentencePiece's add_dummy_prefix), from the two
// layouts transformers writes: Prepend + Replace normalizers (Llama 2 era), or a Metaspace
// pre-tokenizer (transformers >= 4.4x, 5.x). Throws ConfigError for anything else.
bool space_prefix_of(const Json& j, const std::string& src) {
  const Json& norm = j.value("normalizer", Json());
  const Json& pre = j.value("pre_tokenizer", Json());
  std::vector<Json> steps;
  if (norm.is_object() && norm.value("type", "") == "Sequence")
    steps = norm.value("normalizers", Json::array()).get<std::vector<Json>>();
  else if (norm.is_object())
    steps = {norm};
  bool prepend = false, replace = false;
  for (const Json& s : steps) {
    if (s.value("type", "") == "Prepend" && s.value("prepend", "") == kSpace && !replace)
      prepend = true;
    else if (is_replace_space(s))
      replace = true;
    else
      throw_error<ConfigError>(
          "{}: normalizer {} is not SentencePiece's (convert writes Prepend/Replace U+2581 as "
          "llama.cpp's 'llama' vocabulary and nothing else)",
          src, s.dump());
  }
  if (pre.is_null()) {
    if (!replace)
      throw_error<ConfigError>(
          "{}: neither a Replace(' ', U+2581) normalizer nor a Metaspace "
          "pre_tokenizer: not a SentencePiece-style tokenizer",
          src);
    return prepend;
  }
  if (replace || prepend || pre.value("type", "") != "Metaspace" ||
      pre.value("replacement", "") != kSpace)
    throw_error<ConfigError>("{}: pre_tokenizer {} is not SentencePiece's Metaspace(U+2581)", src,
                             pre.dump());
  if (pre.value("split", false))
    throw_error<ConfigError>(
        "{}: pre_tokenizer Metaspace has split=true (merges stay inside words), which "
        "llama.cpp's SentencePiece tokenizer cannot run",
        src);
  if (pre.contains("prepend_scheme")) return pre.value("prepend_scheme", "") != "never";
  return pre.value("add_prefix_space", true);
}

// Minus the rank of the first merge making each token; tokens no merge makes are absent.
std::map<std::string, double> merge_scores(const Json& merges, const std::string& src) {
  std::map<std::string, double> score;
  const std::vector<std::string> pairs = merge_strings(merges, src);
  for (size_t r = 0; r < pairs.size(); ++r) {
    std::string merged = pairs[r];
    merged.erase(merged.find(' '), 1);
    score.emplace(std::move(merged), -static_cast<double>(r));
  }
  return score;
}

}  // namespace

void add_sentencepiece_keys(GgufWriter& w, const ModelConfig& c, const std::string& dir,
                            const Json& j) {
  const std::string src = path_join(dir, "tokenizer.json");
  const Json& model = j.value("model", Json());
  if (!model.is_object() || model.value("type", "BPE") != "BPE")
    throw_error<ConfigError>("{}: model.type must be BPE to convert to GGUF", src);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!model.value(key, Json()).is_null())
      throw_error<ConfigError>("{}: model.{} is set; llama.cpp's SentencePiece has none", src, key);
  const bool space_prefix = space_prefix_of(j, src);
  const bool byte_fallback = model.value("byte_fallback", false);
  const std::map<std::string, double> scores_of =
      merge_scores(model.value("merges", Json::array()), src);
  GgufVocab v = gguf_vocab(j, c, src);
  const double below_merges = -static_cast<double>(model.value("merges", Json::array()).size());
  std::vector<double> scores(v.tokens.size(), -1000.0);  // user-defined and padding
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] == kGgufControl) {
      scores[i] = 0.0;
    } else if (v.types[i] == kGgufNormal && byte_fallback && is_byte_token(v.tokens[i])) {
      v.types[i] = kGgufByte;
      scores[i] = 0.0;
    } else if (v.types[i] == kGgufNormal) {
      const auto it = scores_of.find(v.tokens[i]);
      scores[i] = it != scores_of.end() ? it->second : below_merges;
    }
  }
  w.set("tokenizer.ggml.model", GgufValue::string("llama"));
  w.set("tokenizer.ggml.pre", GgufValue::string("default"));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(std::move(v.tokens)));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array(std::move(scores)));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(std::move(v.types)));
  w.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(space_prefix));
  const std::string unk = model.value("unk_token", Json()).is_string()
                              ? model["unk_token"].get<std::string>()
                              : std::string("<unk>");
  const Json& vocab = model.value("vocab", Json::object());
  int64_t unk_id = vocab.contains(unk) ? vocab[unk].get<int64_t>() : -1;
  for (const Json& a : j.value("added_tokens", Json::array()))
    if (a.value("content", "") == unk) unk_id = a["id"].get<int64_t>();
  if (unk_id >= 0)
    w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(static_cast<uint32_t>(unk_id)));
  add_special_token_keys(w, c, dir);
}

}  // namespace lmstack::model
