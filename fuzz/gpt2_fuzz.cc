// Fuzz target: GPT-2's encoder.json and vocab.bpe through Tokenizer::from_gpt2. The input is
// encoder.json, a NUL byte, then vocab.bpe (no NUL: all of it is encoder.json).
#include <cstring>

#include "fuzz_common.h"
#include "lmstack/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all = lmstack::fuzz::as_text(data, size);
  const size_t nul = all.find('\0');
  const std::string_view encoder = all.substr(0, nul);
  const std::string_view merges = nul == std::string_view::npos ? "" : all.substr(nul + 1);
  lmstack::fuzz::run_one([&] {
    const auto tok = lmstack::tokenizer::Tokenizer::from_gpt2(encoder, merges, "gpt2");
    tok.decode_text(tok.encode("Hello, 世界 <|endoftext|> 1234"));
  });
  return 0;
}
