// Element types. Plain types store one element per `block_bytes`; block-quantized types
// (GGUF layouts) store `block_size` elements in `block_bytes` bytes, so a row of n elements
// takes n / block_size * block_bytes bytes (n must be a multiple of block_size).
#pragma once

#include <cstdint>
#include <string_view>

namespace lmstack {

enum class DType : uint8_t {
  kF32 = 0,
  kBF16,
  kF16,
  kI8,
  kI32,
  kQ8_0,  // 32 int8 + one f16 scale (GGUF Q8_0)
  kQ4_0,  // 32 4-bit + one f16 scale (GGUF Q4_0)
  kQ4_K,  // 256-element super-block, 6-bit sub-scales (GGUF Q4_K)
  kQ6_K,  // 256-element super-block (GGUF Q6_K)
  // Group-wise asymmetric int4 (w ~= scale * (q - zero), q and zero in 0..15), for calibrated
  // quantization (AWQ/GPTQ-style). One group of g elements is 4 + g/2 bytes: f16 scale,
  // u8 zero point, u8 padding (0), then g/32 chunks of 16 bytes laid out as Q4_0's nibbles
  // (byte j of chunk c holds element 32c + j in its low nibble and 32c + j + 16 in its high).
  kInt4G32,   // "int4_g32": 20 bytes per 32 elements (5.0 bits per weight)
  kInt4G64,   // "int4_g64": 36 bytes per 64 (4.5)
  kInt4G128,  // "int4_g128": 68 bytes per 128 (4.25)
  // Q4_0 with rows interleaved in groups of 16 for the decode GEMV (layout in
  // kernels/quant_blocks.h). Made only at load time by kernels/quant_repack.h from a kQ4_0
  // tensor, never read from or written to a file; the same bytes as Q4_0 (18 per 32).
  kQ4_0x16,
  // Q4_K the same way, 16 rows per group of super-blocks (quant_blocks.h): Q4_K's 144 bytes
  // per 256 elements.
  kQ4_Kx16,
  // Q6_K the same way (quant_blocks.h): Q6_K's 210 bytes per 256 elements.
  kQ6_Kx16,
  kCount
};
inline constexpr int kNumDTypes = static_cast<int>(DType::kCount);

struct DTypeInfo {
  std::string_view name;
  int block_size;   // elements per block (1 for plain types)
  int block_bytes;  // bytes per block
  bool is_float;    // element is a float type (f32/bf16/f16)
};

const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
inline bool is_quantized(DType t) { return dtype_info(t).block_size > 1; }
// The load-time row-interleaved layouts (kQ4_0x16, kQ4_Kx16, kQ6_Kx16), and the row type each
// permutes: their tensors hold that type's bytes, in groups of 16 rows (kernels/quant_repack.h).
inline bool is_row_interleaved(DType t) {
  return t == DType::kQ4_0x16 || t == DType::kQ4_Kx16 || t == DType::kQ6_Kx16;
}
inline DType row_interleaved_base(DType t) {
  switch (t) {
    case DType::kQ4_0x16:
      return DType::kQ4_0;
    case DType::kQ4_Kx16:
      return DType::kQ4_K;
    case DType::kQ6_Kx16:
      return DType::kQ6_K;
    default:
      return t;
  }
}
// Bytes for n elements; n must be a multiple of the block size (checked).
int64_t dtype_bytes(DType t, int64_t n);
// Parses "f32", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "int4_g128", ... (case-insensitive;
// also "float32", "bfloat16", "float16"); throws ConfigError listing the known names.
DType parse_dtype(std::string_view name);

}  // namespace lmstack
