// GGUF v3 reader and writer (see gguf.h). Every length and count read from the file is checked
// against the bytes left before anything is allocated for it, so a corrupt file fails with a
// FormatError naming the offset instead of a huge allocation. Type numbers and block sizes follow
// ggml.h / gguf-py's GGML_QUANT_SIZES.
#include "lmstack/core/gguf.h"

#include <array>
#include <cstring>
#include <limits>

#include "lmstack/core/file.h"

namespace lmstack {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kVersion = 3;

constexpr std::array<GgmlTypeInfo, 31> kGgmlTypes = {{
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 40},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},
}};

constexpr std::array<std::pair<uint32_t, DType>, 7> kGgmlDTypes = {{
    {0, DType::kF32},
    {1, DType::kF16},
    {30, DType::kBF16},
    {8, DType::kQ8_0},
    {2, DType::kQ4_0},
    {12, DType::kQ4_K},
    {14, DType::kQ6_K},
}};

// Bounds-checked little-endian cursor over the mapped file.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}
  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  template <class T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(std::string_view what) {
    const uint64_t n = read<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  void skip(uint64_t n, std::string_view what) {
    need(n, what);
    pos_ += n;
  }
  void need(uint64_t n, std::string_view what) const {
    if (n > left())
      throw_error<FormatError>("{}: truncated at offset {}: {} needs {} bytes, {} left", path_,
                               pos_, what, n, left());
  }
  // FormatError unless `count` items of at least `min_bytes` each can fit in what is left.
  void check_count(uint64_t count, uint64_t min_bytes, std::string_view what) const {
    if (count > left() / min_bytes)
      throw_error<FormatError>("{}: {} count {} at offset {} cannot fit in the {} bytes left",
                               path_, what, count, pos_, left());
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

// Bytes of one scalar of a fixed-size type; 0 for string/array, -1 for an unknown type.
int scalar_bytes(uint32_t type) {
  static constexpr int kBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return type < std::size(kBytes) ? kBytes[type] : -1;
}

GgufValueType checked_type(uint32_t raw, const std::string& path, const std::string& key) {
  if (scalar_bytes(raw) < 0)
    throw_error<FormatError>("{}: metadata key '{}': unknown value type {}", path, key, raw);
  return static_cast<GgufValueType>(raw);
}

// One fixed-size scalar into `integer` or `number`.
void read_scalar(Cursor& c, GgufValueType t, const std::string& key, int64_t& integer,
                 double& number) {
  using T = GgufValueType;
  switch (t) {
    case T::kU8:
      integer = c.read<uint8_t>(key);
      break;
    case T::kI8:
      integer = c.read<int8_t>(key);
      break;
    case T::kU16:
      integer = c.read<uint16_t>(key);
      break;
    case T::kI16:
      integer = c.read<int16_t>(key);
      break;
    case T::kU32:
      integer = c.read<uint32_t>(key);
      break;
    case T::kI32:
      integer = c.read<int32_t>(key);
      break;
    case T::kBool:
      integer = c.read<uint8_t>(key) != 0;
      break;
    case T::kU64:
      integer = static_cast<int64_t>(c.read<uint64_t>(key));
      break;
    case T::kI64:
      integer = c.read<int64_t>(key);
      break;
    case T::kF32:
      number = c.read<float>(key);
      break;
    case T::kF64:
      number = c.read<double>(key);
      break;
    default:
      LMSTACK_CHECK(false, "read_scalar of type {}", static_cast<uint32_t>(t));
  }
}

bool is_float_type(GgufValueType t) { return t == GgufValueType::kF32 || t == GgufValueType::kF64; }

// Arrays of arrays deeper than this are refused: the walk below recurses once per level, and
// a file nested 400,000 deep overflowed the stack (issue 13). No llama.cpp key nests at all.
constexpr int kMaxArrayDepth = 16;

void read_array(Cursor& c, const std::string& path, const std::string& key, GgufValue& v,
                int depth = 1) {
  if (depth > kMaxArrayDepth)
    throw_error<FormatError>("{}: metadata key '{}': arrays nest deeper than {} levels (offset {})",
                             path, key, kMaxArrayDepth, c.pos());
  v.array_type = checked_type(c.read<uint32_t>(key), path, key);
  v.array_size = c.read<uint64_t>(key);
  const GgufValueType et = v.array_type;
  if (et == GgufValueType::kArray) {  // nested: walk past it, keep nothing
    c.check_count(v.array_size, 12, key);
    for (uint64_t i = 0; i < v.array_size; ++i) {
      GgufValue inner;
      read_array(c, path, key, inner, depth + 1);
    }
    return;
  }
  const int width = scalar_bytes(static_cast<uint32_t>(et));
  c.check_count(v.array_size, et == GgufValueType::kString ? 8 : width, key);
  const size_t n = static_cast<size_t>(v.array_size);
  if (et == GgufValueType::kString) {
    v.strings.reserve(n);
    for (size_t i = 0; i < n; ++i) v.strings.push_back(c.read_string(key));
  } else if (is_float_type(et)) {
    v.numbers.resize(n);
    int64_t unused = 0;
    for (size_t i = 0; i < n; ++i) read_scalar(c, et, key, unused, v.numbers[i]);
  } else {
    v.integers.resize(n);
    double unused = 0;
    for (size_t i = 0; i < n; ++i) read_scalar(c, et, key, v.integers[i], unused);
  }
}

GgufValue read_value(Cursor& c, const std::string& path, const std::string& key) {
  GgufValue v;
  v.type = checked_type(c.read<uint32_t>(key), path, key);
  if (v.type == GgufValueType::kString)
    v.text = c.read_string(key);
  else if (v.type == GgufValueType::kArray)
    read_array(c, path, key, v);
  else
    read_scalar(c, v.type, key, v.integer, v.number);
  return v;
}

std::string type_mismatch(const std::string& path, const std::string& key, const GgufValue& v,
                          std::string_view expected) {
  std::string got(gguf_value_type_name(v.type));
  if (v.type == GgufValueType::kArray)
    got = fmt::format("array of {}", gguf_value_type_name(v.array_type));
  return fmt::format("{}: metadata key '{}' is {}, expected {}", path, key, got, expected);
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType t) {
  static constexpr std::string_view kNames[] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                "i32", "f32", "bool", "string", "array",
                                                "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

GgufValue GgufValue::u32(uint32_t v) {
  GgufValue g;
  g.type = GgufValueType::kU32;
  g.integer = v;
  return g;
}
GgufValue GgufValue::i32(int32_t v) {
  GgufValue g;
  g.type = GgufValueType::kI32;
  g.integer = v;
  return g;
}
GgufValue GgufValue::f32(float v) {
  GgufValue g;
  g.type = GgufValueType::kF32;
  g.number = v;
  return g;
}
GgufValue GgufValue::boolean(bool v) {
  GgufValue g;
  g.type = GgufValueType::kBool;
  g.integer = v ? 1 : 0;
  return g;
}
GgufValue GgufValue::string(std::string v) {
  GgufValue g;
  g.type = GgufValueType::kString;
  g.text = std::move(v);
  return g;
}
GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue g;
  g.type = GgufValueType::kArray;
  g.array_type = GgufValueType::kString;
  g.array_size = v.size();
  g.strings = std::move(v);
  return g;
}
GgufValue GgufValue::f32_array(std::vector<double> v) {
  GgufValue g;
  g.type = GgufValueType::kArray;
  g.array_type = GgufValueType::kF32;
  g.array_size = v.size();
  g.numbers = std::move(v);
  return g;
}
GgufValue GgufValue::i32_array(std::vector<int64_t> v) {
  GgufValue g;
  g.type = GgufValueType::kArray;
  g.array_type = GgufValueType::kI32;
  g.array_size = v.size();
  g.integers = std::move(v);
  return g;
}

bool GgufValue::is_integer() const {
  const int w = scalar_bytes(static_cast<uint32_t>(type));
  return w > 0 && type != GgufValueType::kBool && !is_float_type(type);
}

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

std::optional<DType> dtype_of_ggml(uint32_t id) {
  for (const auto& [g, d] : kGgmlDTypes)
    if (g == id) return d;
  return std::nullopt;
}

uint32_t ggml_type_of(DType t) {
  for (const auto& [g, d] : kGgmlDTypes)
    if (d == t) return g;
  LMSTACK_CHECK(false, "dtype {} has no ggml type", dtype_name(t));
}

Shape GgufTensorInfo::shape() const { return Shape(std::vector<int64_t>(ne.rbegin(), ne.rend())); }

GgufFile::GgufFile(const std::string& path)
    : file_(std::make_shared<const MappedFile>(path, MemoryCategory::kWeights)) {
  parse();
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufValue& GgufFile::get(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) throw_error<FormatError>("{}: metadata key '{}' is missing", path(), key);
  return *v;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = get(key);
  if (!v.is_integer()) throw FormatError(type_mismatch(path(), key, v, "an integer"));
  return v.integer;
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = get(key);
  if (is_float_type(v.type)) return v.number;
  if (v.is_integer()) return static_cast<double>(v.integer);
  throw FormatError(type_mismatch(path(), key, v, "a number"));
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kBool) throw FormatError(type_mismatch(path(), key, v, "bool"));
  return v.integer != 0;
}

const std::string& GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kString) throw FormatError(type_mismatch(path(), key, v, "string"));
  return v.text;
}

