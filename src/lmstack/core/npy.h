// NumPy .npy files (format version 1.0, https://numpy.org/doc/stable/reference/generated/
// numpy.lib.format.html) for float32 and int32 arrays in C order: `generate --dump-logits`
// writes them, and tests read PyTorch/NumPy golden data from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lmstack {

struct NpyArray {
  std::vector<int64_t> shape;
  std::string dtype;         // "<f4" or "<i4"
  std::vector<float> f32;    // when dtype == "<f4"
  std::vector<int32_t> i32;  // when dtype == "<i4"
};

void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<float>& data);
void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<int32_t>& data);
// Throws FormatError naming the file for a bad magic, an unsupported dtype or order, or a
// size that disagrees with the shape.
NpyArray read_npy(const std::string& path);

}  // namespace lmstack
