// The BPE model: token tables and the merge loop that turns one pre-tokenized piece into ids.
//
// Two merge rules, as the two reference implementations define them:
//   kByRank       tiktoken: a piece that is itself a token is that token; otherwise adjacent
//                 parts merge while some pair's concatenation is a token, lowest rank (= id)
//                 first, leftmost among equals.
//   kByMergeList  Hugging Face BPE: pair (a, b) merges only if "a b" is in the merges list;
//                 lower list index first, leftmost among equals. With ignore_merges, a piece
//                 that is a token is that token (Llama 3's tokenizer.json).
// Initial parts are single bytes (byte-level models), or UTF-8 characters with byte fallback
// to <0xNN> tokens and then the unknown token (SentencePiece-converted models).
//
// The merge loop is a linear scan for pieces of up to kSmallPiece parts and a binary heap over
// a linked list above that: O(n log n) per piece, so a 1 MB run of one character is fast.
// Results are cached per thread (see PieceCache in bpe.cc).
//
// Thread safety: immutable after building; encode_piece may run on many threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lmstack/tokenizer/hash_table.h"

namespace lmstack::tokenizer {

enum class MergeRule { kByRank, kByMergeList };

struct BpeOptions {
  MergeRule rule = MergeRule::kByRank;
  bool whole_piece_first = true;  // a piece that is a token is that token
  bool char_symbols = false;      // initial parts are UTF-8 characters, not bytes
  bool byte_fallback = false;     // unknown characters become <0xNN> tokens
  std::optional<int32_t> unk_id;  // for characters with no token
  bool fuse_unk = false;          // consecutive unknowns become one unk
};

class BpeModel {
 public:
  BpeModel() = default;

  // Adds a token that BPE can produce; `symbol` is its spelling in the model's alphabet (raw
  // bytes for byte-level models). Ids may be sparse. Throws FormatError on a duplicate.
  void add_token(int32_t id, std::string_view symbol, std::string_view source);
  // Adds the next merge of the merge list (kByMergeList): left + right -> merged.
  void add_merge(int32_t left, int32_t right, int32_t merged);
  // Adds a merge with an explicit rank; pairs of equal rank merge leftmost first (SentencePiece
  // vocabularies rank every pair by the score of the token it makes).
  void add_merge(int32_t left, int32_t right, int32_t merged, int32_t rank);
  // Finishes building: fixes the byte -> id table and options; call once.
  void finalize(const BpeOptions& options);

  // Appends the ids of one piece (already pre-tokenized and normalized).
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  // Same without the cache and with the heap forced on or off (tests compare the two).
  void encode_piece_uncached(std::string_view piece, std::vector<int32_t>& out,
                             bool force_heap) const;

  // Empties the calling thread's piece cache (benchmarks measure a cold cache with it).
  static void clear_thread_cache();

  std::optional<int32_t> find(std::string_view symbol) const;
  const BpeOptions& options() const { return options_; }
  size_t num_tokens() const { return index_.size(); }
  size_t num_merges() const { return num_merges_; }
  int32_t max_id() const { return max_id_; }
  // The spelling of an id (empty if BPE does not know it).
  std::string_view symbol(int32_t id) const;
  uint64_t serial() const { return serial_; }

  static constexpr int kSmallPiece = 32;

 private:
  struct Part {
    uint32_t start;
    int32_t id;
  };
  void initial_parts(std::string_view piece, std::vector<Part>& parts) const;
  template <class Lookup>
  void merge(std::string_view piece, std::vector<Part>& parts, bool force_heap,
             const Lookup& lookup, std::vector<int32_t>& out) const;

  BpeOptions options_;
  BytesIndex index_;  // symbol -> id
  PairTable pairs_;   // (left, right) -> (rank, merged), kByMergeList
  std::vector<std::pair<uint32_t, uint32_t>> symbol_span_;  // by id: (offset, length + 1), 0 = none
  std::string symbols_;
  int32_t byte_ids_[256];
  int32_t max_id_ = -1;
  size_t num_merges_ = 0;
  uint64_t serial_ = 0;
};

}  // namespace lmstack::tokenizer
