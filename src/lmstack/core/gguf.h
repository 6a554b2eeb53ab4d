// GGUF version 3, llama.cpp's model file format (spec: ggml's docs/gguf.md), at the level of
// the container: a validating, memory-mapped reader of the metadata key/value pairs and the
// tensor directory, and a writer. It knows nothing of models or tokenizers (model/gguf_*.cc
// and tokenizer/gguf_vocab.cc read the keys); it lives in core so both layers can use it.
//
// Layout: "GGUF", u32 version, u64 tensor count, u64 key count; keys (string key, u32 type,
// value); tensor infos (string name, u32 n_dims, u64 ne[n_dims] innermost first, u32 ggml type,
// u64 offset from the data section); padding to general.alignment (default 32); the data.
// Strings are u64 length + bytes; arrays are u32 element type + u64 count + elements.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lmstack/core/tensor.h"

namespace lmstack {

enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);

// One metadata value. Scalars live in `integer` (all integer types and bool), `number` (f32,
// f64) or `text`; arrays in `integers`, `numbers` or `strings` by element type. Arrays of
// arrays are skipped when read (array_size says how many there were); no llama-family key uses
// them.
struct GgufValue {
  GgufValueType type = GgufValueType::kU32;
  GgufValueType array_type = GgufValueType::kU8;  // element type when type == kArray
  int64_t integer = 0;
  double number = 0;
  std::string text;
  std::vector<int64_t> integers;
  std::vector<double> numbers;
  std::vector<std::string> strings;
  uint64_t array_size = 0;

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue f32_array(std::vector<double> v);
  static GgufValue i32_array(std::vector<int64_t> v);
  bool is_integer() const;  // an integer scalar type (not bool)
};

// ggml tensor type numbers (ggml.h enum ggml_type). lmstack computes with F32, F16, BF16,
// Q8_0, Q4_0, Q4_K and Q6_K; the reader also knows the block sizes of the other standard types
// so it can validate any file's layout.
struct GgmlTypeInfo {
  uint32_t id;
  std::string_view name;  // "Q4_K"
  int block_size;         // elements per block
  int block_bytes;
};
// nullptr for a number ggml does not define.
const GgmlTypeInfo* ggml_type_info(uint32_t id);
// The DType holding a ggml type, if lmstack has one.
std::optional<DType> dtype_of_ggml(uint32_t id);
// The ggml type of a DType; LMSTACK_CHECKs that there is one (not I8/I32/int4_g*).
uint32_t ggml_type_of(DType t);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the innermost (contiguous) dimension
  uint32_t ggml_type = 0;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
  // lmstack's row-major shape: ne reversed ([N, K] for a weight with ne = {K, N}).
  Shape shape() const;
};

// A mapped and fully validated GGUF file. Throws IoError if it cannot be mapped and
// FormatError naming the path and the key/tensor/offset at fault for: a bad magic, a version
// other than 3, a count or string/array length that does not fit the file, an unknown value
// type or ggml type, a duplicate key or tensor name, general.alignment that is not a power of
// two u32, more than 4 dims or a zero dim, ne[0] not a multiple of the type's block size, an
// element count that overflows, an offset that is misaligned, out of the data section or
// overlapping another tensor. Thread safety: const methods may run concurrently.
class GgufFile {
 public:
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  bool has(const std::string& key) const { return key_index_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;
  // Typed getters: FormatError "<path>: metadata key 'k' is missing" or "... is <type>, expected
  // <what>". get_int accepts any integer type; get_float f32 or f64 (and integers).
  const GgufValue& get(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::string>& get_strings(const std::string& key) const;
  const std::vector<double>& get_floats(const std::string& key) const;
  const std::vector<int64_t>& get_ints(const std::string& key) const;
  // The optional forms return `fallback` when the key is absent (and still check the type).
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;

  bool has_tensor(const std::string& name) const { return tensor_index_.count(name) != 0; }
  // FormatError "<path>: no tensor 'name'" when absent.
  const GgufTensorInfo& tensor_info(const std::string& name) const;
  // A read-only view of the tensor's bytes in the mapping (shape ne reversed). FormatError if
  // its ggml type has no lmstack DType.
  Tensor tensor(const std::string& name) const;

 private:
  void parse();
  std::shared_ptr<const MappedFile> file_;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> key_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Builds a GGUF file: keys in insertion order, tensors in insertion order, each at the next
// multiple of the alignment. Tensors may be mapped or owned, of any DType with a ggml type;
// the file is assembled in memory (one copy of all data) and written atomically.
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32);
  // Adds or replaces a key.
  void set(const std::string& key, GgufValue value);
  // Adds a tensor; LMSTACK_CHECKs a unique name and a row size that is whole blocks.
  void add_tensor(const std::string& name, const Tensor& t);
  // The whole file's bytes.
  std::string serialize() const;
  void write(const std::string& path) const;

 private:
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<std::pair<std::string, Tensor>> tensors_;
};

}  // namespace lmstack
