// Tensor: up to 4-D, row-major, contiguous, with a dtype and shared storage. A view (a slice
// along the outer dimension, or a reshape) shares the storage and costs no copy. Storage is
// either an owned HostBuffer or a region of a MappedFile (weights are mapped, not copied);
// the tensor keeps its storage alive.
//
// Thread safety: a Tensor is a handle; concurrent reads are fine, concurrent writes to the
// same elements are the caller's problem.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "lmstack/core/dtype.h"
#include "lmstack/core/error.h"
#include "lmstack/core/memory.h"

namespace lmstack {

inline constexpr int kMaxDims = 4;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  std::string str() const;  // "[2, 3]"
  std::vector<int64_t> to_vector() const { return {dims_.begin(), dims_.begin() + rank_}; }

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int rank_ = 0;
};

class Tensor {
 public:
  Tensor() = default;

  // A new zero-filled tensor counted under `category`.
  static Tensor zeros(const Shape& shape, DType dtype,
                      MemoryCategory category = MemoryCategory::kActivations);
  // A tensor over `bytes` of a mapped file starting at `offset` (the file stays mapped while
  // any tensor uses it). Throws FormatError if the region is out of the file's bounds.
  static Tensor from_mapped(std::shared_ptr<const MappedFile> file, size_t offset,
                            const Shape& shape, DType dtype);
  // An f32 tensor holding a copy of `values` (for tests and small tables).
  static Tensor from_f32(const Shape& shape, const std::vector<float>& values,
                         MemoryCategory category = MemoryCategory::kActivations);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return shape_.rank(); }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_.numel(); }
  int64_t nbytes() const { return dtype_bytes(dtype_, numel()); }
  bool is_mapped() const;  // true when the storage is a read-only file mapping
  // Bytes of one slice along the outer dimension.
  int64_t row_bytes() const;

  void* raw_data();
  const void* raw_data() const;
  template <class T>
  T* data() {
    return static_cast<T*>(raw_data());
  }
  template <class T>
  const T* data() const {
    return static_cast<const T*>(raw_data());
  }

  // Rows [begin, end) of the outer dimension, sharing storage.
  Tensor slice(int64_t begin, int64_t end) const;
  // Same storage, new shape with the same element count.
  Tensor reshape(const Shape& shape) const;
  // Same storage and first byte, read as `dtype` with `shape`, which must fit in this tensor's
  // bytes (a typed view into a byte arena; see kernels/quant_repack.h).
  Tensor view(DType dtype, const Shape& shape) const;
  // For a view of a mapped file: MappedFile::drop_pages over this tensor's bytes (when it has
  // been copied and the mapping is kept for other tensors). No-op for owned storage.
  void drop_mapped_pages() const;
  // A deep copy into new (writable) storage.
  Tensor clone(MemoryCategory category = MemoryCategory::kActivations) const;

  // Element access through f32, for tests and tools (plain float/int types only).
  float get_f32(int64_t flat_index) const;
  void set_f32(int64_t flat_index, float value);
  float at(std::initializer_list<int64_t> index) const;
  std::vector<float> to_f32_vector() const;

  // "Tensor f32 [2, 3] (24 bytes) min -1 max 2 mean 0.5"
  std::string summary() const;

 private:
  struct Storage;
  int64_t flat(std::initializer_list<int64_t> index) const;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes from the storage's start
  Shape shape_;
  DType dtype_ = DType::kF32;
};

}  // namespace lmstack
