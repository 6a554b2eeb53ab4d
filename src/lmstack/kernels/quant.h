// Block-quantized weights: quantize / dequantize rows of Q8_0, Q4_0, Q4_K, Q6_K (byte layouts
// exactly GGUF's, ggml's ggml-common.h block structs, so GGUF tensors map directly) and the
// group-wise asymmetric int4_g32/64/128 (layout in core/dtype.h). kernels::linear() and
// kernels::embedding_lookup() accept Tensors of these dtypes (linear.cc, embedding.cc).
//
// Quantizers (reference, scalar, deterministic):
//   q8_0: d = amax / 127, q = round-half-away(x / d)          (bit-identical to ggml / gguf-py)
//   q4_0: d = (signed value of largest |x|) / -8, q = min(15, trunc(x / d + 8.5))  (idem)
//   q4_K: per 32-element sub-block [min(0, x), max(x)] / 15 with the 6-bit sub-min and
//         sub-scale rounded up so the sub-block's range stays covered (lmstack's own RTN; not
//         llama.cpp's iterative search, so bytes differ from llama.cpp's but decode the same).
//   q6_K: per 16-element sub-block symmetric scale amax / 31 rounded up onto the int8 grid.
//   int4_g*: per group [min(0, x), max(0, x)] / 15, zero = round(-min / scale).
// Error bounds per element (derivations in quant.cc, checked by tests/kernels/quant_test.cc):
//   q8_0 <= d/2 + 127 * (f16 rounding of d); q4_0 <= |d| at the clamped end of its -8..7
//   grid, |d|/2 elsewhere (+ 8 * f16 rounding of d); q4_K <= d * sc_j / 2; q6_K <= d * sc_j / 2;
//   int4_g* <= scale / 2 (scales as stored, so the bounds need no f16 term).
#pragma once

#include <cstdint>

#include "lmstack/core/dtype.h"
#include "lmstack/core/memory.h"
#include "lmstack/core/tensor.h"
#include "lmstack/core/thread_pool.h"

namespace lmstack::kernels {

// One row of n floats (n a multiple of dtype_info(t).block_size) -> dtype_bytes(t, n) bytes.
// t is a block-quantized DType (f32/bf16/f16 are accepted too and simply converted).
// Throws ConfigError for other types and when n is not a multiple of the block size.
void quantize_row(DType t, const float* src, void* dst, int64_t n);
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// A [rows, n] f32 matrix quantized into a new Tensor {rows, n} of dtype t (parallel over
// rows), counted under `cat`.
Tensor quantize_matrix(ThreadPool& pool, const float* w, int64_t rows, int64_t n, DType t,
                       MemoryCategory cat = MemoryCategory::kWeights);

// Rows [row_begin, row_end) of a 2-D Tensor of any float or block-quantized dtype as f32
// into dst ([row_end - row_begin, w.dim(1)]).
void dequantize_rows(const Tensor& w, int64_t row_begin, int64_t row_end, float* dst);

// True for the dtypes quantize_row/dequantize_row handle (f32, bf16, f16 and every
// block-quantized type).
bool is_row_codec_dtype(DType t);

}  // namespace lmstack::kernels
