// Leaf kernels of the matrix products, one set per instruction set, over raw pointers only:
// they are compiled with ISA flags (*_avx512.cc) and must stay free of STL and threading,
// which live in the baseline files linear.cc / gemm_driver.cc. Dimension letters: M rows of
// activations, N output features, K the reduction; "nt" B is stored [N, K] (a weight),
// "nn" B is stored [K, N].
#pragma once

#include <cstdint>

#include "lmstack/core/dtype.h"

namespace lmstack {
class ThreadPool;
}

namespace lmstack::kernels {

// Weight element types the kernels read. f32/bf16/f16 are converted to f32 in registers by
// the GEMV kernels and the B packers; the block-quantized types (kWeightTypeDType below maps each
// to its DType) reach only the GEMM driver, which dequantizes a block of B rows to f32 before
// packing it (quantized GEMVs have their own kernels, quant_gemv.h).
enum class WeightType : int {
  kF32 = 0,
  kBF16 = 1,
  kF16 = 2,
  kQ8_0,
  kQ4_0,
  kQ4_K,
  kQ6_K,
  kInt4G32,
  kInt4G64,
  kInt4G128,
};
inline constexpr int kNumWeightTypes = static_cast<int>(WeightType::kInt4G128) + 1;

// The DType each WeightType reads, indexed by WeightType: the one mapping between the two
// enums (linear() looks a tensor's dtype up here; the GEMM driver dequantizes by it).
inline constexpr DType kWeightTypeDType[kNumWeightTypes] = {
    DType::kF32,  DType::kBF16, DType::kF16,     DType::kQ8_0,    DType::kQ4_0,
    DType::kQ4_K, DType::kQ6_K, DType::kInt4G32, DType::kInt4G64, DType::kInt4G128};
inline constexpr DType weight_dtype(WeightType wt) {
  return kWeightTypeDType[static_cast<int>(wt)];
}

// Calls f.template operator()<WT>() for the float weight type wt (f32, bf16, f16): the one
// switch behind each ISA's dtype-templated B packers (block-quantized types never reach them).
template <class F>
inline void with_float_weight_type(WeightType wt, const F& f) {
  switch (wt) {
    case WeightType::kF32:
      return f.template operator()<WeightType::kF32>();
    case WeightType::kBF16:
      return f.template operator()<WeightType::kBF16>();
    case WeightType::kF16:
      return f.template operator()<WeightType::kF16>();
    default:
      return;
  }
}

// ---- GEMV (decode): y[r, j] for j in [n_begin, n_end), r < m ----------------------------
// y[r * ldy + j] = sum_i x[r * k + i] * w[j * k + i] (+ bias[j]) (+ y[r * ldy + j] if
// accumulate). Streams each weight row once for all m rows (up to 6 rows per pass over a row
// block).
void gemv_avx512(WeightType wt, const void* w, int64_t k, int64_t n_begin, int64_t n_end,
                 const float* x, int64_t m, float* y, int64_t ldy, const float* bias,
                 bool accumulate);
void gemv_avx2(WeightType wt, const void* w, int64_t k, int64_t n_begin, int64_t n_end,
               const float* x, int64_t m, float* y, int64_t ldy, const float* bias,
               bool accumulate);

// ---- blocked GEMM (prefill, training) ---------------------------------------------------
// Packed layouts. A panel: MR rows of op(A) for kc steps, ap[kk * MR + ii]. B panel: NR
// columns of op(B) for kc steps, bp[kk * NR + jj]. Rows/columns past the matrix are zero.
//
// pack_b_nt: columns [n0, n0 + nc) and steps [k0, k0 + kc) of B stored [N, K] with row
// stride ldb (elements), as ceil(nc / NR) consecutive panels of kc * NR floats.
// pack_b_nn: the same from f32 B stored [K, N].
// micro: c[ii * ldc + jj] (+)= sum_kk ap[kk * MR + ii] * bp[kk * NR + jj] for ii < mr,
// jj < nr; `add` selects += over =.
// pack_a: one A panel from `rows` (<= MR) rows of op(A) for k steps, times alpha; `a`
// points at the panel's first element: row ii at a + ii * lda, or, if trans, element
// (ii, kk) at a[kk * lda + ii].
struct GemmIsa {
  const char* name;
  int mr, nr;
  void (*pack_a)(const float* a, int64_t lda, bool trans, int rows, int64_t k, float alpha,
                 float* ap);
  void (*pack_b_nt)(WeightType wt, const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0,
                    int64_t kc, float* bp);
  void (*pack_b_nn)(const float* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
                    float* bp);
  void (*micro)(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
                bool add);
};

// The AVX-512 set (MR 14, NR 32) and the AVX2 set (MR 6, NR 16).
extern const GemmIsa kGemmIsaAvx512;
extern const GemmIsa kGemmIsaAvx2;

// C[M, N] (+)= alpha * op(A) * op(B), blocked and threaded over `pool` with `isa`'s kernels
// (gemm_driver.cc; a baseline file, not a leaf). A is f32 [M, K] (or [K, M] if trans_a);
// B is [N, K] of type bt if b_nt, else f32 [K, N]. `add` selects C += over C =. k > 0.
// A block-quantized bt needs b_nt and ldb = K (whole rows, K a multiple of its block).
void gemm_blocked(ThreadPool& pool, const GemmIsa& isa, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, int64_t lda, bool trans_a, WeightType bt,
                  const void* b, int64_t ldb, bool b_nt, float* c, int64_t ldc, bool add);

// ---- bf16 GEMM (training in bf16 mixed precision; gemm_bf16.cc) --------------------------
// The same loop nest on vdpbf16ps, which sums the products of one k pair per 32-bit lane.
// Packed layouts hold pairs: one uint32_t per (row or column, k pair), step 2p in the low
// 16 bits, 2p + 1 in the high; an odd k's last pair has a zero high half. A panel:
// ap[p * MR + ii]; B panel: bp[p * NR + jj], ceil(kc / 2) pairs long. f32 operands are
// rounded to bf16 (nearest even) by the packers, bf16 ones copied.
// pack_a: as GemmIsa's (alpha applied before rounding). pack_b_nt / pack_b_nn: B stored
// [N, K] / [K, N] of type bt (kF32 or kBF16), ceil(nc / NR) panels. micro: as GemmIsa's.
struct GemmBf16Isa {
  const char* name;
  int mr, nr;
  void (*pack_a)(const float* a, int64_t lda, bool trans, int rows, int64_t k, float alpha,
                 uint32_t* ap);
  void (*pack_b_nt)(WeightType bt, const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0,
                    int64_t kc, uint32_t* bp);
  void (*pack_b_nn)(WeightType bt, const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0,
                    int64_t kc, uint32_t* bp);
  void (*micro)(int64_t kc, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc, int mr,
                int nr, bool add);
};

// The AVX512_BF16 set (MR 14, NR 32); needs cpu_features().avx512_bf16.
extern const GemmBf16Isa kGemmBf16IsaAvx512;

// C[M, N] (+)= round(alpha * op(A)) * round(op(B)) in f32, as gemm_blocked with bf16-rounded
// operands; bt is kF32 or kBF16 for either B layout.
void gemm_blocked_bf16(ThreadPool& pool, const GemmBf16Isa& isa, int64_t m, int64_t n, int64_t k,
                       float alpha, const float* a, int64_t lda, bool trans_a, WeightType bt,
                       const void* b, int64_t ldb, bool b_nt, float* c, int64_t ldc, bool add);

}  // namespace lmstack::kernels
