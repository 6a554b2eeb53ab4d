// Safetensors reader, shard sets and writer (see safetensors.h). The checks mirror the
// safetensors crate's `Metadata::validate` (offsets in range, sizes matching shape x dtype),
// except that gaps between tensors are tolerated; overlaps are not.
#include "lmstack/model/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/ranges.h>

#include "lmstack/core/file.h"

namespace lmstack::model {
namespace {

struct StDType {
  const char* name;
  int bytes;
  bool has_dtype;
  DType dtype;
};

// Every dtype the safetensors crate defines; only the first five map to lmstack DTypes.
constexpr std::array<StDType, 15> kStDTypes = {{
    {"F32", 4, true, DType::kF32},
    {"BF16", 2, true, DType::kBF16},
    {"F16", 2, true, DType::kF16},
    {"I8", 1, true, DType::kI8},
    {"I32", 4, true, DType::kI32},
    {"F64", 8, false, DType::kF32},
    {"I64", 8, false, DType::kF32},
    {"U64", 8, false, DType::kF32},
    {"U32", 4, false, DType::kF32},
    {"I16", 2, false, DType::kF32},
    {"U16", 2, false, DType::kF32},
    {"U8", 1, false, DType::kF32},
    {"BOOL", 1, false, DType::kF32},
    {"F8_E4M3", 1, false, DType::kF32},
    {"F8_E5M2", 1, false, DType::kF32},
}};

const StDType* find_st_dtype(const std::string& name) {
  for (const StDType& d : kStDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void write_u64_le(uint64_t v, char* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// One header entry, validated on its own (range checks against the data size follow).
SafetensorsEntry parse_entry(const std::string& name, const Json& v, const std::string& src) {
  if (!v.is_object())
    throw_error<FormatError>("{}: tensor '{}': entry is not an object", src, name);
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!v.contains(field))
      throw_error<FormatError>("{}: tensor '{}': missing field '{}'", src, name, field);
  SafetensorsEntry e;
  e.name = name;
  if (!v["dtype"].is_string())
    throw_error<FormatError>("{}: tensor '{}': field 'dtype' is not a string", src, name);
  e.dtype_name = v["dtype"].get<std::string>();
  const StDType* dt = find_st_dtype(e.dtype_name);
  if (dt == nullptr)
    throw_error<FormatError>("{}: tensor '{}': unknown dtype '{}'", src, name, e.dtype_name);
  e.has_dtype = dt->has_dtype;
  e.dtype = dt->dtype;
  if (!v["shape"].is_array())
    throw_error<FormatError>("{}: tensor '{}': field 'shape' is not a list", src, name);
  uint64_t numel = 1;
  for (const Json& d : v["shape"]) {
    if (!d.is_number_unsigned())
      throw_error<FormatError>("{}: tensor '{}': shape holds {} (need non-negative integers)", src,
                               name, d.dump());
    const uint64_t n = d.get<uint64_t>();
    if (n != 0 && numel > (uint64_t{1} << 56) / n)  // keeps numel * 8 bytes far from 2^64
      throw_error<FormatError>("{}: tensor '{}': shape {} overflows", src, name, v["shape"].dump());
    numel *= n;
    e.shape.push_back(static_cast<int64_t>(n));
  }
  const Json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    throw_error<FormatError>("{}: tensor '{}': data_offsets must be two non-negative integers", src,
                             name);
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.end < e.begin)
    throw_error<FormatError>("{}: tensor '{}': data_offsets [{}, {}) end before they begin", src,
                             name, e.begin, e.end);
  const uint64_t need = numel * static_cast<uint64_t>(dt->bytes);
  if (e.end - e.begin != need)
    throw_error<FormatError>(
        "{}: tensor '{}': data_offsets span {} bytes but shape {} of {} needs {} bytes", src, name,
        e.end - e.begin, v["shape"].dump(), e.dtype_name, need);
  return e;
}

void check_ranges(const std::map<std::string, SafetensorsEntry>& entries, uint64_t data_bytes,
                  const std::string& src) {
  std::vector<const SafetensorsEntry*> order;
  for (const auto& [name, e] : entries) {
    if (e.end > data_bytes)
      throw_error<FormatError>(
          "{}: tensor '{}': data_offsets [{}, {}) run past the data section of {} bytes "
          "(file truncated?)",
          src, name, e.begin, e.end, data_bytes);
    if (e.end > e.begin) order.push_back(&e);
  }
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->begin < order[i - 1]->end)
      throw_error<FormatError>("{}: tensor '{}' [{}, {}) overlaps tensor '{}' [{}, {})", src,
                               order[i]->name, order[i]->begin, order[i]->end, order[i - 1]->name,
                               order[i - 1]->begin, order[i - 1]->end);
}

// The byte alignment a quantized tensor needs: its blocks' f16/f32 fields (2 or 4 bytes).
size_t quantized_alignment(DType t) { return dtype_info(t).block_bytes % 4 == 0 ? 4 : 2; }

// A block-quantized tensor is stored as U8 [rows, row_bytes] and named in the metadata as
// "lmstack.dtype.<tensor>": "<dtype>"; this turns such entries into their logical [rows, K]
// tensors of that dtype. Throws FormatError naming the file, key or tensor and the value.
void resolve_quantized(std::map<std::string, SafetensorsEntry>& entries, const Json& meta,
                       const std::string& src) {
  const std::string prefix = kQuantizedDTypeKeyPrefix;
  for (const auto& [key, value] : meta.items()) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string name = key.substr(prefix.size());
    auto it = entries.find(name);
    if (it == entries.end())
      throw_error<FormatError>("{}: '__metadata__' field '{}' names no tensor", src, key);
    SafetensorsEntry& e = it->second;
    const std::string dtype = value.get<std::string>();
    DType t = DType::kF32;
    try {
      t = parse_dtype(dtype);
    } catch (const ConfigError& err) {
      throw_error<FormatError>("{}: '__metadata__' field '{}': {}", src, key, err.what());
    }
    const DTypeInfo& info = dtype_info(t);
    if (!is_quantized(t))
      throw_error<FormatError>("{}: '__metadata__' field '{}' = '{}' is not a quantized dtype", src,
                               key, dtype);
    if (e.dtype_name != "U8" || e.shape.size() != 2 || e.shape[1] % info.block_bytes != 0)
      throw_error<FormatError>(
          "{}: tensor '{}' ({}, shape [{}]) cannot hold {}: it must be U8 [rows, row_bytes] with "
          "row_bytes a multiple of {} bytes",
          src, name, e.dtype_name, fmt::join(e.shape, ", "), dtype, info.block_bytes);
    e.shape[1] = e.shape[1] / info.block_bytes * info.block_size;
    e.has_dtype = true;
    e.dtype = t;
  }
}

Json parse_metadata(const Json& m, const std::string& src) {
  if (!m.is_object()) throw_error<FormatError>("{}: '__metadata__' is not an object", src);
  for (const auto& [k, v] : m.items())
    if (!v.is_string())
      throw_error<FormatError>("{}: '__metadata__' field '{}' is not a string", src, k);
  return m;
}

}  // namespace

