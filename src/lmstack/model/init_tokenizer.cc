// The tokenizer files of init-model (see init_model.h): a byte-level BPE tokenizer.json in
// the Hugging Face `tokenizers` schema (GPT-2's pre-tokenizer regex and byte-to-unicode
// alphabet, no merges), or a copy of a given one with its bos/eos ids looked up.
#include <algorithm>

#include "lmstack/core/file.h"
#include "lmstack/model/init_model.h"

namespace lmstack::model {
namespace {

// ChatML, as Qwen2.5's tokenizer_config.json spells it, without the tool-call branches.
constexpr const char* kChatMlTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
// map in order to U+0100 and up, so every byte is a visible character.
std::vector<std::string> byte_alphabet() {
  std::vector<std::string> out(256);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    out[b] = utf8(printable ? b : next++);
  }
  return out;
}

Json added_token(int id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

// The id of `content` among added tokens, then the vocab; -1 when absent.
int token_id(const Json& tok, const std::string& content) {
  for (const Json& a : tok.value("added_tokens", Json::array()))
    if (a.value("content", "") == content && a.contains("id")) return a["id"].get<int>();
  const Json& vocab = tok["model"].value("vocab", Json::object());
  if (vocab.is_object() && vocab.contains(content) && vocab[content].is_number_integer())
    return vocab[content].get<int>();
  return -1;
}

// tokenizer_config's bos_token / eos_token: a string or {"content": ...}.
std::string special_name(const Json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const Json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return "";
}

int first_known(const Json& tok, const std::string& preferred,
                std::initializer_list<const char*> fallbacks) {
  if (!preferred.empty() && token_id(tok, preferred) >= 0) return token_id(tok, preferred);
  for (const char* f : fallbacks)
    if (token_id(tok, f) >= 0) return token_id(tok, f);
  return -1;
}

int count_tokens(const Json& tok) {
  int max_id = -1;
  for (const Json& a : tok.value("added_tokens", Json::array()))
    if (a.contains("id") && a["id"].is_number_integer())
      max_id = std::max(max_id, a["id"].get<int>());
  const Json& vocab = tok["model"].value("vocab", Json::object());
  if (vocab.is_object())
    for (const auto& [k, v] : vocab.items())
      if (v.is_number_integer()) max_id = std::max(max_id, v.get<int>());
  return max_id + 1;
}

}  // namespace

TokenizerFiles byte_level_tokenizer(bool chat, int model_max_length) {
  const std::vector<std::string> alphabet = byte_alphabet();
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[alphabet[static_cast<size_t>(b)]] = b;
  std::vector<std::string> specials = {"<|endoftext|>"};
  if (chat) specials.insert(specials.end(), {"<|im_start|>", "<|im_end|>"});
  Json added = Json::array();
  for (size_t i = 0; i < specials.size(); ++i) {
    const int id = 256 + static_cast<int>(i);
    added.push_back(added_token(id, specials[i]));
    vocab[specials[i]] = id;
  }
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  const Json tok = {{"version", "1.0"},
                    {"truncation", nullptr},
                    {"padding", nullptr},
                    {"added_tokens", added},
                    {"normalizer", nullptr},
                    {"pre_tokenizer", byte_level},
                    {"post_processor", nullptr},
                    {"decoder", byte_level},
                    {"model",
                     {{"type", "BPE"},
                      {"dropout", nullptr},
                      {"unk_token", nullptr},
                      {"continuing_subword_prefix", nullptr},
                      {"end_of_word_suffix", nullptr},
                      {"fuse_unk", false},
                      {"byte_fallback", false},
                      {"ignore_merges", false},
                      {"vocab", vocab},
                      {"merges", Json::array()}}}};
  TokenizerFiles f;
  f.tokenizer_json = tok.dump(2) + "\n";
  f.bos_id = 256;
  f.eos_ids = chat ? std::vector<int>{256, 258} : std::vector<int>{256};
  f.num_tokens = 256 + static_cast<int>(specials.size());
  Json decoder = Json::object();
  for (const Json& a : added) decoder[std::to_string(a["id"].get<int>())] = a;
  f.tokenizer_config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                        {"bos_token", "<|endoftext|>"},
                        {"eos_token", chat ? "<|im_end|>" : "<|endoftext|>"},
                        {"unk_token", nullptr},
                        {"add_bos_token", false},
                        {"add_eos_token", false},
                        {"clean_up_tokenization_spaces", false},
                        {"model_max_length", model_max_length},
                        {"added_tokens_decoder", decoder}};
  if (chat) f.tokenizer_config["chat_template"] = kChatMlTemplate;
  return f;
}

TokenizerFiles copy_tokenizer(const std::string& tokenizer_json_path) {
  TokenizerFiles f;
  f.tokenizer_json = read_file(tokenizer_json_path);
  const Json tok = parse_json(f.tokenizer_json, tokenizer_json_path);
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object())
    throw_error<FormatError>("{}: missing object field 'model'", tokenizer_json_path);
  const std::string dir = tokenizer_json_path.substr(0, tokenizer_json_path.find_last_of('/') + 1);
  const std::string config_path = dir + "tokenizer_config.json";
  f.tokenizer_config = file_exists(config_path) ? read_json_file(config_path) : Json::object();
  f.num_tokens = count_tokens(tok);
  f.bos_id = first_known(tok, special_name(f.tokenizer_config, "bos_token"),
                         {"<|begin_of_text|>", "<s>", "<|endoftext|>"});
  const int eos = first_known(tok, special_name(f.tokenizer_config, "eos_token"),
                              {"<|end_of_text|>", "</s>", "<|endoftext|>", "<|im_end|>"});
  if (eos >= 0) f.eos_ids = {eos};
  if (f.tokenizer_config.empty()) f.tokenizer_config["tokenizer_class"] = "PreTrainedTokenizerFast";
  return f;
}

}  // namespace lmstack::model
