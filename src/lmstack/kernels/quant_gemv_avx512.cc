// AVX-512 builds of the quantized GEMV leaf kernels (quant_gemv_impl.h): one with VNNI's
// vpdpbusd, one with vpmaddubsw + vpmaddwd for AVX-512 CPUs without VNNI. The row kernels run on
// 256-bit vectors (EVEX-encoded, 32 registers); the interleaved-layout kernels (quant_gemv_x16.h)
// on 512-bit ones, 16 weight rows per vector.
#include "lmstack/kernels/quant_gemv.h"

#define QG_NS vnni
#define QG_VNNI 1
#define QG_W512 1
#include "lmstack/kernels/quant_gemv_impl.h"
#include "lmstack/kernels/quant_gemv_x16.h"
#undef QG_NS
#undef QG_VNNI
#undef QG_W512

#define QG_NS no_vnni
#define QG_VNNI 0
#define QG_W512 1
#include "lmstack/kernels/quant_gemv_impl.h"
#include "lmstack/kernels/quant_gemv_x16.h"
#undef QG_NS
#undef QG_VNNI
#undef QG_W512

namespace lmstack::kernels {

void quant_gemv_avx512_vnni(DType t, const void* w, int64_t n, int64_t n_begin, int64_t n_end,
                            const QuantizedRows& x, int64_t m, float* y, int64_t ldy,
                            const float* bias, bool accumulate) {
  if (is_row_interleaved(t))
    return vnni::gemv_x16(t, w, n, n_begin, n_end, x, m, y, ldy, bias, accumulate);
  vnni::gemv(t, w, n_begin, n_end, x, m, y, ldy, bias, accumulate);
}

void quant_gemv_avx512(DType t, const void* w, int64_t n, int64_t n_begin, int64_t n_end,
                       const QuantizedRows& x, int64_t m, float* y, int64_t ldy, const float* bias,
                       bool accumulate) {
  if (is_row_interleaved(t))
    return no_vnni::gemv_x16(t, w, n, n_begin, n_end, x, m, y, ldy, bias, accumulate);
  no_vnni::gemv(t, w, n_begin, n_end, x, m, y, ldy, bias, accumulate);
}

}  // namespace lmstack::kernels
