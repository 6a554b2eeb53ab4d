// Host memory: 64-byte aligned buffers, read-only file mappings, and the ledger that counts
// the bytes every component holds per category, so commands can print "weights X bytes, KV
// cache Y bytes" beside calc's prediction.
//
// Thread safety: the ledger is atomic; HostBuffer and MappedFile are movable values with no
// internal locking (share them read-only, or guard them).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lmstack {

enum class MemoryCategory : uint8_t {
  kWeights = 0,  // model parameters (allocated or mapped)
  kKvCache,      // paged KV pool
  kActivations,  // forward/backward scratch
  kGradients,    // parameter gradients
  kOptimizer,    // optimizer state (Adam m, v, fp32 master weights)
  kBuffers,      // everything else (I/O staging, tokenizer tables)
  kCount
};
inline constexpr int kNumMemoryCategories = static_cast<int>(MemoryCategory::kCount);

std::string_view memory_category_name(MemoryCategory c);

// Bytes currently held per category. `mapped` counts file mappings separately from
// allocations (a mapping costs page cache, not heap).
struct MemorySnapshot {
  std::array<int64_t, kNumMemoryCategories> allocated{};
  std::array<int64_t, kNumMemoryCategories> mapped{};
  int64_t held(MemoryCategory c) const {
    return allocated[static_cast<int>(c)] + mapped[static_cast<int>(c)];
  }
};
MemorySnapshot memory_snapshot();
// Largest total of allocated bytes seen for the category since start (or the last reset).
int64_t memory_peak(MemoryCategory c);
void memory_reset_peaks();

// An owned, 64-byte aligned, zero-initialized allocation counted under one category; from
// 2 MiB up, 2 MiB aligned on transparent huge pages where the kernel allows (memory.cc).
class HostBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  HostBuffer() = default;
  HostBuffer(size_t bytes, MemoryCategory category);
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return bytes_; }
  MemoryCategory category() const { return category_; }

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemoryCategory category_ = MemoryCategory::kBuffers;
};

// A read-only memory map of a whole file, counted under a category. Throws IoError naming
// the path when the file cannot be opened or mapped. An empty file maps to size() == 0.
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const std::string& path, MemoryCategory category);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }
  const std::string& path() const { return path_; }
  // Advice: the pages wholly inside [offset, offset + bytes) are not needed now (they leave
  // the process's resident set; a later read faults them back in from the file). They also
  // leave the ledger's mapped count, so a tensor copied out of the map (model/repack.h) is
  // not counted twice; call it at most once per range, for bytes that are not read again.
  void drop_pages(size_t offset, size_t bytes) const;

 private:
  void release();
  const uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  mutable size_t dropped_ = 0;  // bytes drop_pages took out of the ledger
  std::string path_;
  MemoryCategory category_ = MemoryCategory::kWeights;
};

}  // namespace lmstack