std::map<std::string, SafetensorsEntry> parse_safetensors_header(const uint8_t* file,
                                                                 size_t file_bytes,
                                                                 const std::string& source,
                                                                 Json* metadata,
                                                                 size_t* data_offset) {
  if (file_bytes < 8)
    throw_error<FormatError>(
        "{}: {} bytes is too short for a safetensors file (8-byte header "
        "length missing)",
        source, file_bytes);
  const uint64_t n = read_u64_le(file);
  if (n > file_bytes - 8)
    throw_error<FormatError>(
        "{}: header length {} exceeds the {} bytes after it (truncated or "
        "not a safetensors file)",
        source, n, file_bytes - 8);
  const std::string text(reinterpret_cast<const char*>(file) + 8, static_cast<size_t>(n));
  const Json header = parse_json(text, source + " header");
  if (!header.is_object()) throw_error<FormatError>("{}: header is not a JSON object", source);
  std::map<std::string, SafetensorsEntry> entries;
  Json meta = Json::object();
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__")
      meta = parse_metadata(v, source);
    else
      entries.emplace(name, parse_entry(name, v, source));
  }
  check_ranges(entries, file_bytes - 8 - n, source);
  resolve_quantized(entries, meta, source);
  if (metadata) *metadata = std::move(meta);
  if (data_offset) *data_offset = static_cast<size_t>(8 + n);
  return entries;
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_shared<const MappedFile>(path, MemoryCategory::kWeights)) {
  entries_ =
      parse_safetensors_header(file_->data(), file_->size(), path, &metadata_, &data_offset_);
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw_error<FormatError>("{}: no tensor '{}'", path(), name);
  return it->second;
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  if (!e.has_dtype)
    throw_error<FormatError>(
        "{}: tensor '{}': dtype {} is not supported by lmstack "
        "(F32, BF16, F16, I8, I32)",
        path(), name, e.dtype_name);
  if (e.shape.size() > static_cast<size_t>(kMaxDims))
    throw_error<FormatError>("{}: tensor '{}': rank {} exceeds {}", path(), name, e.shape.size(),
                             kMaxDims);
  const size_t offset = data_offset_ + static_cast<size_t>(e.begin);
  Tensor t = Tensor::from_mapped(file_, offset, Shape(e.shape), e.dtype);
  // Kernels read elements through typed pointers: a misaligned view (possible in files from
  // other writers) gets one aligned copy.
  const size_t align = is_quantized(e.dtype) ? quantized_alignment(e.dtype)
                                             : static_cast<size_t>(dtype_info(e.dtype).block_bytes);
  if (reinterpret_cast<uintptr_t>(file_->data() + offset) % align != 0)
    t = t.clone(MemoryCategory::kWeights);
  return t;
}

