// BPE merge loop and per-thread piece cache (see bpe.h).
#include "lmstack/tokenizer/bpe.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <functional>
#include <memory>

#include "lmstack/core/error.h"
#include "lmstack/tokenizer/token_ids.h"
#include "lmstack/tokenizer/unicode.h"

namespace lmstack::tokenizer {
namespace {

constexpr int32_t kNoRank = INT32_MAX;
using Merge = PairTable::Merge;

// Recently seen multi-token pieces -> ids, one cache per thread (Tokenizer is shared
// read-only, so it cannot own mutable state). It belongs to one BpeModel at a time (by
// serial) and is dropped whole when full.
class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 256;

  const int32_t* find(uint64_t owner, std::string_view piece, uint64_t h, uint32_t& n) {
    if (owner != owner_) reset(owner);
    for (size_t i = h & kMask; slots_[i].len_plus1 != 0; i = (i + 1) & kMask) {
      const Slot& s = slots_[i];
      if (s.hash == h && s.len_plus1 - 1 == piece.size() &&
          std::memcmp(keys_.data() + s.key_off, piece.data(), piece.size()) == 0) {
        n = s.num_ids;
        return ids_.data() + s.ids_off;
      }
    }
    return nullptr;
  }
  void clear() { reset(0); }
  void insert(std::string_view piece, uint64_t h, const int32_t* ids, uint32_t n) {
    if (count_ * 2 >= kSlots) reset(owner_);
    size_t i = h & kMask;
    while (slots_[i].len_plus1 != 0) i = (i + 1) & kMask;
    slots_[i] = {h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(ids_.size()),
                 static_cast<uint32_t>(piece.size() + 1), n};
    keys_.append(piece);
    ids_.insert(ids_.end(), ids, ids + n);
    ++count_;
  }

 private:
  static constexpr size_t kSlots = 1 << 16, kMask = kSlots - 1;
  struct Slot {
    uint64_t hash;
    uint32_t key_off, ids_off, len_plus1, num_ids;
  };
  void reset(uint64_t owner) {
    owner_ = owner;
    slots_.assign(kSlots, Slot{});
    keys_.clear();
    ids_.clear();
    count_ = 0;
  }
  uint64_t owner_ = 0;
  std::vector<Slot> slots_ = std::vector<Slot>(kSlots);
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t count_ = 0;
};

std::atomic<uint64_t> g_next_serial{1};

// kByRank pair lookups hash a byte string and probe the token index (megabytes: cache
// misses). The same pairs recur across pieces (the bytes of common characters, frequent
// suffixes), so each thread memoizes (left id, right id) -> rank in a small direct-mapped
// table that stays in L2. Valid because an id determines its bytes.
class PairMemo {
 public:
  static constexpr size_t kSize = 1 << 14, kMask = kSize - 1;
  void bind(uint64_t owner) {
    if (owner == owner_) return;
    owner_ = owner;
    std::fill(std::begin(keys_), std::end(keys_), ~0ull);
  }
  bool find(uint64_t key, int32_t& rank) const {
    const size_t i = hash_mix(key) & kMask;
    if (keys_[i] != key) return false;
    rank = ranks_[i];
    return true;
  }
  void put(uint64_t key, int32_t rank) {
    const size_t i = hash_mix(key) & kMask;
    keys_[i] = key;
    ranks_[i] = rank;
  }

 private:
  uint64_t owner_ = 0;
  uint64_t keys_[kSize];
  int32_t ranks_[kSize];
};

PairMemo& pair_memo() {
  thread_local auto memo = std::make_unique<PairMemo>();
  return *memo;
}

PieceCache& thread_cache() {
  thread_local PieceCache cache;
  return cache;
}

}  // namespace

void BpeModel::clear_thread_cache() { thread_cache().clear(); }

void BpeModel::add_token(int32_t id, std::string_view symbol, std::string_view source) {
  checked_token_id(id, source);  // before the table below is sized by it
  if (!index_.insert(symbol, id))
    throw_error<FormatError>("{}: token id {} repeats the bytes of token {}", source, id,
                             *index_.find(symbol));
  if (static_cast<size_t>(id) >= symbol_span_.size()) symbol_span_.resize(id + 1, {0, 0});
  if (symbol_span_[id].second != 0)
    throw_error<FormatError>("{}: duplicate token id {}", source, id);
  symbol_span_[id] = {static_cast<uint32_t>(symbols_.size()),
                      static_cast<uint32_t>(symbol.size() + 1)};
  symbols_.append(symbol);
  max_id_ = std::max(max_id_, id);
}

