// Load-time repacking of Q4_0 weights into DType::kQ4_0x16 (layout in quant_blocks.h): groups
// of 16 rows interleaved per 32-element block, so the decode GEMV (quant_gemv_q4_0x16.h) runs
// one row per 32-bit SIMD lane: 4 activation bytes broadcast, vpdpbusd over 16 rows at once,
// the 16 row scales loaded as one vector, 16 outputs stored as one vector with no horizontal
// sums. Why a new dtype rather than a flag: kernels dispatch on the dtype already, and a
// kQ4_0x16 tensor cannot be mistaken for row-contiguous Q4_0 by code that slices or writes rows.
// Prefill's int8 GEMM packs its panels from the groups (gemm_int8.h), dequantize_rows() reads
// rows back through q4_0x16_rows_to_q4_0 (quant.cc), and repacking is a permutation of bytes:
// no value changes.
#pragma once

#include <cstdint>

#include "lmstack/core/tensor.h"

namespace lmstack::kernels {

// Rows [row_begin, row_end) of a q4_0x16 matrix of n rows and k columns (`packed`) as plain
// Q4_0 rows into `plain` ((row_end - row_begin) * k / 32 * 18 bytes).
void q4_0x16_rows_to_q4_0(const uint8_t* packed, int64_t n, int64_t k, int64_t row_begin,
                          int64_t row_end, uint8_t* plain);

// The q4_0x16 layout of a Q4_0 matrix [n, k] (`plain`) into `packed` (the same byte count; the
// two must not overlap).
void repack_q4_0x16(const uint8_t* plain, int64_t n, int64_t k, uint8_t* packed);

// A 2-D Q4_0 tensor repacked into `dst`: a writable tensor of w's byte count, whose storage the
// result shares (so a caller may place many matrices in one huge-page arena). Returns `dst`
// viewed as q4_0x16 with w's shape.
Tensor repack_q4_0x16(const Tensor& w, const Tensor& dst);

}  // namespace lmstack::kernels
