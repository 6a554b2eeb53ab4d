// AVX2 build of the quantized GEMV leaf kernels (quant_gemv_impl.h): vpmaddubsw + vpmaddwd in
// place of VNNI, for x86-64-v3 machines without AVX-512.
#include "lmstack/kernels/quant_gemv.h"

#define QG_NS avx2
#define QG_VNNI 0
#include "lmstack/kernels/quant_gemv_impl.h"
#undef QG_NS
#undef QG_VNNI

namespace lmstack::kernels {

void quant_gemv_avx2(DType t, const void* w, int64_t n_begin, int64_t n_end, const QuantizedRows& x,
                     int64_t m, float* y, int64_t ldy, const float* bias, bool accumulate) {
  avx2::gemv(t, w, n_begin, n_end, x, m, y, ldy, bias, accumulate);
}

}  // namespace lmstack::kernels
