// The variant tables of the matrix-product ops (linear, gemm_f32, gemm_bf16), best first,
// ending with the single-threaded reference. ops.h's linear() / gemm_*() dispatch to the first
// supported entry; tests and benchmarks enumerate them to compare and measure each one.
#pragma once

#include <cstdint>
#include <span>

#include "lmstack/core/tensor.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/variant.h"

namespace lmstack::kernels {

// linear_many()'s contract (ops.h); linear() is the one-output case.
using LinearFn = void(ThreadPool& pool, const float* x, int64_t m, std::span<const LinearOut> outs);
using GemmF32Fn = void(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                       int64_t ldb, float beta, float* c, int64_t ldc);

std::span<const KernelVariant<LinearFn>> linear_variants();
using GemmBf16Fn = void(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n,
                        int64_t k, float alpha, const float* a, int64_t lda, const void* b,
                        DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc);

std::span<const KernelVariant<GemmF32Fn>> gemm_f32_variants();
std::span<const KernelVariant<GemmBf16Fn>> gemm_bf16_variants();  // gemm_bf16.cc

}  // namespace lmstack::kernels
