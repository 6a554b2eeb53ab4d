// AVX2 build of the quantized GEMV leaf kernels (quant_gemv_impl.h): vpmaddubsw + vpmaddwd in
// place of VNNI, for x86-64-v3 machines without AVX-512 (q4_0x16 groups as two 8-row halves).
#include "lmstack/kernels/quant_gemv.h"

#define QG_NS avx2
#define QG_VNNI 0
#define QG_W512 0
#include "lmstack/kernels/quant_gemv_impl.h"
#include "lmstack/kernels/quant_gemv_q4_0x16.h"
#undef QG_NS
#undef QG_VNNI
#undef QG_W512

namespace lmstack::kernels {

void quant_gemv_avx2(DType t, const void* w, int64_t n, int64_t n_begin, int64_t n_end,
                     const QuantizedRows& x, int64_t m, float* y, int64_t ldy, const float* bias,
                     bool accumulate) {
  if (t == DType::kQ4_0x16)
    return avx2::gemv_q4_0x16(w, n, n_begin, n_end, x, m, y, ldy, bias, accumulate);
  avx2::gemv(t, w, n_begin, n_end, x, m, y, ldy, bias, accumulate);
}

}  // namespace lmstack::kernels
