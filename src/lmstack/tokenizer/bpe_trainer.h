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
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

}  // namespace lmstack::tokenizer
