// Prefill-sized linear layers over block-quantized weights on 8-bit integer dot products
// (AVX-512 VNNI vpdpbusd: 64 multiply-adds per instruction against the f32 FMA's 16). The
// activations are quantized to int8 per 32 elements exactly as the decode GEMV does
// (quant_gemv.h), so prefill and decode see the same x; the f32 path instead dequantizes the
// weights and multiplies in f32 (gemm_driver.cc), which stays, on CPUs without VNNI, for Q8_0:
// there the AVX2 microkernel (vpmaddubsw, 32 multiply-adds per instruction summed in int16,
// gemm_int8_avx2.cc) takes the 4- and 6-bit types, whose int16 sums it keeps from saturating.
//
// Every supported type is written per 32-element block b of a weight row as unsigned codes
// with one scale and one offset, w[32 b + i] = s_b * code_i + o_b (Q8_0: code = q + 128,
// o = -128 d; Q4_0: code = q, o = -8 d; Q4_K: s = d sc_j, o = -dmin m_j; int4_g*: o = -s zero),
// so with x ~= d_x * q_x (sum32 = d_x * sum q_x) one block contributes
//   d_x s_b * sum(code * q_x) + o_b * sum32,
// the integer sum exact in int32 (|sum| <= 32 * 255 * 127). Q6_K has a scale per 16 elements
// (int8_gemm_half_scales): its block is two halves, each with its own s and o (code = q, s =
// d sc_h, o = -32 d sc_h) and the half's activation sum (QuantizedRows::sum16).
//
// Panel layout (16 output columns, all K): per block b, 8 groups g of 64 bytes (lane c holds
// the codes of column c at k = 32 b + 4 g .. + 3, the operand order of vpdpbusd), then the 16
// scales and the 16 offsets as f32, then (half-scale types only) the 16 scales and 16 offsets
// of the block's second half: int8_panel_block_bytes per block. Columns past N are zero.
#pragma once

#include <cstdint>

#include "lmstack/core/dtype.h"
#include "lmstack/kernels/quant_gemv.h"

namespace lmstack::kernels {

inline constexpr int kInt8PanelCols = 16;
constexpr int64_t int8_panel_block_bytes(bool half_scales) {
  return 32 * kInt8PanelCols + (half_scales ? 4 : 2) * kInt8PanelCols * 4;
}
inline constexpr int64_t kInt8PanelBlockBytes = int8_panel_block_bytes(false);

// Whether gemm_int8 takes weights of this type (Q8_0, Q4_0 and Q4_K and their repacked
// Q4_0x16 / Q4_Kx16, Q6_K and its Q6_Kx16, int4_g*).
bool int8_gemm_supports(DType t);

// Whether the type's blocks carry a scale and offset per 16 elements (Q6_K, Q6_Kx16).
bool int8_gemm_half_scales(DType t);

// Whether the AVX2 microkernel takes it: codes of at most 6 bits (all but Q8_0), whose
// vpmaddubsw sums it keeps exact in int16 (gemm_int8_avx2.cc).
bool int8_gemm_fits_int16(DType t);

// Packs weight rows [n0, n0 + 16) of w ([n, k] of type t, k a multiple of 32, n0 a multiple of
// 16) into `panel` (k / 32 * int8_panel_block_bytes(int8_gemm_half_scales(t)) bytes). A Q4_0x16
// or Q4_Kx16 group is the panel layout already, its nibbles side by side (quant_blocks.h): its
// panel is the nibbles unpacked and the scales widened, no per-element gathering (a Q6_Kx16
// group's codes decode from its word vectors in place).
void pack_int8_panel(DType t, const void* w, int64_t n, int64_t k, int64_t n0, uint8_t* panel);

// c[r * ldc + j] (+)= sum over blocks of the formula above, rows [row0, row0 + mr) of x
// (mr <= kInt8MicroRows) and columns j < nr (<= 16) of one panel; `add` selects += over =;
// `half_scales`: the panel's blocks are two halves of 16 (int8_gemm_half_scales).
inline constexpr int kInt8MicroRows = 12;
using Int8MicroFn = void(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel,
                         float* c, int64_t ldc, int nr, bool add, bool half_scales);
Int8MicroFn int8_micro_avx512_vnni;
Int8MicroFn int8_micro_avx2;  // vpmaddubsw + vpmaddwd; 4-bit codes only (int8_gemm_fits_int16)
Int8MicroFn int8_micro_ref;   // scalar, the same arithmetic; the tests' reference

}  // namespace lmstack::kernels

namespace lmstack {
class ThreadPool;
}

namespace lmstack::kernels {

// y[m, n] (+)= x[m, k] · wᵀ for a weight type int8_gemm_supports(), x given quantized
// (quantize_activations; linear() quantizes it once for all weights that share it, and folds a
// bias into y first, as for the f32 GEMM); threads over 16-column panels, each packed once and
// run against all m rows.
void gemm_int8(Int8MicroFn* micro, ThreadPool& pool, float* y, const QuantizedRows& x, int64_t m,
               DType t, const void* w, int64_t n, bool accumulate);

}  // namespace lmstack::kernels
