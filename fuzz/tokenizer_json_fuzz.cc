// Fuzz target: a Hugging Face tokenizer.json through Tokenizer::from_hf_json, then an
// encode/decode of a fixed text with specials, so the tables it built are used.
#include "fuzz_common.h"
#include "lmstack/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmstack::fuzz::run_one([&] {
    const auto tok = lmstack::tokenizer::Tokenizer::from_hf_json(lmstack::fuzz::as_text(data, size),
                                                                 "tokenizer.json");
    const auto ids =
        tok.encode("Hello, 世界 <|im_end|>\n\t  x1234 ÀÉ", lmstack::tokenizer::SpecialMode::kAllow);
    tok.decode_text(ids);
  });
  return 0;
}