const std::vector<std::string>& GgufFile::get_strings(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray || v.array_type != GgufValueType::kString)
    throw FormatError(type_mismatch(path(), key, v, "array of string"));
  return v.strings;
}

const std::vector<double>& GgufFile::get_floats(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray || !is_float_type(v.array_type))
    throw FormatError(type_mismatch(path(), key, v, "array of f32"));
  return v.numbers;
}

const std::vector<int64_t>& GgufFile::get_ints(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray || is_float_type(v.array_type) ||
      v.array_type == GgufValueType::kString || v.array_type == GgufValueType::kArray)
    throw FormatError(type_mismatch(path(), key, v, "array of integers"));
  return v.integers;
}

int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double GgufFile::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

const GgufTensorInfo& GgufFile::tensor_info(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) throw_error<FormatError>("{}: no tensor '{}'", path(), name);
  return tensors_[it->second];
}

Tensor GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo& t = tensor_info(name);
  const std::optional<DType> dtype = dtype_of_ggml(t.ggml_type);
  if (!dtype)
    throw_error<FormatError>(
        "{}: tensor '{}' has ggml type {}, which lmstack cannot compute with (supported: F32, "
        "F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)",
        path(), name, ggml_type_info(t.ggml_type)->name);
  return Tensor::from_mapped(file_, static_cast<size_t>(data_offset_ + t.offset), t.shape(),
                             *dtype);
}

