// linear(): the variant table and the two regimes behind each variant. Decode-sized M
// (<= kGemvMaxRows) is bandwidth-bound: a GEMV kernel streams each weight row once for all
// M rows, the N rows split in contiguous ranges across threads (one core cannot saturate
// DRAM here). Larger M is compute-bound: the blocked GEMM of gemm_driver.cc, which converts
// bf16/f16 weights to f32 panels once per call and runs an f32 FMA microkernel.
// Block-quantized weights (quant.h) take the integer GEMV of quant_gemv.h for decode-sized
// M (activations quantized to int8 on the fly) and the same blocked GEMM for larger M, whose
// B packing dequantizes them, except where the int8 GEMM (gemm_int8.h) takes them: Q8_0, Q4_0,
// Q4_K, Q6_K and int4_g*, on vpdpbusd with VNNI, vpmaddubsw without. Q4_0, Q4_K and Q6_K repacked
// at load time (q4_0x16, q4_Kx16, q6_Kx16: quant_repack.h) have their own GEMVs, and the int8 GEMM
// packs its panels from the groups.
#include <algorithm>
#include <array>
#include <span>

#include "lmstack/core/cpu_features.h"
#include "lmstack/core/error.h"
#include "lmstack/kernels/gemm_int8.h"
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
  // A row-interleaved layout's rows are its base type's (it reaches only its GEMV and the
  // int8 GEMM).
  const DType dt = row_interleaved_base(w.dtype());
  for (int i = 0; i < kNumWeightTypes; ++i)
    if (kWeightTypeDType[i] == dt) return static_cast<WeightType>(i);
  LMSTACK_CHECK(false, "linear: unsupported weight dtype {}", dtype_name(w.dtype()));
  return WeightType::kF32;
}

// The GEMV regime of linear_many(): one parallel region over all outputs' rows, in units of
// 4 rows so a thread's range starts on the float kernel's row blocks (16 when a weight is
// q4_0x16, its row groups). x is quantized once when any weight is block-quantized (all share
// K).
// At most kMaxGemvOuts outputs (the caller splits longer lists), so the unit offsets live on
// the stack: this runs several times per layer in every decode step.
constexpr size_t kMaxGemvOuts = 8;

void gemv_many(GemvFn* gemv, QuantGemvFn* quant_gemv, ThreadPool& pool, const float* x, int64_t m,
               std::span<const LinearOut> outs) {
  std::array<int64_t, kMaxGemvOuts + 1> first_unit{};
  bool any_quantized = false;
  int64_t unit = 4;
  for (const LinearOut& o : outs) {
    any_quantized |= is_quantized(o.w->dtype());
    if (is_row_interleaved(o.w->dtype())) unit = 16;
  }
  for (size_t i = 0; i < outs.size(); ++i)
    first_unit[i + 1] = first_unit[i] + (outs[i].w->dim(0) + unit - 1) / unit;
  const int64_t k = outs[0].w->dim(1);
  const QuantizedRows xq = any_quantized ? quantize_activations(x, m, k) : QuantizedRows{};
  const auto run_range = [&](int64_t u0, int64_t u1) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const int64_t b0 = std::max(u0, first_unit[i]) - first_unit[i];
      const int64_t b1 = std::min(u1, first_unit[i + 1]) - first_unit[i];
      if (b0 >= b1) continue;
      const LinearOut& o = outs[i];
      const int64_t n = o.w->dim(0);
      const int64_t j0 = b0 * unit, j1 = std::min(n, b1 * unit);
      if (is_quantized(o.w->dtype()))
        quant_gemv(o.w->dtype(), o.w->raw_data(), n, j0, j1, xq, m, o.y, n, o.bias, o.accumulate);
      else
        gemv(weight_type(*o.w), o.w->raw_data(), k, j0, j1, x, m, o.y, n, o.bias, o.accumulate);
    }
  };
  pool.parallel_for(first_unit[outs.size()], run_range,
                    any_quantized ? std::max<int64_t>(1, 8 / unit) : 16);
}

