// Load-time repacking of Q4_0, Q4_K and Q6_K weights into DType::kQ4_0x16 / kQ4_Kx16 /
// kQ6_Kx16 (layouts in quant_blocks.h): groups of 16 rows interleaved per block (super-block), so
// the decode GEMV (quant_gemv_x16.h) runs one row per 32-bit SIMD lane: 4 activation bytes
// broadcast, vpdpbusd over 16 rows at once, the 16 rows' scales loaded (and for Q4_K decoded) as
// one vector, 16 outputs stored as one vector with no horizontal sums. Why a new dtype rather than
// a flag: kernels dispatch on the dtype already, and an interleaved tensor cannot be mistaken
// for row-contiguous rows by code that slices or writes rows. Prefill's int8 GEMM packs its
// panels from the groups (gemm_int8.h), dequantize_rows() reads rows back through
// x16_rows_to_plain (quant.cc), and repacking is a permutation of bytes: no value changes.
#pragma once

#include <cstdint>

#include "lmstack/core/tensor.h"

namespace lmstack::kernels {

// The interleaved dtype for row type t (kQ4_0 -> kQ4_0x16, kQ4_K -> kQ4_Kx16, kQ6_K ->
// kQ6_Kx16), or kCount for types without one.
DType x16_dtype_for(DType t);

// Whether t's interleaved layout decodes faster than its plain rows on this CPU: always for
// Q4_0 and Q4_K; for Q6_K only with AVX-512 (with AVX2 alone its 6-bit codes decode on two
// 8-row halves, and measured from DRAM on 2 threads, AVX2 forced on Zen 4, q6_Kx16 gave 23-26
// GB/s against the row kernel's 27-28; with VNNI 33-38 against 27-31).
bool x16_pays_off(DType t);

// Rows [row_begin, row_end) of an interleaved matrix (`packed`, dtype t: q4_0x16, q4_Kx16 or
// q6_Kx16) of n rows and k columns, as plain rows of its base type into `plain` ((row_end -
// row_begin) row_bytes bytes).
void x16_rows_to_plain(DType t, const uint8_t* packed, int64_t n, int64_t k, int64_t row_begin,
                       int64_t row_end, uint8_t* plain);

// The interleaved layout t of a plain matrix [n, k] of t's base type (`plain`) into `packed`
// (the same byte count; the two must not overlap).
void repack_x16(DType t, const uint8_t* plain, int64_t n, int64_t k, uint8_t* packed);

// A 2-D Q4_0, Q4_K or Q6_K tensor repacked into `dst`: a writable tensor of w's byte count, whose
// storage the result shares (so a caller may place many matrices in one huge-page arena).
// Returns `dst` viewed as its interleaved dtype with w's shape.
Tensor repack_x16(const Tensor& w, const Tensor& dst);

}  // namespace lmstack::kernels
