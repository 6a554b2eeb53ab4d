// linear(): the variant table and the two regimes behind each variant. Decode-sized M
// (<= kGemvMaxRows) is bandwidth-bound: a GEMV kernel streams each weight row once for all
// M rows, the N rows split in contiguous ranges across threads (one core cannot saturate
// DRAM here). Larger M is compute-bound: the blocked GEMM of gemm_driver.cc, which converts
// bf16/f16 weights to f32 panels once per call and runs an f32 FMA microkernel.
// Block-quantized weights (quant.h) take the integer GEMV of quant_gemv.h for decode-sized
// M (activations quantized to int8 on the fly) and the same blocked GEMM for larger M, whose
// B packing dequantizes them.
#include <algorithm>
#include <span>

#include "lmstack/core/cpu_features.h"
#include "lmstack/core/error.h"
#include "lmstack/kernels/gemm_kernels.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/quant_gemv.h"

namespace lmstack::kernels {
namespace {

// Up to this M the GEMV is faster: it streams the weights once with no packing, while the
// GEMM pays ~5 ms per 2048 x 5632 bf16 matrix to convert and pack B on one core (BM_MidM,
// 1 thread, CPU time: M = 16 GEMV 6.1 ms vs GEMM 8.0 ms; M = 24 9.0 vs 8.0).
constexpr int64_t kGemvMaxRows = 16;

using GemvFn = void(WeightType, const void*, int64_t, int64_t, int64_t, const float*, int64_t,
                    float*, int64_t, const float*, bool);

WeightType weight_type(const Tensor& w) {
  LMSTACK_CHECK(w.rank() == 2, "linear: weight must be 2-D, got {}", w.shape().str());
  for (int i = 0; i < kNumWeightTypes; ++i)
    if (kWeightTypeDType[i] == w.dtype()) return static_cast<WeightType>(i);
  LMSTACK_CHECK(false, "linear: unsupported weight dtype {}", dtype_name(w.dtype()));
  return WeightType::kF32;
}

void linear_with(GemvFn* gemv, QuantGemvFn* quant_gemv, const GemmIsa& isa, ThreadPool& pool,
                 float* y, const float* x, const Tensor& w, int64_t m, const float* bias,
                 bool accumulate) {
  const WeightType wt = weight_type(w);
  const int64_t n = w.dim(0), k = w.dim(1);
  if (m <= 0 || n <= 0) return;
  if (is_quantized(w.dtype()) && m <= kGemvMaxRows && k > 0) {
    linear_quant_gemv(quant_gemv, pool, y, x, w, m, bias, accumulate);
    return;
  }
  if (m <= kGemvMaxRows || k == 0) {
    // Blocks of 4 rows so thread ranges start on the kernel's row blocks.
    const int64_t blocks = (n + 3) / 4;
    pool.parallel_for(
        blocks,
        [&](int64_t b0, int64_t b1) {
          gemv(wt, w.raw_data(), k, b0 * 4, std::min(n, b1 * 4), x, m, y, n, bias, accumulate);
        },
        16);
    return;
  }
  if (bias) {  // fold the bias into C so the microkernel only stores or adds
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) y[r * n + j] = (accumulate ? y[r * n + j] : 0.0f) + bias[j];
    accumulate = true;
  }
  gemm_blocked(pool, isa, m, n, k, 1.0f, x, k, false, wt, w.raw_data(), k, true, y, n, accumulate);
}

void linear_avx512_vnni(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
                        const float* bias, bool accumulate) {
  linear_with(gemv_avx512, quant_gemv_avx512_vnni, kGemmIsaAvx512, pool, y, x, w, m, bias,
              accumulate);
}

void linear_avx512(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
                   const float* bias, bool accumulate) {
  linear_with(gemv_avx512, quant_gemv_avx512, kGemmIsaAvx512, pool, y, x, w, m, bias, accumulate);
}

void linear_avx2(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
                 const float* bias, bool accumulate) {
  linear_with(gemv_avx2, quant_gemv_avx2, kGemmIsaAvx2, pool, y, x, w, m, bias, accumulate);
}

void linear_ref_variant(ThreadPool&, float* y, const float* x, const Tensor& w, int64_t m,
                        const float* bias, bool accumulate) {
  ref::linear(y, x, w, m, bias, accumulate);
}

bool avx512_vnni_ok() { return cpu_features().has_avx512() && cpu_features().avx512_vnni; }
bool avx512_ok() { return cpu_features().has_avx512(); }
bool avx2_ok() { return cpu_features().has_avx2_fma(); }
bool always() { return true; }

constexpr KernelVariant<LinearFn> kLinearVariants[] = {
    {"avx512_vnni", linear_avx512_vnni, avx512_vnni_ok},
    {"avx512", linear_avx512, avx512_ok},
    {"avx2", linear_avx2, avx2_ok},
    {"ref", linear_ref_variant, always},
};

}  // namespace

std::span<const KernelVariant<LinearFn>> linear_variants() { return kLinearVariants; }

void linear(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
            const float* bias, bool accumulate) {
  static LinearFn* const fn = pick_variant(linear_variants());
  fn(pool, y, x, w, m, bias, accumulate);
}

}  // namespace lmstack::kernels
