// The known tiktoken encodings: which pre-tokenizer pattern and special tokens go with a rank
// file. Data, not code: one table row per encoding (values from tiktoken's openai_public.py
// and Meta's Llama 3 tokenizer.py, as listed in shared/peers/tokenizers/encodings.json).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lmstack/tokenizer/scanners.h"

namespace lmstack::tokenizer {

struct EncodingPreset {
  std::string name;
  ScannerSpec scanner;
  std::vector<std::pair<std::string, int32_t>> special_tokens;
  std::string bos_token, eos_token;  // "" if none
  bool add_bos_token = false;
};

// The preset for "gpt2", "r50k_base", "cl100k_base", "o200k_base" or "llama3" (also accepted:
// "llama-3", "llama3.1"); nullptr if unknown.
const EncodingPreset* find_encoding(std::string_view name);
// Names accepted by find_encoding, for error messages.
std::string known_encoding_names();

}  // namespace lmstack::tokenizer
