// `lmstack init-model`: writes a Hugging Face model directory with random weights, so tests
// and benchmarks have real-shaped models without downloads. Weights are N(0, std) from a
// seeded generator that gives the same bits on every machine with the same libm (mt19937_64
// and Box-Muller written out; std::normal_distribution differs between standard libraries);
// norm weights are 1 and norm biases 0. The tokenizer is a byte-level BPE with no merges (256
// byte tokens plus special tokens), unless a tokenizer.json is given to copy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lmstack/core/json.h"
#include "lmstack/model/config.h"

namespace lmstack::model {

struct InitModelOptions {
  ModelConfig config;   // shapes; config.dtype is the dtype of every stored tensor
  std::string out_dir;  // created if absent; files in it are replaced
  uint64_t seed = 0;
  float stddev = 0.02f;
  std::string tokenizer_path;  // a tokenizer.json or tokenizer directory to copy instead
  int num_threads = 0;         // <= 0: ThreadPool default
};

struct InitModelResult {
  int64_t num_parameters = 0;
  int64_t file_bytes = 0;  // size of model.safetensors
  double seconds = 0;
};

// Writes config.json, model.safetensors, tokenizer.json, tokenizer_config.json and
// generation_config.json. Peak memory is one copy of model.safetensors. Throws ConfigError
// when the tokenizer has more tokens than config.vocab_size, IoError when a file cannot be
// written, FormatError when a given tokenizer.json is not JSON.
InitModelResult init_model(const InitModelOptions& options);

// Fills out[0, n) with N(0, stddev) values for the tensor called `name`: a pure function of
// (seed, name, n), whatever the thread count (each 64Ki-element chunk has its own stream).
void fill_normal(uint64_t seed, std::string_view name, float stddev, float* out, int64_t n);

// The tokenizer files init-model writes (init_tokenizer.cc).
struct TokenizerFiles {
  std::string tokenizer_json;  // tokenizer.json text
  Json tokenizer_config;       // tokenizer_config.json
  int bos_id = -1;
  std::vector<int> eos_ids;
  int num_tokens = 0;  // highest id + 1
  // Chat template files copied with it (relative path -> text), e.g. chat_template.jinja.
  std::vector<std::pair<std::string, std::string>> template_files;
};
// Byte-level BPE, the BPE trainer's output on no text: ids 0-255 are the bytes (GPT-2's
// byte-to-unicode spelling), 256 is <|endoftext|> (bos and eos); `chat` adds <|im_start|> (257)
// and <|im_end|> (258, the eos of tokenizer_config; generation stops at 256 and 258) with a
// ChatML chat template.
TokenizerFiles byte_level_tokenizer(bool chat, int model_max_length);
// Reads a tokenizer.json, or a directory holding one, to copy with the tokenizer_config.json
// beside it (if any) and, from a directory, its chat template files; bos/eos ids come from
// tokenizer_config's bos_token/eos_token, else from well-known special tokens.
TokenizerFiles copy_tokenizer(const std::string& source);

}  // namespace lmstack::model