void linear_with(GemvFn* gemv, QuantGemvFn* quant_gemv, Int8MicroFn* int8, const GemmIsa& isa,
                 ThreadPool& pool, const float* x, int64_t m, std::span<const LinearOut> outs) {
  if (m <= 0 || outs.empty()) return;
  const int64_t k = outs[0].w->dim(1);
  for (const LinearOut& o : outs) {
    weight_type(*o.w);  // checks rank and dtype
    LMSTACK_CHECK(o.w->dim(1) == k, "linear_many: weights of K {} and {}", k, o.w->dim(1));
  }
  if (m <= kGemvMaxRows && k > 0) {
    for (size_t at = 0; at < outs.size(); at += kMaxGemvOuts)
      gemv_many(gemv, quant_gemv, pool, x, m,
                outs.subspan(at, std::min(kMaxGemvOuts, outs.size() - at)));
    return;
  }
  // x quantized once for every weight the int8 GEMM takes (Q/K/V, gate/up share it).
  const bool any_int8 = std::any_of(outs.begin(), outs.end(), [&](const LinearOut& o) {
    return int8_gemm_supports(o.w->dtype());
  });
  const QuantizedRows xq =
      any_int8 ? quantize_activations(x, m, k, &pool, /*unsigned_codes=*/true) : QuantizedRows{};
  for (const LinearOut& o : outs) {
    const int64_t n = o.w->dim(0);
    bool accumulate = o.accumulate;
    if (n <= 0) continue;
    if (o.bias || k == 0) {  // fold the bias into C so the microkernel only stores or adds
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j)
          o.y[r * n + j] = (accumulate ? o.y[r * n + j] : 0.0f) + (o.bias ? o.bias[j] : 0.0f);
      accumulate = true;
    }
    if (k == 0) continue;  // an empty product: y is the bias (or kept)
    if (int8_gemm_supports(o.w->dtype())) {
      gemm_int8(int8, pool, o.y, xq, m, o.w->dtype(), o.w->raw_data(), n, accumulate);
      continue;
    }
    // Every SIMD variant's int8 GEMM takes the interleaved layouts (codes of <= 6 bits), so only
    // row-contiguous types get here.
    LMSTACK_CHECK(!is_row_interleaved(o.w->dtype()), "linear: {} reached the f32 GEMM",
                  dtype_name(o.w->dtype()));
    gemm_blocked(pool, isa, m, n, k, 1.0f, x, k, false, weight_type(*o.w), o.w->raw_data(), k, true,
                 o.y, n, accumulate);
  }
}

void linear_avx512_vnni(ThreadPool& pool, const float* x, int64_t m,
                        std::span<const LinearOut> outs) {
  linear_with(gemv_avx512, quant_gemv_avx512_vnni, int8_micro_avx512_vnni, kGemmIsaAvx512, pool, x,
              m, outs);
}

void linear_avx512(ThreadPool& pool, const float* x, int64_t m, std::span<const LinearOut> outs) {
  linear_with(gemv_avx512, quant_gemv_avx512, int8_micro_avx2, kGemmIsaAvx512, pool, x, m, outs);
}

void linear_avx2(ThreadPool& pool, const float* x, int64_t m, std::span<const LinearOut> outs) {
  linear_with(gemv_avx2, quant_gemv_avx2, int8_micro_avx2, kGemmIsaAvx2, pool, x, m, outs);
}

void linear_ref_variant(ThreadPool&, const float* x, int64_t m, std::span<const LinearOut> outs) {
  for (const LinearOut& o : outs) ref::linear(o.y, x, *o.w, m, o.bias, o.accumulate);
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
  const LinearOut out{y, &w, bias, accumulate};
  linear_many(pool, x, m, std::span<const LinearOut>(&out, 1));
}

void linear_many(ThreadPool& pool, const float* x, int64_t m, std::span<const LinearOut> outs) {
  static LinearFn* const fn = pick_variant(linear_variants());
  fn(pool, x, m, outs);
}

}  // namespace lmstack::kernels
