// lmstack::tokenizer::Tokenizer: byte-level BPE that encodes exactly like tiktoken (GPT-2,
// r50k_base, cl100k_base, o200k_base, Llama 3) and like Hugging Face `tokenizers` for BPE
// tokenizer.json files (byte-level, or SentencePiece-converted with byte fallback).
//
//   auto tok = Tokenizer::load("models/Llama-3.2-1B");             // or a .tiktoken file, ...
//   std::vector<int32_t> ids = tok.encode("Hello world", SpecialMode::kError);
//   std::string bytes = tok.decode(ids);                           // exact bytes back
//
// encode() runs no post-processor: it never adds BOS/EOS (add_bos_token() says whether the
// model expects one; bos_id() gives it). Ids are int32 token ids in [0, vocab_size()).
//
// Thread safety: a Tokenizer is immutable after load(); copies share the same data (copying is
// cheap), and every const method may run on many threads at once. Each thread keeps a small
// cache of recently merged pieces (thread_local, bounded).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmstack {
class ThreadPool;
class GgufFile;
}  // namespace lmstack

namespace lmstack::tokenizer {

// What encode() does with special-token strings (e.g. "<|endoftext|>") in its input.
enum class SpecialMode {
  kAllow,   // encode them as their special ids
  kAsText,  // encode them as ordinary text (tiktoken's disallowed_special=())
  kError,   // throw RequestError naming the token and its byte offset (tiktoken's default)
};

struct TokenizerImpl;

class Tokenizer {
 public:
  // Loads from:
  //   - a tokenizer.json file (Hugging Face, model type BPE);
  //   - a model directory: tokenizer.json, else tokenizer.model / *.tiktoken (tiktoken format),
  //     else encoder.json + vocab.bpe; tokenizer_config.json (and chat_template.jinja) beside
  //     it supply bos/eos tokens, add_bos_token and the chat template;
  //   - a directory with encoder.json + vocab.bpe (GPT-2);
  //   - a .tiktoken rank file: the encoding (pattern and special tokens) comes from
  //     `encoding_hint` or else the file name (r50k_base, cl100k_base, o200k_base, llama3);
  //   - a .gguf model file: its tokenizer.* metadata (see from_gguf).
  // Throws IoError / FormatError / ConfigError naming the file and field at fault.
  static Tokenizer load(const std::string& path, const std::string& encoding_hint = "");
  // Builders from contents (source names the data in errors).
  static Tokenizer from_tiktoken(std::string_view rank_file, const std::string& encoding,
                                 const std::string& source);
  static Tokenizer from_gpt2(std::string_view encoder_json, std::string_view vocab_bpe,
                             const std::string& source);
  static Tokenizer from_hf_json(std::string_view tokenizer_json, const std::string& source);
  // From a GGUF file's metadata: tokenizer.ggml.model "gpt2" (byte-level BPE with merges and the
  // pre-tokenizer named by tokenizer.ggml.pre) or "llama" (SentencePiece BPE by score with byte
  // fallback); bos/eos, add_bos_token and the chat template from their keys. Throws
  // FormatError/ConfigError naming the file and key (unknown model or pre type, sizes that
  // disagree, merges naming absent tokens). See gguf_vocab.cc.
  static Tokenizer from_gguf(const GgufFile& file);

  // Token ids of `text` (any bytes; invalid UTF-8 is encoded byte by byte by byte-level
  // models and through byte fallback by SentencePiece-style ones).
  std::vector<int32_t> encode(std::string_view text, SpecialMode mode = SpecialMode::kError) const;
  void encode_append(std::string_view text, SpecialMode mode, std::vector<int32_t>& out) const;
  // encode() of each text, spread over the pool's threads. Result i belongs to texts[i].
  std::vector<std::vector<int32_t>> encode_batch(ThreadPool& pool,
                                                 const std::vector<std::string>& texts,
                                                 SpecialMode mode = SpecialMode::kError) const;
  // The pieces the pre-tokenizer cuts `text` into (ordinary text, no special tokens), as the
  // model sees them (after normalization, if any).
  std::vector<std::string> pre_tokenize(std::string_view text) const;

  // The bytes the ids stand for, concatenated (special tokens as their text). Exact inverse of
  // encode() for byte-level models. Throws RequestError naming the first id that is out of
  // range or unused.
  std::string decode(std::span<const int32_t> ids) const;
  // decode() with invalid UTF-8 replaced by U+FFFD: always valid text.
  std::string decode_text(std::span<const int32_t> ids) const;

  // Empties the calling thread's cache of merged pieces (for cold-cache benchmarks).
  static void clear_thread_cache();

  // Streaming decoder (see IncrementalDecoder below).
  class IncrementalDecoder;
  IncrementalDecoder incremental_decoder() const;

  // Max id + 1 (o200k_base: 200,019; some ids below it may be unused).
  int vocab_size() const;
  // Id of a special or added token by its text, else of the ordinary token with these bytes
  // (as decode() would print them).
  std::optional<int32_t> token_id(std::string_view token) const;
  // The bytes decode() gives for one id (throws like decode()).
  std::string token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  // Special tokens (text, id) in id order.
  std::vector<std::pair<std::string, int32_t>> special_tokens() const;

  // Encoding name ("cl100k_base", ...) or the tokenizer.json path it came from.
  const std::string& name() const;
  // Number of BPE merges (rank-based encodings: mergeable tokens above the 256 bytes).
  size_t num_merges() const;
  bool is_byte_level() const;

  // From tokenizer_config.json (model directories), else the encoding's conventions.
  const std::string& bos_token() const;
  const std::string& eos_token() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  bool add_bos_token() const;
  const std::string& chat_template() const;  // raw Jinja text; empty if none

  const TokenizerImpl& impl() const { return *impl_; }
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const TokenizerImpl> impl_;
};

// Streaming decoder: push() returns only complete UTF-8 characters (bytes that cannot become
// valid UTF-8 come out as U+FFFD as soon as that is certain); flush() returns the rest. It
// holds a copy of the tokenizer. One decoder per stream; a decoder itself is not thread-safe.
class Tokenizer::IncrementalDecoder {
 public:
  explicit IncrementalDecoder(Tokenizer tokenizer) : tok_(std::move(tokenizer)) {}
  // Throws RequestError for an id out of range, like decode().
  std::string push(int32_t id);
  std::string flush();

 private:
  Tokenizer tok_;
  std::string pending_;
  bool started_ = false;  // leading-space stripping (SentencePiece decoders) is done
};

}  // namespace lmstack::tokenizer
