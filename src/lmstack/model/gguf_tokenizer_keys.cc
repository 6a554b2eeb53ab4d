// tokenizer.* keys for lmstack convert (see gguf_tokenizer_keys.h), in the form gguf-py's
// SpecialVocab/BPE vocab writers give them: tokens in the byte-level alphabet exactly as
// tokenizer.json spells them, merges as "LEFT RIGHT" strings, token_type 1 normal, 3 control
// (special added tokens), 4 user-defined (other added tokens), 5 unused (padding ids).
#include <algorithm>
#include <cctype>

#include "lmstack/core/file.h"
#include "lmstack/model/gguf_tokenizer_keys.h"
#include "lmstack/tokenizer/chat_template.h"
#include "lmstack/tokenizer/scanners.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::model {
namespace {

void flatten(const Json& pre, std::vector<Json>& steps) {
  if (!pre.is_object()) return;
  if (pre.value("type", "") == "Sequence") {
    for (const Json& p : pre.value("pretokenizers", Json::array())) flatten(p, steps);
    return;
  }
  steps.push_back(pre);
}

bool is_byte_level(const Json& s, bool use_regex) {
  return s.value("type", "") == "ByteLevel" && s.value("use_regex", true) == use_regex &&
         !s.value("add_prefix_space", false);
}

// llama.cpp's tokenizer.ggml.pre name for a byte-level pre-tokenizer, or "" if it has none.
std::string pre_name(const Json& tokenizer_json) {
  std::vector<Json> s;
  flatten(tokenizer_json.value("pre_tokenizer", Json()), s);
  const bool ignore_merges = tokenizer_json["model"].value("ignore_merges", false);
  if (s.size() == 1 && is_byte_level(s[0], true)) return "gpt-2";
  if (s.size() != 2) return "";
  if (s[0].value("type", "") == "Digits" && s[0].value("individual_digits", false) &&
      is_byte_level(s[1], true))
    return "smollm";
  if (s[0].value("type", "") != "Split" || !is_byte_level(s[1], false) ||
      s[0].value("behavior", "") != "Isolated" || s[0].value("invert", false))
    return "";
  const Json& pattern = s[0].value("pattern", Json::object());
  if (!pattern.contains("Regex") || !pattern["Regex"].is_string()) return "";
  const auto spec = tokenizer::scanner_for_pattern(pattern["Regex"].get<std::string>());
  if (!spec) return "";
  if (spec->kind == tokenizer::ScannerKind::kGpt2) return "gpt-2";
  if (spec->kind == tokenizer::ScannerKind::kCl100k && spec->max_digits == 1) return "qwen2";
  if (spec->kind == tokenizer::ScannerKind::kCl100k) return ignore_merges ? "llama-bpe" : "dbrx";
  return "";
}

// A tokenizer.json llama.cpp runs as SentencePiece ("llama"): BPE with byte fallback, or
// one whose decoder replaces U+2581 by spaces (Llama 2, Mistral, TinyLlama).
bool is_sentencepiece_style(const Json& j) {
  const Json& model = j.value("model", Json());
  if (model.is_object() && model.value("byte_fallback", false)) return true;
  const Json& decoder = j.value("decoder", Json());
  return decoder.value("type", "") != "ByteLevel" &&
         decoder.dump().find("\xE2\x96\x81") != std::string::npos;  // U+2581 -> space
}

void check_byte_level_bpe(const Json& j, const std::string& src) {
  const Json& model = j.value("model", Json());
  if (!model.is_object() || model.value("type", "BPE") != "BPE")
    throw_error<ConfigError>("{}: model.type must be BPE to convert to GGUF", src);
  if (j.value("decoder", Json()).value("type", "") != "ByteLevel")
    throw_error<ConfigError>(
        "{}: convert handles byte-level BPE (decoder ByteLevel) and SentencePiece-style BPE "
        "(byte_fallback, Metaspace or Prepend/Replace U+2581); this tokenizer is neither",
        src);
}

// gguf-py's add_chat_template: the default as tokenizer.chat_template, every other named
// template as tokenizer.chat_template.<name> (non-alphanumerics as '_') listed in
// tokenizer.chat_templates.
void add_chat_template_keys(GgufWriter& w, const tokenizer::Tokenizer& tok) {
  if (!tok.chat_template().empty())
    w.set("tokenizer.chat_template", GgufValue::string(tok.chat_template()));
  std::vector<std::string> names;
  for (const auto& [name, text] : tokenizer::chat_templates(tok)) {
    if (name == "default") continue;
    std::string key = name;
    for (char& ch : key)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    w.set("tokenizer.chat_template." + key, GgufValue::string(text));
    names.push_back(key);
  }
  if (!names.empty()) w.set("tokenizer.chat_templates", GgufValue::string_array(std::move(names)));
}

void add_from_tokenizer_json(GgufWriter& w, const ModelConfig& c, const std::string& dir,
                             const Json& j) {
  const std::string src = path_join(dir, "tokenizer.json");
  check_byte_level_bpe(j, src);
  const std::string pre = pre_name(j);
  if (pre.empty())
    throw_error<ConfigError>(
        "{}: pre_tokenizer has no llama.cpp tokenizer.ggml.pre name (convert knows GPT-2's "
        "ByteLevel, Llama 3's and Qwen2's Split + ByteLevel, SmolLM's Digits + ByteLevel)",
        src);
  GgufVocab v = gguf_vocab(j, c, src);
  w.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  w.set("tokenizer.ggml.pre", GgufValue::string(pre));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(std::move(v.tokens)));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(std::move(v.types)));
  w.set("tokenizer.ggml.merges",
        GgufValue::string_array(merge_strings(j["model"].value("merges", Json::array()), src)));
  add_special_token_keys(w, c, dir);
}

}  // namespace

