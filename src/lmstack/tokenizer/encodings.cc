// The known encodings table (see encodings.h).
#include "lmstack/tokenizer/encodings.h"

#include <fmt/format.h>

namespace lmstack::tokenizer {
namespace {

// Llama 3: <|begin_of_text|> = 128000 ... 256 special tokens, most of them reserved.
std::vector<std::pair<std::string, int32_t>> llama3_specials() {
  std::vector<std::pair<std::string, int32_t>> s = {{"<|begin_of_text|>", 128000},
                                                    {"<|end_of_text|>", 128001},
                                                    {"<|start_header_id|>", 128006},
                                                    {"<|end_header_id|>", 128007},
                                                    {"<|eot_id|>", 128009}};
  int reserved = 0;
  for (int32_t id = 128002; id < 128256; ++id) {
    if (id == 128006 || id == 128007 || id == 128009) continue;
    s.emplace_back(fmt::format("<|reserved_special_token_{}|>", reserved++), id);
  }
  return s;
}

const std::vector<EncodingPreset>& presets() {
  static const std::vector<EncodingPreset> p = {
      {"gpt2", {ScannerKind::kGpt2, 0}, {{"<|endoftext|>", 50256}}, "", "<|endoftext|>", false},
      {"r50k_base",
       {ScannerKind::kGpt2, 0},
       {{"<|endoftext|>", 50256}},
       "",
       "<|endoftext|>",
       false},
      {"cl100k_base",
       {ScannerKind::kCl100k, 3},
       {{"<|endoftext|>", 100257},
        {"<|fim_prefix|>", 100258},
        {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}},
       "",
       "<|endoftext|>",
       false},
      {"o200k_base",
       {ScannerKind::kO200k, 3},
       {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}},
       "",
       "<|endoftext|>",
       false},
      {"llama3",
       {ScannerKind::kCl100k, 3},
       llama3_specials(),
       "<|begin_of_text|>",
       "<|end_of_text|>",
       true},
  };
  return p;
}

}  // namespace

const EncodingPreset* find_encoding(std::string_view name) {
  if (name == "llama-3" || name == "llama3.1" || name == "llama-3.1") name = "llama3";
  for (const EncodingPreset& p : presets())
    if (p.name == name) return &p;
  return nullptr;
}

std::string known_encoding_names() {
  std::string s;
  for (const EncodingPreset& p : presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace lmstack::tokenizer
