// Loader for Hugging Face tokenizer.json files whose model is BPE: byte-level ones (GPT-2,
// Llama 3, lmstack's trainer) and SentencePiece-converted ones with byte fallback (Llama 2,
// Mistral, TinyLlama, Phi-3, Gemma). Normalizers: NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// StripAccents, Replace, Prepend, Sequence; pre-tokenizers: Split, Sequence, ByteLevel,
// Digits, Metaspace, Punctuation, Whitespace, WhitespaceSplit, CharDelimiterSplit,
// BertPreTokenizer. Anything the pipeline cannot reproduce exactly (BertNormalizer,
// Precompiled, UnicodeScripts, WordPiece, Unigram, dropout, ...) is refused with a
// ConfigError naming the field.
#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/byte_level.h"
#include "lmstack/tokenizer/token_ids.h"
#include "lmstack/tokenizer/tokenizer_impl.h"

namespace lmstack::tokenizer {
namespace {

// `tokenizers` Punctuation: char::is_ascii_punctuation || Unicode general category P*.
constexpr const char* kPunctuation = R"([\p{P}!-/:-@\[-`{-~])";

std::string type_of(const Json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw_error<ConfigError>("{}: missing 'type'", where);
  return j["type"].get<std::string>();
}

// Split pattern {"Regex": ...} or {"String": ...} -> (is_regex, text).
std::pair<bool, std::string> pattern_of(const Json& step, const std::string& where) {
  const Json& p = step.value("pattern", Json());
  if (p.contains("Regex")) return {true, p["Regex"].get<std::string>()};
  if (p.contains("String")) return {false, p["String"].get<std::string>()};
  throw_error<ConfigError>("{}: 'pattern' needs 'Regex' or 'String'", where);
}

SplitBehavior behavior_of(const std::string& b, const std::string& where) {
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  throw_error<ConfigError>("{}: unknown split behavior '{}'", where, b);
}

void parse_pre_tokenizer(const Json& j, const std::string& where,
                         std::vector<PreTokenizerStep>& steps) {
  if (j.is_null()) return;
  const std::string type = type_of(j, where);
  using K = PreTokenizerStep::Kind;
  if (type == "Sequence") {
    const Json& list = j.value("pretokenizers", Json::array());
    for (size_t i = 0; i < list.size(); ++i)
      parse_pre_tokenizer(list[i], fmt::format("{}.pretokenizers[{}]", where, i), steps);
  } else if (type == "Split") {
    const auto [is_regex, text] = pattern_of(j, where);
    PreTokenizerStep s;
    if (is_regex) {
      s = make_split_step(text);
    } else {
      s.kind = K::kSplit;
      s.literal = text;
    }
    s.behavior = behavior_of(j.value("behavior", "Isolated"), where);
    s.invert = j.value("invert", false);
    steps.push_back(std::move(s));
  } else if (type == "Whitespace") {  // Rust `regex` \w+|[^\w\s]+, matches kept
    const std::string w = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control})";
    steps.push_back(make_regex_step("[" + w + "]+|[^" + w + R"(\s]+)", SplitBehavior::kRemoved,
                                    /*invert=*/true));
  } else if (type == "WhitespaceSplit") {  // char::is_whitespace, removed
    steps.push_back(make_regex_step(R"(\s)", SplitBehavior::kRemoved));
  } else if (type == "Punctuation") {  // char::is_ascii_punctuation || Unicode P*
    steps.push_back(
        make_regex_step(kPunctuation, behavior_of(j.value("behavior", "Isolated"), where)));
  } else if (type == "BertPreTokenizer") {
    steps.push_back(make_regex_step(R"(\s)", SplitBehavior::kRemoved));
    steps.push_back(make_regex_step(kPunctuation, SplitBehavior::kIsolated));
  } else if (type == "CharDelimiterSplit") {
    PreTokenizerStep s;
    s.literal = require<std::string>(j, "delimiter", where);
    if (s.literal.empty()) throw_error<ConfigError>("{}: empty 'delimiter'", where);
    s.behavior = SplitBehavior::kRemoved;
    steps.push_back(std::move(s));
  } else if (type == "ByteLevel") {
    PreTokenizerStep s;
    s.kind = K::kByteLevel;
    s.add_prefix_space = j.value("add_prefix_space", false);
    s.use_regex = j.value("use_regex", true);
    steps.push_back(std::move(s));
  } else if (type == "Digits") {
    PreTokenizerStep s;
    s.kind = K::kDigits;
    s.individual_digits = j.value("individual_digits", false);
    steps.push_back(std::move(s));
  } else if (type == "Metaspace") {
    PreTokenizerStep s;
    s.kind = K::kMetaspace;
    s.replacement = j.value("replacement", s.replacement);
    std::string scheme = j.value("prepend_scheme", "");
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";
    if (scheme == "always")
      s.prepend = PreTokenizerStep::Prepend::kAlways;
    else if (scheme == "first")
      s.prepend = PreTokenizerStep::Prepend::kFirst;
    else if (scheme == "never")
      s.prepend = PreTokenizerStep::Prepend::kNever;
    else
      throw_error<ConfigError>("{}: unknown prepend_scheme '{}'", where, scheme);
    s.split = j.value("split", true);
    steps.push_back(std::move(s));
  } else {
    throw_error<ConfigError>(
        "{}: pre-tokenizer '{}' is not supported (supported: Sequence, Split, ByteLevel, "
        "Digits, Metaspace, Punctuation, Whitespace, WhitespaceSplit, CharDelimiterSplit, "
        "BertPreTokenizer)",
        where, type);
  }
}

