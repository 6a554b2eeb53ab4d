// The data behind a Tokenizer, shared read-only by all its copies. Loaders (load.cc,
// load_tiktoken.cc, load_hf_json.cc) fill it and call finalize(); tokenizer.cc runs it.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lmstack/tokenizer/bpe.h"
#include "lmstack/tokenizer/pipeline.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::tokenizer {

// A token matched in the input before pre-tokenization (special tokens and Hugging Face
// added tokens). Non-special added tokens are always matched; special ones per SpecialMode.
struct AddedToken {
  std::string content;
  int32_t id;
  bool special = true;
  bool lstrip = false;  // swallow whitespace on the left (Hugging Face AddedToken flags)
  bool rstrip = false;
};

struct AddedMatch {
  size_t pos, len;  // the token's bytes, plus stripped whitespace
  const AddedToken* token;
};

enum class TokenKind : uint8_t { kUnused, kNormal, kSpecial, kAdded };

struct TokenizerImpl {
  std::string name;
  BpeModel bpe;
  TextPipeline pipeline;
  std::vector<AddedToken> added;
  bool byte_level = true;
  // Decoder (Hugging Face): text replacements per token (e.g. U+2581 -> ' '), <0xNN> tokens
  // as raw bytes, and how many leading spaces to strip from the start of the output.
  std::vector<std::pair<std::string, std::string>> decode_replacements;
  bool decode_byte_fallback = false;
  int decode_strip_leading_spaces = 0;

  std::string bos_token, eos_token, chat_template;  // chat_template: the default one
  // Named templates (transformers' dict form), by name; empty when there is one or none.
  std::map<std::string, std::string> chat_templates;
  bool add_bos_token = false;

  // Built by finalize().
  int32_t vocab_size = 0;
  std::vector<TokenKind> kinds;
  std::vector<std::pair<uint32_t, uint32_t>> decode_span;  // by id: offset, length in arena
  std::string decode_arena;
  std::array<bool, 256> added_first_byte{};
  bool any_special = false, any_plain_added = false;

  // Sorts added tokens, builds the decode table; throws FormatError if an added token and a
  // BPE token share an id with different text.
  void finalize();
  std::optional<AddedMatch> find_added(std::string_view text, size_t from,
                                       bool include_special) const;
  void encode_ordinary(std::string_view text, bool at_input_start, std::vector<int32_t>& out) const;
  // Checks the id and returns its decoded bytes (no leading-space strip).
  std::string_view bytes_of(int32_t id) const;
};

// Loaders (the finalize() call is theirs).
std::shared_ptr<TokenizerImpl> build_tiktoken(std::string_view rank_file,
                                              const std::string& encoding,
                                              const std::string& source);
std::shared_ptr<TokenizerImpl> build_gpt2(std::string_view encoder_json, std::string_view vocab_bpe,
                                          const std::string& source);
std::shared_ptr<TokenizerImpl> build_hf_json(std::string_view tokenizer_json,
                                             const std::string& source);
std::shared_ptr<TokenizerImpl> build_gguf(const GgufFile& file);  // gguf_vocab.cc

}  // namespace lmstack::tokenizer
