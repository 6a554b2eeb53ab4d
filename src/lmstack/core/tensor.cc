// Tensor storage, views and element access (see tensor.h).
#include "lmstack/core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "lmstack/core/half.h"

namespace lmstack {

struct Tensor::Storage {
  HostBuffer owned;
  std::shared_ptr<const MappedFile> mapped;
  uint8_t* base() {
    return owned.data() ? static_cast<uint8_t*>(owned.data())
                        : const_cast<uint8_t*>(mapped ? mapped->data() : nullptr);
  }
};

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::vector<int64_t>(dims)) {}

Shape::Shape(const std::vector<int64_t>& dims) {
  LMSTACK_CHECK(dims.size() <= kMaxDims, "rank {} exceeds {}", dims.size(), kMaxDims);
  for (size_t i = 0; i < dims.size(); ++i) {
    LMSTACK_CHECK(dims[i] >= 0, "negative dimension {}", dims[i]);
    dims_[i] = dims[i];
  }
  rank_ = static_cast<int>(dims.size());
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  return rank_ == o.rank_ && std::equal(dims_.begin(), dims_.begin() + rank_, o.dims_.begin());
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i)
    s += (i ? ", " : "") + std::to_string(dims_[static_cast<size_t>(i)]);
  return s + "]";
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, MemoryCategory category) {
  Tensor t;
  t.storage_ = std::make_shared<Storage>();
  t.storage_->owned = HostBuffer(static_cast<size_t>(dtype_bytes(dtype, shape.numel())), category);
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::from_mapped(std::shared_ptr<const MappedFile> file, size_t offset,
                           const Shape& shape, DType dtype) {
  const int64_t bytes = dtype_bytes(dtype, shape.numel());
  if (offset > file->size() || static_cast<size_t>(bytes) > file->size() - offset)
    throw_error<FormatError>("{}: tensor of {} bytes at offset {} exceeds the file size {}",
                             file->path(), bytes, offset, file->size());
  Tensor t;
  t.storage_ = std::make_shared<Storage>();
  t.storage_->mapped = std::move(file);
  t.offset_ = offset;
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::from_f32(const Shape& shape, const std::vector<float>& values,
                        MemoryCategory category) {
  LMSTACK_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "{} values for shape {}",
                values.size(), shape.str());
  Tensor t = zeros(shape, DType::kF32, category);
  std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(float));
  return t;
}

bool Tensor::is_mapped() const { return storage_ && storage_->mapped != nullptr; }

void Tensor::drop_mapped_pages() const {
  if (is_mapped()) storage_->mapped->drop_pages(offset_, static_cast<size_t>(nbytes()));
}

int64_t Tensor::row_bytes() const {
  LMSTACK_CHECK(rank() >= 1, "row_bytes of a scalar");
  return shape_[0] == 0 ? 0 : nbytes() / shape_[0];
}

void* Tensor::raw_data() {
  LMSTACK_CHECK(storage_ != nullptr, "data() of an undefined tensor");
  LMSTACK_CHECK(!is_mapped(), "write access to a read-only mapped tensor");
  return storage_->base() + offset_;
}

const void* Tensor::raw_data() const {
  LMSTACK_CHECK(storage_ != nullptr, "data() of an undefined tensor");
  return storage_->base() + offset_;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  LMSTACK_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
                "slice [{}, {}) of {}", begin, end, shape_.str());
  // Its rows are interleaved in groups whose placement depends on the row count.
  LMSTACK_CHECK(!is_row_interleaved(dtype_) || (begin == 0 && end == shape_[0]),
                "slice [{}, {}) of a {} tensor {}", begin, end, dtype_name(dtype_), shape_.str());
  Tensor t = *this;
  std::vector<int64_t> dims = shape_.to_vector();
  dims[0] = end - begin;
  t.shape_ = Shape(dims);
  t.offset_ = offset_ + static_cast<size_t>(begin * row_bytes());
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  LMSTACK_CHECK(shape.numel() == numel(), "reshape {} -> {}", shape_.str(), shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::view(DType dtype, const Shape& shape) const {
  LMSTACK_CHECK(dtype_bytes(dtype, shape.numel()) <= nbytes(), "view {} {} of {} bytes",
                dtype_name(dtype), shape.str(), nbytes());
  Tensor t = *this;
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::clone(MemoryCategory category) const {
  Tensor t = zeros(shape_, dtype_, category);
  std::memcpy(t.raw_data(), raw_data(), static_cast<size_t>(nbytes()));
  return t;
}

float Tensor::get_f32(int64_t i) const {
  LMSTACK_CHECK(0 <= i && i < numel(), "index {} out of {}", i, shape_.str());
  switch (dtype_) {
    case DType::kF32:
      return data<float>()[i];
    case DType::kBF16:
      return bf16_to_f32(data<uint16_t>()[i]);
    case DType::kF16:
      return f16_to_f32(data<uint16_t>()[i]);
    case DType::kI8:
      return data<int8_t>()[i];
    case DType::kI32:
      return static_cast<float>(data<int32_t>()[i]);
    default:
      LMSTACK_CHECK(false, "get_f32 on block-quantized {}", dtype_name(dtype_));
  }
  return 0;
}

void Tensor::set_f32(int64_t i, float v) {
  LMSTACK_CHECK(0 <= i && i < numel(), "index {} out of {}", i, shape_.str());
  switch (dtype_) {
    case DType::kF32:
      data<float>()[i] = v;
      break;
    case DType::kBF16:
      data<uint16_t>()[i] = f32_to_bf16(v);
      break;
    case DType::kF16:
      data<uint16_t>()[i] = f32_to_f16(v);
      break;
    case DType::kI8:
      data<int8_t>()[i] = static_cast<int8_t>(v);
      break;
    case DType::kI32:
      data<int32_t>()[i] = static_cast<int32_t>(v);
      break;
    default:
      LMSTACK_CHECK(false, "set_f32 on block-quantized {}", dtype_name(dtype_));
  }
}

int64_t Tensor::flat(std::initializer_list<int64_t> index) const {
  LMSTACK_CHECK(static_cast<int>(index.size()) == rank(), "{} indices for {}", index.size(),
                shape_.str());
  int64_t f = 0;
  int d = 0;
  for (int64_t i : index) {
    LMSTACK_CHECK(0 <= i && i < shape_[d], "index {} out of dim {} of {}", i, d, shape_.str());
    f = f * shape_[d++] + i;
  }
  return f;
}

float Tensor::at(std::initializer_list<int64_t> index) const { return get_f32(flat(index)); }

std::vector<float> Tensor::to_f32_vector() const {
  std::vector<float> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[static_cast<size_t>(i)] = get_f32(i);
  return v;
}

std::string Tensor::summary() const {
  std::string s = fmt::format("Tensor {} {} ({} bytes{})", dtype_name(dtype_), shape_.str(),
                              defined() ? nbytes() : 0, is_mapped() ? ", mapped" : "");
  if (!defined() || is_quantized(dtype_) || numel() == 0) return s;
  double sum = 0;
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int64_t i = 0; i < numel(); ++i) {
    const float v = get_f32(i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  return s + fmt::format(" min {:.6g} max {:.6g} mean {:.6g}", lo, hi,
                         sum / static_cast<double>(numel()));
}

}  // namespace lmstack
