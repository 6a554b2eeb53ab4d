// Fuzz target: a tiktoken rank file (`base64 rank` lines) through Tokenizer::from_tiktoken with
// cl100k_base's pattern and special tokens, then an encode/decode.
#include "fuzz_common.h"
#include "lmstack/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmstack::fuzz::run_one([&] {
    const auto tok = lmstack::tokenizer::Tokenizer::from_tiktoken(
        lmstack::fuzz::as_text(data, size), "cl100k_base", "input.tiktoken");
    tok.decode_text(tok.encode("Hello, 世界 <|endoftext|> 1234"));
  });
  return 0;
}