void parse_normalizer(const Json& j, const std::string& where, std::vector<NormalizerStep>& out) {
  if (j.is_null()) return;
  const std::string type = type_of(j, where);
  using K = NormalizerStep::Kind;
  static const std::pair<const char*, K> kNoArgs[] = {{"NFC", K::kNfc},
                                                      {"NFD", K::kNfd},
                                                      {"NFKC", K::kNfkc},
                                                      {"NFKD", K::kNfkd},
                                                      {"Lowercase", K::kLowercase},
                                                      {"StripAccents", K::kStripAccents}};
  for (const auto& [name, kind] : kNoArgs)
    if (type == name) return out.push_back({kind, "", ""});
  if (type == "Sequence") {
    const Json& list = j.value("normalizers", Json::array());
    for (size_t i = 0; i < list.size(); ++i)
      parse_normalizer(list[i], fmt::format("{}.normalizers[{}]", where, i), out);
  } else if (type == "Prepend") {
    out.push_back({K::kPrepend, require<std::string>(j, "prepend", where), ""});
  } else if (type == "Replace") {
    const auto [is_regex, text] = pattern_of(j, where);
    NormalizerStep n{K::kReplace, text, require<std::string>(j, "content", where)};
    if (is_regex) n.regex = std::make_shared<RegexSplitter>(text);
    if (!is_regex && text.empty()) throw_error<ConfigError>("{}: empty Replace pattern", where);
    out.push_back(std::move(n));
  } else if (type == "Strip") {
    NormalizerStep n{K::kStrip, "", ""};
    n.strip_left = j.value("strip_left", true);
    n.strip_right = j.value("strip_right", true);
    out.push_back(std::move(n));
  } else {
    throw_error<ConfigError>(
        "{}: normalizer '{}' is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, "
        "Lowercase, Strip, StripAccents, Replace, Prepend)",
        where, type);
  }
}

void parse_decoder(const Json& j, const std::string& where, TokenizerImpl& t) {
  if (j.is_null()) return;
  const std::string type = type_of(j, where);
  if (type == "Sequence") {
    const Json& list = j.value("decoders", Json::array());
    for (size_t i = 0; i < list.size(); ++i)
      parse_decoder(list[i], fmt::format("{}.decoders[{}]", where, i), t);
  } else if (type == "Replace") {
    const auto [is_regex, text] = pattern_of(j, where);
    if (is_regex) throw_error<ConfigError>("{}: Replace with a Regex is not supported", where);
    t.decode_replacements.emplace_back(text, require<std::string>(j, "content", where));
  } else if (type == "ByteFallback") {
    t.decode_byte_fallback = true;
  } else if (type == "Strip") {
    if (j.value("content", " ") != " " || j.value("stop", 0) != 0)
      throw_error<ConfigError>("{}: only Strip of leading spaces is supported", where);
    t.decode_strip_leading_spaces = j.value("start", 0);
  } else if (type == "Metaspace") {
    t.decode_replacements.emplace_back(j.value("replacement", "\xE2\x96\x81"), " ");
    const bool prepends =
        j.value("prepend_scheme", "always") != "never" && j.value("add_prefix_space", true);
    t.decode_strip_leading_spaces = prepends ? 1 : 0;
  } else if (type != "ByteLevel" && type != "Fuse") {
    throw_error<ConfigError>("{}: decoder '{}' is not supported", where, type);
  }
}

// BOS from a TemplateProcessing post-processor whose single template starts with a special.
void parse_post_processor(const Json& j, TokenizerImpl& t) {
  if (!j.is_object()) return;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const Json& p : j.value("processors", Json::array())) parse_post_processor(p, t);
  } else if (type == "TemplateProcessing") {
    const Json& single = j.value("single", Json::array());
    if (!single.empty() && single[0].contains("SpecialToken")) {
      t.bos_token = single[0]["SpecialToken"].value("id", "");
      t.add_bos_token = !t.bos_token.empty();
    }
  }
}

