// Scalar block codecs behind quant.h's quantize_row / dequantize_row, one pair per type
// (quant.cc: q8_0, q4_0, int4_g*; quant_kquants.cc: q4_K, q6_K). n is a multiple of the
// type's block size (checked by the caller); dst holds dtype_bytes(t, n) bytes.
#pragma once

#include <cstdint>

namespace lmstack::kernels::qref {

void quantize_q8_0(const float* x, uint8_t* dst, int64_t n);
void dequantize_q8_0(const uint8_t* src, float* y, int64_t n);
void quantize_q4_0(const float* x, uint8_t* dst, int64_t n);
void dequantize_q4_0(const uint8_t* src, float* y, int64_t n);
void quantize_q4_k(const float* x, uint8_t* dst, int64_t n);
void dequantize_q4_k(const uint8_t* src, float* y, int64_t n);
void quantize_q6_k(const float* x, uint8_t* dst, int64_t n);
void dequantize_q6_k(const uint8_t* src, float* y, int64_t n);
void quantize_int4(int group, const float* x, uint8_t* dst, int64_t n);
void dequantize_int4(int group, const uint8_t* src, float* y, int64_t n);

// The smallest f16 >= v (v >= 0, finite), so a scale stored as f16 never shrinks the range
// it must cover.
uint16_t f16_round_up(float v);

}  // namespace lmstack::kernels::qref