void BpeModel::add_merge(int32_t left, int32_t right, int32_t merged) {
  if (pairs_.insert(left, right, {static_cast<int32_t>(num_merges_), merged})) ++num_merges_;
}

void BpeModel::add_merge(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  if (pairs_.insert(left, right, {rank, merged})) ++num_merges_;
}

std::string_view BpeModel::symbol(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= symbol_span_.size()) return {};
  const auto [off, len_plus1] = symbol_span_[id];
  if (len_plus1 == 0) return {};
  return std::string_view(symbols_.data() + off, len_plus1 - 1);
}

void BpeModel::finalize(const BpeOptions& options) {
  options_ = options;
  serial_ = g_next_serial.fetch_add(1);
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    std::optional<int32_t> id;
    if (options.char_symbols)
      id = index_.find(fmt::format("<0x{:02X}>", b));  // byte fallback token
    else
      id = index_.find(std::string_view(&c, 1));
    byte_ids_[b] = id.value_or(-1);
  }
}

void BpeModel::initial_parts(std::string_view piece, std::vector<Part>& parts) const {
  const auto* s = reinterpret_cast<const uint8_t*>(piece.data());
  auto push_unk = [&](uint32_t start) {
    if (!options_.unk_id) return;  // Hugging Face drops characters it cannot represent
    if (options_.fuse_unk && !parts.empty() && parts.back().id == *options_.unk_id) return;
    parts.push_back({start, *options_.unk_id});
  };
  if (!options_.char_symbols) {
    for (uint32_t i = 0; i < piece.size(); ++i) {
      if (byte_ids_[s[i]] >= 0)
        parts.push_back({i, byte_ids_[s[i]]});
      else
        push_unk(i);
    }
    return;
  }
  for (uint32_t i = 0; i < piece.size();) {
    const uint32_t len = decode_utf8(s + i, piece.size() - i).len;
    if (auto id = index_.find(piece.substr(i, len))) {
      parts.push_back({i, *id});
    } else if (options_.byte_fallback) {
      bool all = true;
      for (uint32_t k = 0; k < len; ++k) all = all && byte_ids_[s[i + k]] >= 0;
      for (uint32_t k = 0; k < len && all; ++k) parts.push_back({i + k, byte_ids_[s[i + k]]});
      if (!all) push_unk(i);
    } else {
      push_unk(i);
    }
    i += len;
  }
}

