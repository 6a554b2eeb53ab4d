// The variant tables of the norm, activation, softmax, rope and attention ops, best first,
// ending with the scalar reference of ops_ref.h. The public ops of ops.h dispatch to the first
// supported entry (picked once per process); tests compare every supported entry with the
// reference and benchmarks measure each one. (The matrix products have linear_variants.h.)
#pragma once

#include <cstdint>
#include <span>

#include "lmstack/core/cpu_features.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/variant.h"

namespace lmstack::kernels {

using RmsnormFn = void(float* y, const float* x, const float* weight, int64_t rows, int64_t dim,
                       float eps);
using LayernormFn = void(float* y, const float* x, const float* gamma, const float* beta,
                         int64_t rows, int64_t dim, float eps);
using RopeFn = void(float* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
                    int rotary_dim, const float* inv_freq, RopeStyle style);
using SiluMulFn = void(float* out, const float* gate, const float* up, int64_t n);
using GeluTanhFn = void(float* y, const float* x, int64_t n);
using AddInplaceFn = void(float* y, const float* x, int64_t n);
using SoftmaxRowsFn = void(float* x, int64_t rows, int64_t dim);
using PagedAttentionFn = void(ThreadPool& pool, float* out, const float* q, const PagedKv& kv,
                              const AttentionBatch& batch, int heads, float scale);

std::span<const KernelVariant<RmsnormFn>> rmsnorm_variants();
std::span<const KernelVariant<LayernormFn>> layernorm_variants();
std::span<const KernelVariant<RopeFn>> rope_variants();
std::span<const KernelVariant<SiluMulFn>> silu_mul_variants();
std::span<const KernelVariant<GeluTanhFn>> gelu_tanh_variants();
std::span<const KernelVariant<AddInplaceFn>> add_inplace_variants();
std::span<const KernelVariant<SoftmaxRowsFn>> softmax_rows_variants();
std::span<const KernelVariant<PagedAttentionFn>> paged_attention_variants();
using CausalAttentionBackwardFn = void(ThreadPool& pool, float* dq, float* dk, float* dv,
                                       const float* dout, const float* q, const float* k,
                                       const float* v, const float* out, int64_t batch,
                                       int64_t tokens, int heads, int kv_heads, int head_dim,
                                       float scale, int window);
std::span<const KernelVariant<CausalAttentionBackwardFn>> causal_attention_backward_variants();

// Support predicates shared by the tables. (Never include this header from *_avx512.cc.)
inline bool always_supported() { return true; }
inline bool avx2_supported() { return cpu_features().has_avx2_fma(); }
// The F/BW/VL/DQ subset the *_avx512.cc files are built for.
inline bool avx512_supported() { return cpu_features().has_avx512(); }

}  // namespace lmstack::kernels
