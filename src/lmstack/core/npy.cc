// .npy reader/writer (see npy.h): magic "\x93NUMPY", version 1.0, little-endian u16 header
// length, a Python dict literal padded with spaces to a multiple of 64 bytes, then raw data.
#include "lmstack/core/npy.h"

#include <charconv>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"

namespace lmstack {
namespace {

std::string header_for(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 1);  // "(2, 3)" but "(2,)"
  if (shape.size() > 1) dims.pop_back();
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::string h = "\x93NUMPY";
  h.push_back(1);
  h.push_back(0);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  h.push_back(static_cast<char>(len & 0xff));
  h.push_back(static_cast<char>(len >> 8));
  return h + dict;
}

template <class T>
void write_any(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
               const std::vector<T>& data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  LMSTACK_CHECK(n == static_cast<int64_t>(data.size()), "npy shape has {} elements, data {}", n,
                data.size());
  std::string out = header_for(descr, shape);
  out.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(T));
  write_file_atomic(path, out);
}

// The text of `key`'s value in the header dict: inside (...) or '...', else up to , or }.
// Every search is checked: a header cut after the key read past the string (fuzz finding).
std::string dict_value(const std::string& dict, const std::string& key, const std::string& path) {
  const size_t k = dict.find("'" + key + "':");
  if (k == std::string::npos) throw_error<FormatError>("{}: npy header lacks '{}'", path, key);
  const size_t v = dict.find_first_not_of(' ', k + key.size() + 3);
  if (v == std::string::npos)
    throw_error<FormatError>("{}: npy header: '{}' has no value", path, key);
  const char close = dict[v] == '(' ? ')' : dict[v] == '\'' ? '\'' : '\0';
  if (close != '\0') {
    const size_t end = dict.find(close, v + 1);
    if (end == std::string::npos)
      throw_error<FormatError>("{}: npy header: the value of '{}' is not closed", path, key);
    return dict.substr(v + 1, end - v - 1);
  }
  const size_t end = dict.find_first_of(",}", v);
  return dict.substr(v, end == std::string::npos ? std::string::npos : end - v);
}

// The dims of a shape tuple's text ("2, 3" or "4," or ""); FormatError for anything but
// non-negative integers, or an element count past 2^60.
std::vector<int64_t> parse_shape(const std::string& dims, const std::string& path, int64_t& n) {
  std::vector<int64_t> shape;
  n = 1;
  size_t pos = 0;
  while (pos <= dims.size()) {
    size_t comma = dims.find(',', pos);
    if (comma == std::string::npos) comma = dims.size();
    const size_t b = dims.find_first_not_of(' ', pos);
    const size_t e = dims.find_last_not_of(' ', comma == 0 ? 0 : comma - 1);
    if (b < comma && e != std::string::npos && e >= b) {
      int64_t d = -1;
      const auto r = std::from_chars(dims.data() + b, dims.data() + e + 1, d);
      if (r.ec != std::errc() || r.ptr != dims.data() + e + 1 || d < 0 ||
          __builtin_mul_overflow(n, d, &n) || n > (int64_t{1} << 60))
        throw_error<FormatError>("{}: npy shape ({}) is not a tuple of sizes", path, dims);
      shape.push_back(d);
    }
    pos = comma + 1;
  }
  return shape;
}

}  // namespace

void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<float>& data) {
  write_any(path, "<f4", shape, data);
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<int32_t>& data) {
  write_any(path, "<i4", shape, data);
}

NpyArray read_npy(const std::string& path) {
  const std::string bytes = read_file(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw_error<FormatError>("{}: not a .npy file (bad magic)", path);
  if (bytes[6] != 1)
    throw_error<FormatError>("{}: npy version {} unsupported", path, int(bytes[6]));
  const size_t hlen =
      static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  if (10 + hlen > bytes.size()) throw_error<FormatError>("{}: truncated npy header", path);
  const std::string dict = bytes.substr(10, hlen);
  NpyArray a;
  a.dtype = dict_value(dict, "descr", path);
  if (dict_value(dict, "fortran_order", path) != "False")
    throw_error<FormatError>("{}: Fortran-order arrays unsupported", path);
  int64_t n = 1;
  a.shape = parse_shape(dict_value(dict, "shape", path), path, n);
  const size_t data_bytes = bytes.size() - 10 - hlen;
  const char* data = bytes.data() + 10 + hlen;
  if (a.dtype != "<f4" && a.dtype != "<i4")
    throw_error<FormatError>("{}: npy dtype '{}' unsupported (want <f4 or <i4)", path, a.dtype);
  if (data_bytes != static_cast<size_t>(n) * 4)
    throw_error<FormatError>("{}: npy data has {} bytes, shape needs {}", path, data_bytes, n * 4);
  if (data_bytes == 0) return a;  // a zero dim: memcpy to an empty vector's null data is UB
  if (a.dtype == "<f4") {
    a.f32.resize(static_cast<size_t>(n));
    std::memcpy(a.f32.data(), data, data_bytes);
  } else {
    a.i32.resize(static_cast<size_t>(n));
    std::memcpy(a.i32.data(), data, data_bytes);
  }
  return a;
}

}  // namespace lmstack
