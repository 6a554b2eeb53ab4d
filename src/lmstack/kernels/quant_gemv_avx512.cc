// AVX-512 builds of the quantized GEMV leaf kernels (quant_gemv_impl.h): one with VNNI's
// vpdpbusd, one with vpmaddubsw + vpmaddwd for AVX-512 CPUs without VNNI. Both run on 256-bit
// vectors (EVEX-encoded, 32 registers): the weight stream, not the ALUs, bounds decode.
#include "lmstack/kernels/quant_gemv.h"

#define QG_NS vnni
#define QG_VNNI 1
#include "lmstack/kernels/quant_gemv_impl.h"
#undef QG_NS
#undef QG_VNNI

#define QG_NS no_vnni
#define QG_VNNI 0
#include "lmstack/kernels/quant_gemv_impl.h"
#undef QG_NS
#undef QG_VNNI

namespace lmstack::kernels {

void quant_gemv_avx512_vnni(DType t, const void* w, int64_t n_begin, int64_t n_end,
                            const QuantizedRows& x, int64_t m, float* y, int64_t ldy,
                            const float* bias, bool accumulate) {
  vnni::gemv(t, w, n_begin, n_end, x, m, y, ldy, bias, accumulate);
}

void quant_gemv_avx512(DType t, const void* w, int64_t n_begin, int64_t n_end,
                       const QuantizedRows& x, int64_t m, float* y, int64_t ldy, const float* bias,
                       bool accumulate) {
  no_vnni::gemv(t, w, n_begin, n_end, x, m, y, ldy, bias, accumulate);
}

}  // namespace lmstack::kernels
