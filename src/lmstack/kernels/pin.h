// pin(v): v, opaque to the optimizer (an empty asm that claims to read and write its register).
// For the few hot loops where GCC's rewrites cost more than they save: it reassociates integer
// SIMD sums into trees over every product of a loop, keeping them all live and spilling
// (gemm_int8_avx2.cc, quant_gemv_x16.h), and folds a value loaded once into each of its uses as
// a memory operand, loading it again per use (attention_avx2.cc). pin costs no instruction.
#pragma once

namespace lmstack::kernels {

template <typename V>
inline V pin(V v) {
  asm("" : "+v"(v));
  return v;
}

}  // namespace lmstack::kernels
