// GgufWriter (see gguf.h): header, keys, tensor infos, padding, data, in the GGUF v3 layout that
// gguf-py's GGUFWriter and llama.cpp's gguf_write produce (each tensor's data padded to the
// alignment; general.alignment written only when it is not the default 32).
#include <cstring>

#include "lmstack/core/file.h"
#include "lmstack/core/gguf.h"

namespace lmstack {
namespace {

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_scalar(std::string& out, GgufValueType t, int64_t integer, double number) {
  using T = GgufValueType;
  switch (t) {
    case T::kU8:
      put<uint8_t>(out, static_cast<uint8_t>(integer));
      break;
    case T::kI8:
      put<int8_t>(out, static_cast<int8_t>(integer));
      break;
    case T::kU16:
      put<uint16_t>(out, static_cast<uint16_t>(integer));
      break;
    case T::kI16:
      put<int16_t>(out, static_cast<int16_t>(integer));
      break;
    case T::kU32:
      put<uint32_t>(out, static_cast<uint32_t>(integer));
      break;
    case T::kI32:
      put<int32_t>(out, static_cast<int32_t>(integer));
      break;
    case T::kBool:
      put<uint8_t>(out, integer != 0 ? 1 : 0);
      break;
    case T::kU64:
      put<uint64_t>(out, static_cast<uint64_t>(integer));
      break;
    case T::kI64:
      put<int64_t>(out, integer);
      break;
    case T::kF32:
      put<float>(out, static_cast<float>(number));
      break;
    case T::kF64:
      put<double>(out, number);
      break;
    default:
      LMSTACK_CHECK(false, "put_scalar of {}", gguf_value_type_name(t));
  }
}

void put_value(std::string& out, const GgufValue& v) {
  put<uint32_t>(out, static_cast<uint32_t>(v.type));
  if (v.type == GgufValueType::kString) {
    put_string(out, v.text);
    return;
  }
  if (v.type != GgufValueType::kArray) {
    put_scalar(out, v.type, v.integer, v.number);
    return;
  }
  const GgufValueType et = v.array_type;
  LMSTACK_CHECK(et != GgufValueType::kArray, "GgufWriter: nested arrays are not supported");
  put<uint32_t>(out, static_cast<uint32_t>(et));
  if (et == GgufValueType::kString) {
    put<uint64_t>(out, v.strings.size());
    for (const std::string& s : v.strings) put_string(out, s);
  } else if (et == GgufValueType::kF32 || et == GgufValueType::kF64) {
    put<uint64_t>(out, v.numbers.size());
    for (double x : v.numbers) put_scalar(out, et, 0, x);
  } else {
    put<uint64_t>(out, v.integers.size());
    for (int64_t x : v.integers) put_scalar(out, et, x, 0);
  }
}

uint64_t align_up(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  LMSTACK_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "alignment {}", alignment);
  if (alignment != 32) set("general.alignment", GgufValue::u32(alignment));
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kv_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, const Tensor& t) {
  for (const auto& [n, unused] : tensors_) LMSTACK_CHECK(n != name, "duplicate tensor {}", name);
  const GgmlTypeInfo* info = ggml_type_info(ggml_type_of(t.dtype()));
  LMSTACK_CHECK(t.dim(t.rank() - 1) % info->block_size == 0, "tensor {}: {} rows of {}", name,
                info->name, t.shape().str());
  tensors_.emplace_back(name, t);
}

std::string GgufWriter::serialize() const {
  std::string out;
  put<uint32_t>(out, 0x46554747);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const auto& [key, value] : kv_) {
    put_string(out, key);
    put_value(out, value);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors_) {
    put_string(out, name);
    put<uint32_t>(out, static_cast<uint32_t>(t.rank()));
    for (int d = t.rank() - 1; d >= 0; --d) put<uint64_t>(out, static_cast<uint64_t>(t.dim(d)));
    put<uint32_t>(out, ggml_type_of(t.dtype()));
    put<uint64_t>(out, offset);
    offset = align_up(offset + static_cast<uint64_t>(t.nbytes()), alignment_);
  }
  out.resize(align_up(out.size(), alignment_), '\0');
  for (const auto& [name, t] : tensors_) {
    out.append(static_cast<const char*>(t.raw_data()), static_cast<size_t>(t.nbytes()));
    out.resize(align_up(out.size(), alignment_), '\0');
  }
  return out;
}

void GgufWriter::write(const std::string& path) const { write_file_atomic(path, serialize()); }

}  // namespace lmstack