SafetensorsSet SafetensorsSet::open_file(const std::string& path) {
  SafetensorsSet s;
  s.description_ = path;
  s.files_.push_back(std::make_shared<SafetensorsFile>(path));
  for (const auto& [name, e] : s.files_[0]->entries()) s.where_[name] = 0;
  return s;
}

SafetensorsSet SafetensorsSet::open_index(const std::string& index_path) {
  const Json index = read_json_file(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw_error<FormatError>("{}: missing object field 'weight_map'", index_path);
  const std::string dir = index_path.substr(0, index_path.find_last_of('/') + 1);
  SafetensorsSet s;
  s.description_ = index_path;
  std::map<std::string, size_t> shard_ids;
  for (const auto& [name, v] : index["weight_map"].items()) {
    if (!v.is_string())
      throw_error<FormatError>("{}: weight_map['{}'] is not a file name", index_path, name);
    const std::string shard = v.get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "..")
      throw_error<FormatError>("{}: weight_map['{}'] = '{}' is not a file in this directory",
                               index_path, name, shard);
    auto [it, fresh] = shard_ids.emplace(shard, s.files_.size());
    if (fresh) {
      const std::string shard_path = dir + shard;
      if (!file_exists(shard_path))
        throw_error<FormatError>("{}: shard '{}' (holding '{}') does not exist", index_path,
                                 shard_path, name);
      s.files_.push_back(std::make_shared<SafetensorsFile>(shard_path));
    }
    if (!s.files_[it->second]->contains(name))
      throw_error<FormatError>("{}: the index puts tensor '{}' in {}, which lacks it", index_path,
                               name, s.files_[it->second]->path());
    s.where_[name] = it->second;
  }
  return s;
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> out;
  for (const auto& [name, i] : where_) out.push_back(name);
  return out;
}

const SafetensorsFile& SafetensorsSet::file_of(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw_error<FormatError>("{}: missing tensor '{}'", description_, name);
  return *files_[it->second];
}

