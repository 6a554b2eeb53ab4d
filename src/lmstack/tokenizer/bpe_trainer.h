// Byte-level BPE training ("count adjacent pairs, merge the most frequent until the vocabulary
// is full"), writing a Hugging Face tokenizer.json that lmstack and HF `tokenizers` both load
// and encode identically.
//
// Texts are pre-tokenized with a known pattern (gpt2, cl100k, o200k, llama3 = cl100k) and
// counted as unique words; pair counts are kept incrementally: each merge touches only the
// words that contain the merged pair (an index from pair to words), and a max-heap with lazy
// deletion picks the next pair, so no merge recounts the corpus. Ties between equal counts go
// to the smaller (left id, right id), so the result is deterministic.
//
// Ids: 0-255 are the single bytes (id = byte value), then one id per new token in merge order,
// then the special tokens in the order given.
//
// train_bpe_tokenizer() also writes the tokenizer_config.json that names the EOS/BOS/PAD
// tokens among the specials, so transformers' AutoTokenizer and lmstack (prepare-data,
// init-model) load the pair as a model directory. It is the one byte-level tokenizer writer:
// init-model's tokenizer is this trainer run with no text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lmstack/core/json.h"

namespace lmstack::tokenizer {

struct BpeTrainerOptions {
  // Total vocabulary: 256 bytes + merges + special tokens. Must be >= 256 + specials.
  int vocab_size = 32000;
  // Pre-tokenizer: "gpt2", "cl100k", "o200k" or "llama3" (the encodings' patterns).
  std::string pattern = "gpt2";
  std::vector<std::string> special_tokens;
  // Pairs seen fewer times than this are never merged (training may stop short of vocab_size).
  int64_t min_frequency = 2;
  // Called every so often with (merges done, merges wanted).
  std::function<void(int, int)> progress;
};

struct BpeTrainerStats {
  int64_t num_words = 0;         // pieces after pre-tokenization
  int64_t num_unique_words = 0;  // distinct pieces
  int num_merges = 0;
  int vocab_size = 0;  // final size (less than asked if pairs ran out)
  double seconds = 0;
};

// Trains on the texts and returns the tokenizer.json text. Throws ConfigError for an unknown
// pattern, a vocab_size that cannot hold the bytes and specials, or a duplicate special token.
std::string train_bpe_to_hf_json(const std::vector<std::string>& texts,
                                 const BpeTrainerOptions& options,
                                 BpeTrainerStats* stats = nullptr);

// Which special tokens are BOS, EOS and PAD. Empty: picked by pick_special_roles().
struct SpecialTokenRoles {
  std::string bos, eos, pad;
};

// The roles given, checked to be among `specials` (ConfigError naming the token otherwise), with
// the empty ones picked by name, first match in each list:
//   eos: <|endoftext|> </s> <|end_of_text|> <eos> <|im_end|> <|eot_id|>, else the first special;
//   bos: <s> <|begin_of_text|> <bos> <|startoftext|>, else the EOS token (GPT-2's convention:
//        add_bos_token is false, so it is never prepended unless asked);
//   pad: <pad> <|pad|> <|padding|> <|endofpad|>, else none.
// With no special tokens all three stay empty.
SpecialTokenRoles pick_special_roles(const std::vector<std::string>& specials,
                                     SpecialTokenRoles given);

struct TrainedTokenizer {
  std::string tokenizer_json;  // the tokenizer.json text
  // tokenizer_config.json: PreTrainedTokenizerFast, bos/eos/pad_token (null when absent),
  // add_bos_token false, added_tokens_decoder, and chat_template / model_max_length if set.
  Json tokenizer_config;
  SpecialTokenRoles roles;                    // as resolved
  int bos_id = -1, eos_id = -1, pad_id = -1;  // -1: none
  int num_tokens = 0;                         // highest id + 1
};

struct TokenizerConfigOptions {
  SpecialTokenRoles roles;       // empty members: picked by pick_special_roles()
  std::string chat_template;     // written when not empty
  int64_t model_max_length = 0;  // written when > 0
};

// train_bpe_to_hf_json() plus the tokenizer_config.json for it (throws as both do).
TrainedTokenizer train_bpe_tokenizer(const std::vector<std::string>& texts,
                                     const BpeTrainerOptions& options,
                                     const TokenizerConfigOptions& config,
                                     BpeTrainerStats* stats = nullptr);

}  // namespace lmstack::tokenizer
