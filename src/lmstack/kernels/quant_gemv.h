// Decode-sized linear layers over block-quantized weights (the GEMV regime of linear()):
// activations are quantized to int8 on the fly, one f32 scale per 32 elements (symmetric,
// round to nearest, the Q8_0 rule), so each weight block's dot product runs on 8-bit integer
// SIMD (VNNI vpdpbusd, or vpmaddubsw + vpmaddwd without it) and is scaled once per block.
// quant_linear.cc quantizes the activations (linear.cc threads the rows); quant_gemv_avx512.cc /
// _avx2.cc are the leaf kernels (quant_gemv_impl.h). Plain data only here: the leaf files include
// it.
#pragma once

#include <cstdint>
#include <span>

#include "lmstack/core/dtype.h"
#include "lmstack/kernels/variant.h"

namespace lmstack::kernels {

// M activation rows of length K (a multiple of 32), quantized: row r's block b is
// q[r * k + 32 b ...] with scale d[r * (k / 32) + b]; x ~= d * q. sum32[r * (k/32) + b] =
// d * sum(q over the block) and sum16[r * (k/16) + h] = d * sum(q over 16 elements): the
// activation sums that weight offsets (zero points, mins, Q4_0's 8, Q6_K's 32) multiply.
// qu[i] = q[i] + 128, the unsigned operand the int8 GEMM multiplies signed codes by
// (gemm_int8.h): filled where quantize_activations is asked for it, null otherwise.
struct QuantizedRows {
  const int8_t* q;
  const float* d;
  const float* sum32;
  const float* sum16;
  int64_t k;
  const uint8_t* qu = nullptr;
};

// y[r * ldy + j] (+)= sum_i x[r, i] * w[j, i] (+ bias[j]) for j in [n_begin, n_end), r < m,
// w being the n rows of dtype t (q8_0, q4_0, q4_K, q6_K, int4_g*) in their GGUF/lmstack
// layouts, or q4_0x16 / q4_Kx16 / q6_Kx16 (quant_blocks.h; n places their groups,
// quant_gemv_x16.h).
using QuantGemvFn = void(DType t, const void* w, int64_t n, int64_t n_begin, int64_t n_end,
                         const QuantizedRows& x, int64_t m, float* y, int64_t ldy,
                         const float* bias, bool accumulate);
QuantGemvFn quant_gemv_avx512_vnni;  // AVX-512 VL + VNNI
QuantGemvFn quant_gemv_avx512;       // AVX-512 VL/BW, vpmaddubsw (no VNNI)
QuantGemvFn quant_gemv_avx2;         // AVX2 + FMA + F16C

// Quantizes `blocks` consecutive 32-element blocks of x by the rule above: per block 32 codes
// into q, its scale into d, d * sum(q) into sum32 and the two half-block sums into sum16.
using QuantizeBlocksFn = void(const float* x, int64_t blocks, int8_t* q, float* d, float* sum32,
                              float* sum16);
QuantizeBlocksFn quantize_blocks_avx2;  // bit-identical to the reference (same rounding)
QuantizeBlocksFn quantize_blocks_ref;

}  // namespace lmstack::kernels

namespace lmstack {
class ThreadPool;
}

namespace lmstack::kernels {

std::span<const KernelVariant<QuantizeBlocksFn>> quantize_blocks_variants();

// Quantizes the m rows of x [m, k] (storage owned by the calling thread, reused across calls;
// valid until its next call). k must be a multiple of 32. With a pool, a large x (prefill) is
// split over its threads. `unsigned_codes` also fills qu, which only the int8 GEMM reads (the
// decode GEMVs do not, so a decode step does not pay for it).
QuantizedRows quantize_activations(const float* x, int64_t m, int64_t k, ThreadPool* pool = nullptr,
                                   bool unsigned_codes = false);

}  // namespace lmstack::kernels
