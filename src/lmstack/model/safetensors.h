// Safetensors (Hugging Face's tensor file format): a memory-mapped reader that validates the
// whole header before handing out views, a set of shards seen as one name space (the
// model.safetensors.index.json "weight_map"), and a writer. Format, as the safetensors crate
// defines it: u64 little-endian N, N bytes of JSON {name: {dtype, shape, data_offsets:
// [begin, end)}, "__metadata__": {str: str}}, then the data; offsets count from the data start.
// See docs/formats/safetensors.md. Not handled here: GGUF, pickled PyTorch .bin files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lmstack/core/json.h"
#include "lmstack/core/tensor.h"

namespace lmstack::model {

// Block-quantized tensors (q8_0, q4_K, int4_g128, ...; see docs/formats/quantization.md) are
// stored as U8 [rows, row_bytes] with "__metadata__" field kQuantizedDTypeKeyPrefix + name
// holding the lmstack dtype name; reader and writer translate to and from the logical
// [rows, K] tensor of that dtype.
inline constexpr const char* kQuantizedDTypeKeyPrefix = "lmstack.dtype.";

// One tensor's header entry. `dtype_name` is the safetensors spelling ("BF16", "I64", "U8");
// `dtype` is set only when lmstack has a matching DType (F32, BF16, F16, I8, I32, or a
// quantized dtype named in the metadata, in which case `shape` is the logical [rows, K]).
struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;
  bool has_dtype = false;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range relative to the data section
};

// Parses and validates a header. `file` is the whole file (at least the 8-byte length and
// the header), `source` names it in errors. Throws FormatError naming the source and the
// tensor/field: length past the end, invalid JSON, missing or mistyped dtype/shape/
// data_offsets, an unknown dtype string, offsets out of the data section, overlapping
// ranges, a range whose size disagrees with shape x dtype, or a quantized-dtype metadata
// field naming no tensor, an unknown dtype or a tensor that cannot hold it. Returns entries by
// name; `metadata` receives "__metadata__" (an empty object when absent) and `data_offset` the file
// offset of the data section.
std::map<std::string, SafetensorsEntry> parse_safetensors_header(const uint8_t* file,
                                                                 size_t file_bytes,
                                                                 const std::string& source,
                                                                 Json* metadata,
                                                                 size_t* data_offset);

// A memory-mapped, validated safetensors file. Tensors it returns are read-only views into
// the mapping (counted under MemoryCategory::kWeights) and keep it alive after this object
// is gone. Thread safety: const methods may be called concurrently.
class SafetensorsFile {
 public:
  // Maps and validates `path` (IoError if unreadable, FormatError as above).
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const Json& metadata() const { return metadata_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // The entry; FormatError "<path>: no tensor 'name'" when absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  // A view of the tensor's bytes (copied only if misaligned for its element type). Throws
  // FormatError if absent, of rank > 4, or of a dtype lmstack cannot hold (e.g. I64).
  Tensor tensor(const std::string& name) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  Json metadata_;
  size_t data_offset_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
};

// Tensors from one file or from the shards an index names, under one name space.
class SafetensorsSet {
 public:
  // One file: model.safetensors.
  static SafetensorsSet open_file(const std::string& path);
  // An index JSON ({"weight_map": {tensor: shard file}}), shards resolved beside it. Throws
  // FormatError when the index is malformed, names a missing shard, or a shard lacks a tensor
  // the index puts there.
  static SafetensorsSet open_index(const std::string& index_path);

  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<std::string> names() const;
  // The file holding `name`; FormatError "<description>: missing tensor 'name'" if absent.
  const SafetensorsFile& file_of(const std::string& name) const;
  Tensor tensor(const std::string& name) const { return file_of(name).tensor(name); }
  // "model.safetensors" path or the index path: what errors name for a missing tensor.
  const std::string& description() const { return description_; }

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
  std::string description_;
};

// The safetensors spelling of a DType ("F32", "BF16", "F16", "I8", "I32"); LMSTACK_CHECKs
// that the dtype is storable (not block-quantized).
const char* safetensors_dtype_name(DType t);

// A planned file: what write_safetensors puts where. Tensors are placed by element size
// (largest first) then name, as the safetensors crate does, so each stays aligned; the
// header is padded with spaces so the data starts at a multiple of 8.
struct SafetensorsLayout {
  std::string header;                       // 8-byte length + JSON + padding
  std::map<std::string, uint64_t> offsets;  // tensor name -> absolute file offset
  uint64_t file_bytes = 0;
};
struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::kF32;
};
// Throws FormatError on duplicate names; `metadata` must be an object of strings (or null).
// Quantized specs are planned as U8 [rows, row_bytes] and get their metadata field added.
SafetensorsLayout plan_safetensors(const std::vector<TensorSpec>& specs, const Json& metadata);

// Writes the tensors atomically (core/file.h: temp file + rename). Tensors may be mapped or
// owned, of any storable dtype; the file holds one copy of all data in memory while writing.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const Json& metadata = Json::object());

}  // namespace lmstack::model
