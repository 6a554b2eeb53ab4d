// The tokenizer.* keys of a GGUF file written by lmstack convert (internal to model/).
#pragma once

#include <string>
#include <vector>

#include "lmstack/core/gguf.h"
#include "lmstack/model/config.h"

namespace lmstack::model {

// Adds tokenizer.ggml.{model, pre, tokens, token_type, merges, bos_token_id, eos_token_id,
// add_bos_token} and tokenizer.chat_template[s] for the tokenizer at `source`: a model directory
// whose tokenizer.json is a byte-level BPE (written as model "gpt2"; pre "gpt-2", "llama-bpe",
// "qwen2" or "smollm" by its split) or a SentencePiece-style BPE (model "llama", see
// add_sentencepiece_keys), or a .gguf file whose tokenizer.* keys are copied. Ids below
// config.vocab_size that have no token get "[PAD<id>]" with type unused (5), as llama.cpp's
// converter does. Throws ConfigError for a tokenizer.json llama.cpp could not run the same way
// (not BPE, neither byte-level nor SentencePiece-style, an unnamed pre-tokenizer), naming the
// field.
void add_tokenizer_keys(GgufWriter& w, const ModelConfig& config, const std::string& source);

// tokenizer.ggml.{model = "llama", pre = "default", tokens, scores, token_type,
// add_space_prefix, unknown_token_id} for a SentencePiece-style tokenizer.json (Llama 2,
// Mistral, TinyLlama: BPE with byte_fallback; a Metaspace pre-tokenizer or a Prepend/Replace
// U+2581 normalizer), as llama.cpp's convert_hf_to_gguf.py writes them from tokenizer.model,
// plus the special-token keys (gguf_tokenizer_spm.cc).
void add_sentencepiece_keys(GgufWriter& w, const ModelConfig& config, const std::string& dir,
                            const Json& tokenizer_json);

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum GgufTokenType : int64_t {
  kGgufNormal = 1,
  kGgufControl = 3,
  kGgufUserDefined = 4,
  kGgufUnused = 5,
  kGgufByte = 6
};

// tokenizer.ggml.tokens and token_type of a tokenizer.json: its vocab (normal), its added
// tokens (control if special, else user-defined) and "[PAD<id>]" (unused) for the ids up to
// config.vocab_size that have no token. Throws FormatError for an id that is no token id.
struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
};
GgufVocab gguf_vocab(const Json& tokenizer_json, const ModelConfig& config, const std::string& src);

// model.merges ("A B" strings or [A, B] pairs) as "A B" strings; FormatError names a bad entry.
std::vector<std::string> merge_strings(const Json& merges, const std::string& src);

// bos/eos_token_id (config.json's ids first), add_bos_token and the chat templates of the
// tokenizer in `dir`.
void add_special_token_keys(GgufWriter& w, const ModelConfig& config, const std::string& dir);

}  // namespace lmstack::model