std::optional<int32_t> vocab_id(const Json& vocab, const std::string& token) {
  const auto it = vocab.find(token);
  if (it == vocab.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int32_t>();
}

void parse_bpe_model(const Json& model, const std::string& src, TokenizerImpl& t) {
  const std::string where = src + ": model";
  if (!model.is_object()) throw_error<ConfigError>("{}: missing 'model'", src);
  const std::string type = model.value("type", "BPE");
  if (type != "BPE")
    throw_error<ConfigError>("{}: model type '{}' is not supported (only BPE)", where, type);
  for (const char* f : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"}) {
    const Json& v = model.value(f, Json());
    if (!v.is_null() && !(v.is_string() && v.get<std::string>().empty()))
      throw_error<ConfigError>("{}: '{}' is not supported", where, f);
  }
  const Json& vocab = model.value("vocab", Json());
  if (!vocab.is_object()) throw_error<FormatError>("{}: 'vocab' must be an object", where);
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer())
      throw_error<FormatError>("{}.vocab: token '{}' has a non-integer id", where, token);
    std::string bytes = token;
    if (t.byte_level)  // characters outside the alphabet stay as they are (HF does the same)
      bytes = byte_level_decode(token).value_or(token);
    t.bpe.add_token(checked_token_id(id.get<int64_t>(), where + ".vocab"), bytes, where + ".vocab");
  }
  if (!model.contains("merges"))  // `tokenizers` refuses it too ("Missing vocab/merges")
    throw_error<FormatError>("{}: missing 'merges' (a BPE model needs its merge list)", where);
  const Json& merges = model["merges"];
  if (!merges.is_array()) throw_error<FormatError>("{}: 'merges' must be an array", where);
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string left, right;
    if (merges[i].is_string()) {
      const std::string m = merges[i].get<std::string>();
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || m.find(' ', sp + 1) != std::string::npos)
        throw_error<FormatError>("{}.merges[{}]: expected 'LEFT RIGHT', got '{}'", where, i, m);
      left = m.substr(0, sp), right = m.substr(sp + 1);
    } else if (merges[i].is_array() && merges[i].size() == 2) {
      left = merges[i][0].get<std::string>(), right = merges[i][1].get<std::string>();
    } else {
      throw_error<FormatError>("{}.merges[{}]: expected a string or a pair", where, i);
    }
    const auto l = vocab_id(vocab, left), r = vocab_id(vocab, right);
    const auto m = vocab_id(vocab, left + right);
    if (!l || !r || !m)
      throw_error<FormatError>("{}.merges[{}]: '{} {}': '{}' is not in the vocabulary", where, i,
                               left, right,
                               !l   ? left
                               : !r ? right
                                    : left + right);
    t.bpe.add_merge(*l, *r, *m);
  }
  BpeOptions o;
  o.rule = MergeRule::kByMergeList;
  o.whole_piece_first = model.value("ignore_merges", false);
  o.char_symbols = !t.byte_level;
  o.byte_fallback = model.value("byte_fallback", false);
  o.fuse_unk = model.value("fuse_unk", false);
  const Json& unk = model.value("unk_token", Json());
  if (unk.is_string()) o.unk_id = vocab_id(vocab, unk.get<std::string>());
  t.bpe.finalize(o);
}

}  // namespace

std::shared_ptr<TokenizerImpl> build_hf_json(std::string_view text, const std::string& src) {
  const Json j = parse_json(std::string(text), src);
  if (!j.is_object()) throw_error<FormatError>("{}: expected a JSON object", src);
  auto t = std::make_shared<TokenizerImpl>();
  t->name = src;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> steps;
  parse_normalizer(j.value("normalizer", Json()), src + ": normalizer", normalizer);
  parse_pre_tokenizer(j.value("pre_tokenizer", Json()), src + ": pre_tokenizer", steps);
  parse_decoder(j.value("decoder", Json()), src + ": decoder", *t);
  const Json& decoder = j.value("decoder", Json());
  t->byte_level = decoder.is_object() && decoder.value("type", "") == "ByteLevel";
  for (const PreTokenizerStep& s : steps)
    t->byte_level |= s.kind == PreTokenizerStep::Kind::kByteLevel;
  t->pipeline = TextPipeline(std::move(normalizer), std::move(steps));
  parse_bpe_model(j.value("model", Json()), src, *t);
  const Json& added = j.value("added_tokens", Json::array());
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string where = fmt::format("{}: added_tokens[{}]", src, i);
    t->added.push_back({require<std::string>(added[i], "content", where),
                        checked_token_id(require<int64_t>(added[i], "id", where), where),
                        added[i].value("special", false), added[i].value("lstrip", false),
                        added[i].value("rstrip", false)});
  }
  parse_post_processor(j.value("post_processor", Json()), *t);
  t->finalize();
  return t;
}

Tokenizer Tokenizer::from_hf_json(std::string_view tokenizer_json, const std::string& source) {
  return Tokenizer(build_hf_json(tokenizer_json, source));
}

}  // namespace lmstack::tokenizer
