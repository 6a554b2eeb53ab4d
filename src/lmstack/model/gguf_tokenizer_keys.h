// The tokenizer.* keys of a GGUF file written by lmstack convert (internal to model/).
#pragma once

#include <string>

#include "lmstack/core/gguf.h"
#include "lmstack/model/config.h"

namespace lmstack::model {

// Adds tokenizer.ggml.{model, pre, tokens, token_type, merges, bos_token_id, eos_token_id,
// add_bos_token} and tokenizer.chat_template for the tokenizer at `source`: a model directory
// whose tokenizer.json is a byte-level BPE (written as model "gpt2"; pre "gpt-2", "llama-bpe",
// "qwen2" or "smollm" by its split), or a .gguf file whose tokenizer.* keys are copied. Ids
// below config.vocab_size that have no token get "[PAD<id>]" with type unused (5), as
// llama.cpp's converter does. Throws ConfigError for a tokenizer.json llama.cpp could not run
// the same way (not BPE, not byte-level, an unnamed pre-tokenizer), naming the field.
void add_tokenizer_keys(GgufWriter& w, const ModelConfig& config, const std::string& source);

}  // namespace lmstack::model
