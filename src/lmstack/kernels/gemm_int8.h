// Prefill-sized linear layers over block-quantized weights on 8-bit integer dot products
// (AVX-512 VNNI vpdpbusd: 64 multiply-adds per instruction against the f32 FMA's 16; AVX2
// vpmaddubsw: 32). The activations are quantized to int8 per 32 elements exactly as the decode
// GEMV does (quant_gemv.h), so prefill and decode see the same x.
//
// Every supported type is written per part of a 32-element block b of a weight row (the
// whole block; Q6_K, whose scales cover 16 elements: each half) as signed codes with one
// scale and one offset, w = s * code + o:
//   Q8_0 code = q, o = 0;  Q4_0 code = q - 8, o = 0;  Q6_K code = q - 32, s = d sc_h, o = 0;
//   Q4_K code = q - 8, s = d sc_j, o = 8 s - dmin m_j;  int4_g* code = q - 8, o = s (8 - zero).
// vpdpbusd and vpmaddubsw multiply unsigned bytes by signed ones, so the activations enter as
// u = q_x + 128 (QuantizedRows::qu): sum(u * code) = sum(q_x * code) + 128 sum(code), and an
// int32 sum started at the part's correction -128 sum(code), known when the panel is packed,
// is sum(q_x * code) exactly, at no cost per row. With x ~= d_x * q_x a part contributes
//   d_x s * isum + o * sum_x   (sum_x = d_x * sum(q_x) over the part; only Q4_K and int4 have o).
// The AVX2 kernel sums its products in int16 (gemm_int8_avx2.cc); Q8_0's 8-bit codes would
// overflow there, so for it that kernel multiplies |code| by q_x carrying code's sign instead.
//
// Panel layout (16 output columns, all K): per block b, 8 groups g of 64 bytes (lane c holds
// the codes of column c at k = 32 b + 4 g .. + 3, the operand order of vpdpbusd), then per
// part three 16-lane vectors: the f32 scales, the f32 offsets and the int32 corrections:
// int8_panel_block_bytes per block. Columns past N are zero.
#pragma once

#include <cstdint>

#include "lmstack/core/dtype.h"
#include "lmstack/kernels/quant_gemv.h"

namespace lmstack::kernels {

inline constexpr int kInt8PanelCols = 16;
inline constexpr int64_t kInt8PartBytes = 3 * kInt8PanelCols * 4;
constexpr int64_t int8_panel_block_bytes(bool half_scales) {
  return 32 * kInt8PanelCols + (half_scales ? 2 : 1) * kInt8PartBytes;
}

// Part h's scales, offsets and corrections in the panel block at pb (the packers write them
// through the mutable overloads, the kernels read them through the const ones).
inline float* int8_part_scales(uint8_t* pb, int h) {
  return reinterpret_cast<float*>(pb + 32 * kInt8PanelCols + h * kInt8PartBytes);
}
inline float* int8_part_offsets(uint8_t* pb, int h) {
  return int8_part_scales(pb, h) + kInt8PanelCols;
}
inline int32_t* int8_part_corrections(uint8_t* pb, int h) {
  return reinterpret_cast<int32_t*>(int8_part_scales(pb, h) + 2 * kInt8PanelCols);
}
inline const float* int8_part_scales(const uint8_t* pb, int h) {
  return int8_part_scales(const_cast<uint8_t*>(pb), h);
}
inline const float* int8_part_offsets(const uint8_t* pb, int h) {
  return int8_part_offsets(const_cast<uint8_t*>(pb), h);
}
inline const int32_t* int8_part_corrections(const uint8_t* pb, int h) {
  return int8_part_corrections(const_cast<uint8_t*>(pb), h);
}

// Whether gemm_int8 takes weights of this type (Q8_0, Q4_0 and Q4_K and their repacked
// Q4_0x16 / Q4_Kx16, Q6_K and its Q6_Kx16, int4_g*).
bool int8_gemm_supports(DType t);

// What a type's panels ask of a microkernel. At most one is set (no type has two), so the
// kernels implement four shapes: plain, halves, offsets (of whole blocks, against sum32) and
// wide (plain for VNNI).
struct Int8PanelKind {
  bool halves = false;   // two parts per block, a scale per 16 elements (Q6_K, Q6_Kx16)
  bool offsets = false;  // nonzero offsets (Q4_K, Q4_Kx16, int4_g*)
  bool wide = false;     // 8-bit codes (Q8_0), which the AVX2 kernel multiplies by sign
};
Int8PanelKind int8_panel_kind(DType t);

// Packs weight rows [n0, n0 + 16) of w ([n, k] of type t, k a multiple of 32, n0 a multiple of
// 16) into `panel` (k / 32 * int8_panel_block_bytes(int8_panel_kind(t).halves) bytes). A
// Q4_0x16 or Q4_Kx16 group is the panel layout already, its nibbles side by side
// (quant_blocks.h): its panel is the nibbles unpacked and the scales widened, no per-element
// gathering (a Q6_Kx16 group's codes decode from its word vectors in place).
void pack_int8_panel(DType t, const void* w, int64_t n, int64_t k, int64_t n0, uint8_t* panel);

// c[r * ldc + j] (+)= sum over parts of the formula above, rows [row0, row0 + mr) of x
// (mr <= kInt8MicroRows; x.qu set) and columns j < nr (<= 16) of one panel of `kind` (one of
// int8_panel_kind's); `add` selects += over =.
inline constexpr int kInt8MicroRows = 12;
using Int8MicroFn = void(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel,
                         float* c, int64_t ldc, int nr, bool add, Int8PanelKind kind);
Int8MicroFn int8_micro_avx512_vnni;
Int8MicroFn int8_micro_avx2;  // vpmaddubsw + vpmaddwd (int16 sums kept exact)
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