std::vector<std::string> merge_strings(const Json& merges, const std::string& src) {
  std::vector<std::string> out;
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& m = merges[i];
    if (m.is_string() && m.get<std::string>().find(' ') != std::string::npos)
      out.push_back(m.get<std::string>());
    else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
      out.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    else
      throw_error<FormatError>("{}: model.merges[{}] is neither 'A B' nor [A, B]", src, i);
  }
  return out;
}

GgufVocab gguf_vocab(const Json& j, const ModelConfig& c, const std::string& src) {
  const Json& vocab = j["model"].value("vocab", Json::object());
  const Json& added = j.value("added_tokens", Json::array());
  auto id_of = [&](const Json& id, const std::string& what) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (1 << 24))
      throw_error<FormatError>("{}: {} has id {}, not a token id", src, what, id.dump());
    return id.get<int64_t>();
  };
  int64_t n = c.vocab_size;
  for (const auto& [tok, id] : vocab.items()) n = std::max(n, id_of(id, "vocab '" + tok + "'") + 1);
  for (const Json& a : added) n = std::max(n, id_of(a.value("id", Json()), "an added token") + 1);
  GgufVocab v;
  v.tokens.resize(static_cast<size_t>(n));
  v.types.assign(static_cast<size_t>(n), kGgufUnused);
  for (size_t i = 0; i < v.tokens.size(); ++i) v.tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (const auto& [tok, id] : vocab.items()) {
    v.tokens[id.get<size_t>()] = tok;
    v.types[id.get<size_t>()] = kGgufNormal;
  }
  for (const Json& a : added) {
    const auto id = a["id"].get<size_t>();
    v.tokens[id] = a.value("content", "");
    v.types[id] = a.value("special", false) ? kGgufControl : kGgufUserDefined;
  }
  return v;
}

void add_special_token_keys(GgufWriter& w, const ModelConfig& c, const std::string& dir) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(dir);
  const int64_t bos = c.bos_token_id >= 0 ? c.bos_token_id : tok.bos_id().value_or(-1);
  const int64_t eos = !c.eos_token_ids.empty() ? c.eos_token_ids[0] : tok.eos_id().value_or(-1);
  if (bos >= 0) w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(bos)));
  if (eos >= 0) w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(eos)));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(tok.add_bos_token()));
  add_chat_template_keys(w, tok);
}

void add_tokenizer_keys(GgufWriter& w, const ModelConfig& c, const std::string& source) {
  if (!is_directory(source)) {
    const GgufFile src(source);
    for (const auto& [key, value] : src.metadata())
      if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
    return;
  }
  const std::string src = path_join(source, "tokenizer.json");
  const Json j = parse_json(read_file(src), src);
  if (is_sentencepiece_style(j))
    add_sentencepiece_keys(w, c, source, j);
  else
    add_from_tokenizer_json(w, c, source, j);
}

}  // namespace lmstack::model
