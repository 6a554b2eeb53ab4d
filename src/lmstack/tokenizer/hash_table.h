// Small open-addressing hash tables for the tokenizer's hot path: byte strings -> id (token
// lookup, one probe per piece in the common case) and (left, right) id pairs -> merge. Both are
// insert-only and grow by doubling; lookups never allocate.
//
// Thread safety: concurrent lookups are safe; inserts are not (tables are built, then frozen).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmstack::tokenizer {

inline uint64_t hash_mix(uint64_t x) {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  return x ^ (x >> 32);
}

// A fast non-cryptographic hash of a short byte string (reads each byte at most twice).
inline uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = hash_mix(h ^ w);
    p += 8;
    n -= 8;
  }
  if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    h = hash_mix(h ^ ((uint64_t(a) << 32) | b));
  } else if (n > 0) {
    const auto* u = reinterpret_cast<const uint8_t*>(p);
    h = hash_mix(h ^ (u[0] | (uint64_t(u[n / 2]) << 8) | (uint64_t(u[n - 1]) << 16)));
  }
  return h;
}

// Byte string -> int32 value. Keys are copied into an arena.
class BytesIndex {
 public:
  // Returns false (and changes nothing) if the key is already present.
  bool insert(std::string_view key, int32_t value) {
    if ((records_.size() + 1) * 2 > slots_.size()) grow();
    const uint64_t h = hash_bytes(key.data(), key.size());
    size_t i = h & mask_;
    while (slots_[i] != 0) {
      const Record& r = records_[(slots_[i] & 0xFFFFFFFF) - 1];
      if ((slots_[i] >> 32) == (h >> 32) && view(r) == key) return false;
      i = (i + 1) & mask_;
    }
    records_.push_back(
        {static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), value});
    arena_.append(key);
    slots_[i] = (h & 0xFFFFFFFF00000000ull) | records_.size();
    return true;
  }
  std::optional<int32_t> find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    const uint64_t h = hash_bytes(key.data(), key.size());
    for (size_t i = h & mask_; slots_[i] != 0; i = (i + 1) & mask_) {
      if ((slots_[i] >> 32) != (h >> 32)) continue;
      const Record& r = records_[(slots_[i] & 0xFFFFFFFF) - 1];
      if (r.len == key.size() && std::memcmp(arena_.data() + r.offset, key.data(), r.len) == 0)
        return r.value;
    }
    return std::nullopt;
  }
  size_t size() const { return records_.size(); }

 private:
  struct Record {
    uint32_t offset, len;
    int32_t value;
  };
  std::string_view view(const Record& r) const { return {arena_.data() + r.offset, r.len}; }
  void grow() {
    const size_t cap = slots_.empty() ? 1024 : slots_.size() * 2;
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    for (size_t k = 0; k < records_.size(); ++k) {
      const uint64_t h = hash_bytes(arena_.data() + records_[k].offset, records_[k].len);
      size_t i = h & mask_;
      while (slots_[i] != 0) i = (i + 1) & mask_;
      slots_[i] = (h & 0xFFFFFFFF00000000ull) | (k + 1);
    }
  }
  std::vector<uint64_t> slots_;  // (hash high 32 bits) << 32 | (record index + 1); 0 = empty
  std::vector<Record> records_;
  std::string arena_;
  size_t mask_ = 0;
};

// (left id, right id) -> (rank, merged id).
class PairTable {
 public:
  struct Merge {
    int32_t rank, merged;
  };
  static uint64_t key(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  // Returns false if the pair is already present (the first merge listed wins).
  bool insert(int32_t left, int32_t right, Merge m) {
    if ((size_ + 1) * 2 > entries_.size()) grow();
    if (place(key(left, right), m)) {
      ++size_;
      return true;
    }
    return false;
  }
  const Merge* find(int32_t left, int32_t right) const {
    if (entries_.empty()) return nullptr;
    const uint64_t k = key(left, right);
    for (size_t i = hash_mix(k) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.key == k) return &e.merge;
      if (e.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Entry {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  bool place(uint64_t k, Merge m) {
    size_t i = hash_mix(k) & mask_;
    while (entries_[i].key != kEmpty) {
      if (entries_[i].key == k) return false;
      i = (i + 1) & mask_;
    }
    entries_[i] = {k, m};
    return true;
  }
  void grow() {
    std::vector<Entry> old;
    old.swap(entries_);
    entries_.assign(old.empty() ? 1024 : old.size() * 2, Entry{});
    mask_ = entries_.size() - 1;
    for (const Entry& e : old)
      if (e.key != kEmpty) place(e.key, e.merge);
  }
  std::vector<Entry> entries_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace lmstack::tokenizer