namespace {

// Reads one tensor info and checks its dims and type (offsets are checked once all are known).
GgufTensorInfo read_tensor_info(Cursor& c, const std::string& path, uint64_t index) {
  GgufTensorInfo t;
  t.name = c.read_string(fmt::format("tensor {} name", index));
  const std::string what = fmt::format("tensor '{}'", t.name);
  const uint32_t n_dims = c.read<uint32_t>(what);
  if (n_dims == 0 || n_dims > static_cast<uint32_t>(kMaxDims))
    throw_error<FormatError>("{}: {} has {} dims (1 to {} supported)", path, what, n_dims,
                             kMaxDims);
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t n = c.read<uint64_t>(what);
    if (n == 0 || n > (uint64_t{1} << 40) || numel > std::numeric_limits<int64_t>::max() / n)
      throw_error<FormatError>("{}: {} has dim {} of size {}", path, what, d, n);
    numel *= n;
    t.ne.push_back(static_cast<int64_t>(n));
  }
  t.ggml_type = c.read<uint32_t>(what);
  const GgmlTypeInfo* info = ggml_type_info(t.ggml_type);
  if (info == nullptr)
    throw_error<FormatError>("{}: {} has unknown ggml type {}", path, what, t.ggml_type);
  if (t.ne[0] % info->block_size != 0)
    throw_error<FormatError>("{}: {} of type {} has ne[0] = {}, not a multiple of its block of {}",
                             path, what, info->name, t.ne[0], info->block_size);
  t.bytes =
      numel / static_cast<uint64_t>(info->block_size) * static_cast<uint64_t>(info->block_bytes);
  t.offset = c.read<uint64_t>(what);
  return t;
}

}  // namespace

void GgufFile::parse() {
  const std::string& p = path();
  Cursor c(file_->data(), file_->size(), p);
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic)
    throw_error<FormatError>("{}: not a GGUF file (bad magic 0x{:08x})", p, magic);
  const uint32_t version = c.read<uint32_t>("version");
  if (version != kVersion)
    throw_error<FormatError>("{}: GGUF version {} is not supported (only 3)", p, version);
  const uint64_t num_tensors = c.read<uint64_t>("tensor count");
  const uint64_t num_kv = c.read<uint64_t>("metadata key count");
  c.check_count(num_kv, 8 + 4 + 1, "metadata key");
  c.check_count(num_tensors, 8 + 4 + 8 + 4 + 8, "tensor");
  for (uint64_t i = 0; i < num_kv; ++i) {
    std::string key = c.read_string(fmt::format("metadata key {}", i));
    if (key_index_.count(key)) throw_error<FormatError>("{}: duplicate metadata key '{}'", p, key);
    GgufValue v = read_value(c, p, key);
    key_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufValueType::kU32 || a->integer == 0 || (a->integer & (a->integer - 1)) != 0)
      throw_error<FormatError>("{}: general.alignment must be a power-of-two u32 (got {} {})", p,
                               gguf_value_type_name(a->type), a->integer);
    alignment_ = static_cast<uint32_t>(a->integer);
  }
  for (uint64_t i = 0; i < num_tensors; ++i) {
    GgufTensorInfo t = read_tensor_info(c, p, i);
    if (tensor_index_.count(t.name))
      throw_error<FormatError>("{}: duplicate tensor '{}'", p, t.name);
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t data_bytes = file_->size() >= data_offset_ ? file_->size() - data_offset_ : 0;
  std::map<uint64_t, const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : tensors_) {
    if (t.offset % alignment_ != 0)
      throw_error<FormatError>("{}: tensor '{}' offset {} is not a multiple of the alignment {}", p,
                               t.name, t.offset, alignment_);
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      throw_error<FormatError>(
          "{}: tensor '{}' ({} bytes at data offset {}) runs past the end of the file ({} data "
          "bytes)",
          p, t.name, t.bytes, t.offset, data_bytes);
    const auto [it, inserted] = by_offset.emplace(t.offset, &t);
    if (!inserted)
      throw_error<FormatError>("{}: tensors '{}' and '{}' overlap (same data offset {})", p,
                               it->second->name, t.name, t.offset);
  }
  uint64_t end = 0;
  const GgufTensorInfo* prev = nullptr;
  for (const auto& [offset, t] : by_offset) {
    if (prev != nullptr && offset < end)
      throw_error<FormatError>("{}: tensors '{}' and '{}' overlap", p, prev->name, t->name);
    end = offset + t->bytes;
    prev = t;
  }
}

}  // namespace lmstack
