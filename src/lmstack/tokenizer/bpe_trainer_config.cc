// The tokenizer_config.json beside a trained tokenizer.json (see bpe_trainer.h): the fields
// transformers' PreTrainedTokenizerFast reads (bos/eos/pad_token, add_bos_token,
// added_tokens_decoder, chat_template, model_max_length), in the form its save_pretrained
// writes them, so AutoTokenizer.from_pretrained(DIR) and lmstack agree on the special tokens.
#include <algorithm>

#include "lmstack/core/error.h"
#include "lmstack/tokenizer/bpe_trainer.h"

namespace lmstack::tokenizer {
namespace {

std::string first_named(const std::vector<std::string>& specials,
                        std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (std::find(specials.begin(), specials.end(), n) != specials.end()) return n;
  return "";
}

void check_among(const std::vector<std::string>& specials, const std::string& token,
                 const char* role) {
  if (!token.empty() && std::find(specials.begin(), specials.end(), token) == specials.end())
    throw_error<ConfigError>("--{} '{}' is not one of the special tokens (--special)", role, token);
}

Json token_or_null(const std::string& token) { return token.empty() ? Json() : Json(token); }

}  // namespace

SpecialTokenRoles pick_special_roles(const std::vector<std::string>& specials,
                                     SpecialTokenRoles r) {
  check_among(specials, r.bos, "bos");
  check_among(specials, r.eos, "eos");
  check_among(specials, r.pad, "pad");
  if (specials.empty()) return r;
  if (r.eos.empty())
    r.eos = first_named(specials, {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>",
                                   "<|im_end|>", "<|eot_id|>"});
  if (r.eos.empty()) r.eos = specials.front();
  if (r.bos.empty())
    r.bos = first_named(specials, {"<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>"});
  if (r.bos.empty()) r.bos = r.eos;
  if (r.pad.empty())
    r.pad = first_named(specials, {"<pad>", "<|pad|>", "<|padding|>", "<|endofpad|>"});
  return r;
}

TrainedTokenizer train_bpe_tokenizer(const std::vector<std::string>& texts,
                                     const BpeTrainerOptions& options,
                                     const TokenizerConfigOptions& config,
                                     BpeTrainerStats* stats_out) {
  BpeTrainerStats stats;
  TrainedTokenizer t;
  t.roles = pick_special_roles(options.special_tokens, config.roles);
  t.tokenizer_json = train_bpe_to_hf_json(texts, options, &stats);
  t.num_tokens = stats.vocab_size;
  const int first_special = stats.vocab_size - static_cast<int>(options.special_tokens.size());
  Json decoder = Json::object();
  for (size_t i = 0; i < options.special_tokens.size(); ++i) {
    const std::string& text = options.special_tokens[i];
    const int id = first_special + static_cast<int>(i);
    decoder[std::to_string(id)] = {{"content", text}, {"lstrip", false},      {"normalized", false},
                                   {"rstrip", false}, {"single_word", false}, {"special", true}};
    if (text == t.roles.bos) t.bos_id = id;
    if (text == t.roles.eos) t.eos_id = id;
    if (text == t.roles.pad) t.pad_id = id;
  }
  t.tokenizer_config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                        {"bos_token", token_or_null(t.roles.bos)},
                        {"eos_token", token_or_null(t.roles.eos)},
                        {"pad_token", token_or_null(t.roles.pad)},
                        {"unk_token", nullptr},
                        {"add_bos_token", false},
                        {"add_eos_token", false},
                        {"clean_up_tokenization_spaces", false},
                        {"added_tokens_decoder", decoder}};
  if (config.model_max_length > 0) t.tokenizer_config["model_max_length"] = config.model_max_length;
  if (!config.chat_template.empty()) t.tokenizer_config["chat_template"] = config.chat_template;
  if (stats_out) *stats_out = stats;
  return t;
}

}  // namespace lmstack::tokenizer