const char* safetensors_dtype_name(DType t) {
  for (const StDType& d : kStDTypes)
    if (d.has_dtype && d.dtype == t) return d.name;
  LMSTACK_CHECK(false, "dtype {} cannot be stored in safetensors", dtype_name(t));
  return "";
}

namespace {
// The shape written to the header: the logical one, or [rows, row_bytes] for a quantized
// tensor (rows = every dimension but the last).
std::vector<int64_t> stored_shape(const TensorSpec& s) {
  if (!is_quantized(s.dtype)) return s.shape.to_vector();
  LMSTACK_CHECK(s.shape.rank() >= 1, "quantized tensor '{}' of rank 0", s.name);
  const int64_t k = s.shape[s.shape.rank() - 1];
  return {s.shape.numel() / std::max<int64_t>(k, 1), dtype_bytes(s.dtype, k)};
}
}  // namespace

SafetensorsLayout plan_safetensors(const std::vector<TensorSpec>& specs, const Json& metadata) {
  std::vector<const TensorSpec*> order;
  std::set<std::string> seen;
  for (const TensorSpec& s : specs) {
    if (s.name == "__metadata__" || !seen.insert(s.name).second)
      throw_error<FormatError>("safetensors writer: duplicate or reserved tensor name '{}'",
                               s.name);
    order.push_back(&s);
  }
  // Quantized tensors sort with the plain types of their alignment (q4_K with f32, q8_0 with
  // bf16); every tensor's size is a multiple of its class's alignment, so each start is aligned.
  auto elem = [](const TensorSpec* s) {
    return is_quantized(s->dtype) ? static_cast<int>(quantized_alignment(s->dtype))
                                  : dtype_info(s->dtype).block_bytes;
  };
  std::sort(order.begin(), order.end(), [&](const TensorSpec* a, const TensorSpec* b) {
    return elem(a) != elem(b) ? elem(a) > elem(b) : a->name < b->name;
  });
  Json header = Json::object();
  Json meta = metadata.is_null() ? Json::object() : parse_metadata(metadata, "safetensors writer");
  for (const TensorSpec* s : order)
    if (is_quantized(s->dtype))
      meta[kQuantizedDTypeKeyPrefix + s->name] = std::string(dtype_name(s->dtype));
  if (!meta.empty()) header["__metadata__"] = meta;
  std::map<std::string, uint64_t> relative;
  uint64_t pos = 0;
  for (const TensorSpec* s : order) {
    const uint64_t bytes = static_cast<uint64_t>(dtype_bytes(s->dtype, s->shape.numel()));
    header[s->name] = {{"dtype", is_quantized(s->dtype) ? "U8" : safetensors_dtype_name(s->dtype)},
                       {"shape", stored_shape(*s)},
                       {"data_offsets", {pos, pos + bytes}}};
    relative[s->name] = pos;
    pos += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  SafetensorsLayout layout;
  layout.header.resize(8);
  write_u64_le(json.size(), layout.header.data());
  layout.header += json;
  for (const auto& [name, rel] : relative) layout.offsets[name] = layout.header.size() + rel;
  layout.file_bytes = layout.header.size() + pos;
  return layout;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const Json& metadata) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : tensors) {
    LMSTACK_CHECK(t.defined(), "write_safetensors: tensor '{}' is undefined", name);
    specs.push_back({name, t.shape(), t.dtype()});
  }
  const SafetensorsLayout layout = plan_safetensors(specs, metadata);
  std::string bytes(static_cast<size_t>(layout.file_bytes), '\0');
  std::memcpy(bytes.data(), layout.header.data(), layout.header.size());
  for (const auto& [name, t] : tensors)
    if (t.nbytes() > 0)
      std::memcpy(bytes.data() + layout.offsets.at(name), t.raw_data(),
                  static_cast<size_t>(t.nbytes()));
  write_file_atomic(path, bytes);
}

}  // namespace lmstack::model
