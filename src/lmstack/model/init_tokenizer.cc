// The tokenizer files of init-model (see init_model.h): the BPE trainer's byte-level
// tokenizer.json trained on no text (GPT-2's pre-tokenizer regex and byte-to-unicode alphabet,
// no merges), or a copy of a given one (a tokenizer.json or a directory, e.g. what
// `train-tokenizer --out DIR` wrote) with its bos/eos ids looked up.
#include <algorithm>
#include <filesystem>

#include "lmstack/core/file.h"
#include "lmstack/model/init_model.h"
#include "lmstack/tokenizer/bpe_trainer.h"
#include "lmstack/tokenizer/chat_template.h"

namespace lmstack::model {
namespace {

namespace fs = std::filesystem;

// ChatML, as Qwen2.5's tokenizer_config.json spells it, without the tool-call branches.
constexpr const char* kChatMlTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

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
  tokenizer::BpeTrainerOptions o;
  o.special_tokens = {"<|endoftext|>"};
  if (chat) o.special_tokens.insert(o.special_tokens.end(), {"<|im_start|>", "<|im_end|>"});
  o.vocab_size = 256 + static_cast<int>(o.special_tokens.size());  // no text: no merges
  tokenizer::TokenizerConfigOptions c;
  c.roles = {"<|endoftext|>", chat ? "<|im_end|>" : "<|endoftext|>", ""};
  if (chat) c.chat_template = kChatMlTemplate;
  c.model_max_length = model_max_length;
  const tokenizer::TrainedTokenizer t = tokenizer::train_bpe_tokenizer({}, o, c);
  TokenizerFiles f;
  f.tokenizer_json = t.tokenizer_json;
  f.tokenizer_config = t.tokenizer_config;
  f.bos_id = t.bos_id;
  f.eos_ids = {t.eos_id};
  if (chat) f.eos_ids.insert(f.eos_ids.begin(), 256);  // <|endoftext|> ends text too
  f.num_tokens = t.num_tokens;
  return f;
}

TokenizerFiles copy_tokenizer(const std::string& source) {
  TokenizerFiles f;
  const bool is_dir = is_directory(source);
  const std::string json_path = is_dir ? path_join(source, "tokenizer.json") : source;
  f.tokenizer_json = read_file(json_path);
  const Json tok = parse_json(f.tokenizer_json, json_path);
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object())
    throw_error<FormatError>("{}: missing object field 'model'", json_path);
  const std::string dir = is_dir ? source : fs::path(source).parent_path().string();
  const std::string config_path = path_join(dir.empty() ? "." : dir, "tokenizer_config.json");
  f.tokenizer_config = file_exists(config_path) ? read_json_file(config_path) : Json::object();
  f.num_tokens = count_tokens(tok);
  f.bos_id = first_known(tok, special_name(f.tokenizer_config, "bos_token"),
                         {"<|begin_of_text|>", "<s>", "<|endoftext|>"});
  const int eos = first_known(tok, special_name(f.tokenizer_config, "eos_token"),
                              {"<|end_of_text|>", "</s>", "<|endoftext|>", "<|im_end|>"});
  if (eos >= 0) f.eos_ids = {eos};
  if (f.tokenizer_config.empty()) f.tokenizer_config["tokenizer_class"] = "PreTrainedTokenizerFast";
  if (is_dir) f.template_files = tokenizer::chat_template_files(source);
  return f;
}

}  // namespace lmstack::model
