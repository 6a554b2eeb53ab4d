// Fuzz target: a GGUF file through the container reader (core/gguf.h), then what lmstack
// reads from it: the model config (model/gguf_model.h) and the tokenizer (tokenizer.* keys).
#include "fuzz_common.h"
#include "lmstack/core/gguf.h"
#include "lmstack/model/gguf_model.h"
#include "lmstack/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = lmstack::fuzz::scratch_path("input.gguf");
  lmstack::fuzz::write_input(path, lmstack::fuzz::as_text(data, size));
  lmstack::fuzz::run_one([&] {
    const lmstack::GgufFile file(path);
    lmstack::fuzz::run_one([&] { lmstack::model::gguf_model_config(file); });
    const auto tok = lmstack::tokenizer::Tokenizer::from_gguf(file);
    tok.decode_text(tok.encode("Hello, 世界 <|im_end|>\n  x"));
  });
  return 0;
}