// Merges parts until no adjacent pair has a rank. Below kSmallPiece parts (unless force_heap)
// a linear scan finds the lowest rank, as tiktoken does; above, a min-heap of (rank, left
// part index) with lazy deletion over a doubly linked list keeps it O(n log n). Both merge
// the lowest rank first and the leftmost among equal ranks, so they agree.
template <class Lookup>
void BpeModel::merge(std::string_view piece, std::vector<Part>& parts, bool force_heap,
                     const Lookup& lookup, std::vector<int32_t>& out) const {
  const int n = static_cast<int>(parts.size());
  const auto end_of = [&](int k) -> uint32_t {
    return k + 1 < static_cast<int>(parts.size()) ? parts[k + 1].start
                                                  : static_cast<uint32_t>(piece.size());
  };
  if (n <= kSmallPiece && !force_heap) {
    Merge ranks[kSmallPiece];
    for (int k = 0; k + 1 < n; ++k) ranks[k] = lookup(parts[k], parts[k + 1], end_of(k + 1));
    int m = n;
    while (m > 1) {
      int best = -1;
      int32_t best_rank = kNoRank;
      for (int k = 0; k + 1 < m; ++k)
        if (ranks[k].rank < best_rank) best_rank = ranks[k].rank, best = k;
      if (best < 0) break;
      parts[best].id = ranks[best].merged;
      parts.erase(parts.begin() + best + 1);
      for (int k = best + 1; k + 1 < m; ++k) ranks[k] = ranks[k + 1];
      --m;
      if (best + 1 < m) ranks[best] = lookup(parts[best], parts[best + 1], end_of(best + 1));
      if (best > 0) ranks[best - 1] = lookup(parts[best - 1], parts[best], end_of(best));
    }
    for (const Part& p : parts) out.push_back(p.id);
    return;
  }
  struct Item {
    int32_t rank;
    int left, right;
    bool operator>(const Item& o) const {  // min-heap order: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  thread_local std::vector<int> prev, next;  // reused: no allocation per piece
  thread_local std::vector<Merge> cur;
  thread_local std::vector<Item> heap;
  prev.resize(n);
  next.resize(n);
  cur.assign(n, Merge{kNoRank, -1});
  heap.clear();
  for (int k = 0; k < n; ++k) prev[k] = k - 1, next[k] = k + 1 < n ? k + 1 : -1;
  const auto end_at = [&](int k) -> uint32_t {
    return next[k] >= 0 ? parts[next[k]].start : static_cast<uint32_t>(piece.size());
  };
  const auto refresh = [&](int k) {
    if (k < 0 || next[k] < 0) return;
    cur[k] = lookup(parts[k], parts[next[k]], end_at(next[k]));
    if (cur[k].rank == kNoRank) return;
    heap.push_back({cur[k].rank, k, next[k]});
    std::push_heap(heap.begin(), heap.end(), std::greater<Item>());
  };
  for (int k = 0; k + 1 < n; ++k) refresh(k);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Item>());
    const Item it = heap.back();
    heap.pop_back();
    if (next[it.left] != it.right || cur[it.left].rank != it.rank) continue;  // stale
    const int k = it.left, gone = it.right;
    parts[k].id = cur[k].merged;
    next[k] = next[gone];
    if (next[k] >= 0) prev[next[k]] = k;
    next[gone] = -2;  // dead
    refresh(k);
    refresh(prev[k]);
  }
  for (int k = 0; k >= 0; k = next[k]) out.push_back(parts[k].id);
}

void BpeModel::encode_piece_uncached(std::string_view piece, std::vector<int32_t>& out,
                                     bool force_heap) const {
  thread_local std::vector<Part> parts;
  parts.clear();
  initial_parts(piece, parts);
  if (parts.empty()) return;
  if (options_.rule == MergeRule::kByRank) {
    PairMemo& memo = pair_memo();
    memo.bind(serial_);
    const auto lookup = [&](const Part& a, const Part& b, uint32_t b_end) -> Merge {
      const uint64_t key = PairTable::key(a.id, b.id);
      int32_t rank;
      if (!memo.find(key, rank)) {
        rank = index_.find(piece.substr(a.start, b_end - a.start)).value_or(kNoRank);
        memo.put(key, rank);
      }
      return {rank, rank};
    };
    merge(piece, parts, force_heap, lookup, out);
  } else {
    const auto lookup = [&](const Part& a, const Part& b, uint32_t) -> Merge {
      const Merge* m = pairs_.find(a.id, b.id);
      return m ? *m : Merge{kNoRank, -1};
    };
    merge(piece, parts, force_heap, lookup, out);
  }
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (options_.whole_piece_first) {
    if (auto id = index_.find(piece)) {
      out.push_back(*id);
      return;
    }
  }
  if (piece.size() == 1 && !options_.char_symbols && byte_ids_[uint8_t(piece[0])] >= 0) {
    out.push_back(byte_ids_[uint8_t(piece[0])]);
    return;
  }
  if (piece.size() > PieceCache::kMaxPieceBytes) {
    encode_piece_uncached(piece, out, false);
    return;
  }
  PieceCache& cache = thread_cache();
  const uint64_t h = hash_bytes(piece.data(), piece.size());
  uint32_t n = 0;
  if (const int32_t* ids = cache.find(serial_, piece, h, n)) {
    out.insert(out.end(), ids, ids + n);
    return;
  }
  const size_t before = out.size();
  encode_piece_uncached(piece, out, false);
  cache.insert(piece, h, out.data() + before, static_cast<uint32_t>(out.size() - before));
}

std::optional<int32_t> BpeModel::find(std::string_view symbol) const { return index_.find(symbol); }

}  // namespace lmstack::tokenizer
