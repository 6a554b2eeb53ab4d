// The per-ISA inner loops of flash attention (attention_flash.cc drives them): scores of a
// tile of query rows against a chunk of gathered keys, the online-softmax update of one row,
// and the P·V accumulation. Raw pointers only, so the AVX-512 set can live in
// attention_avx512.cc and the AVX2 set in attention_avx2.cc.
// Legend: R query rows of a tile (query × head pairs sharing one kv head), N keys of a chunk,
// D head dim.
#pragma once

#include <cstdint>

namespace lmstack::kernels {

struct AttentionLeaf {
  // s[r·ld_s + j] = dot(q[r·D ..], k[j][..]) for r < rows, j < n.
  void (*scores)(float* s, int64_t ld_s, const float* q, int rows, const float* const* k, int n,
                 int d);
  // Online softmax (Milakov & Gimelshein 2018) of one row of n scores of which the first
  // n_valid are unmasked: with m the running max and l the running sum, sets
  // m' = max(m, s[:n_valid]), s[j] = e^(s[j] - m') (0 for j >= n_valid), l' = l·e^(m - m') +
  // Σ s[j], and returns alpha = e^(m - m'), the factor that rescales the row's accumulator.
  float (*softmax_row)(float* s, int n_valid, int n, float* m, float* l);
  // o[r·D + e] = alpha[r]·o[r·D + e] + Σ_j p[r·ld_p + j]·v[j][e] for r < rows, j < n.
  void (*accumulate)(float* o, const float* alpha, const float* p, int64_t ld_p, int rows,
                     const float* const* v, int n, int d);
  // scores and accumulate reading rows of a bf16 pool in place, widening in registers (exact,
  // so the results equal widening first): decode's few rows per kv head read each K/V row
  // once, and a widened copy of the chunk (2·kChunk·D floats) would not fit in L1.
  void (*scores_bf16)(float* s, int64_t ld_s, const float* q, int rows, const uint16_t* const* k,
                      int n, int d);
  void (*accumulate_bf16)(float* o, const float* alpha, const float* p, int64_t ld_p, int rows,
                          const uint16_t* const* v, int n, int d);
  // n KV rows of a bf16 or int8 pool widened to f32 for the loops above, into dst[n, d]:
  // dst[j·d + e] = bf16 rows[j][e] (exact), or float(rows[j][e]) · scales[j] (one rounding,
  // the arithmetic of kv_read_row, so every variant sees the reference's values).
  void (*load_bf16)(float* dst, const uint16_t* const* rows, int n, int d);
  void (*load_i8)(float* dst, const int8_t* const* rows, const float* scales, int n, int d);
};

void attention_scores_avx512(float* s, int64_t ld_s, const float* q, int rows,
                             const float* const* k, int n, int d);
float attention_softmax_row_avx512(float* s, int n_valid, int n, float* m, float* l);
void attention_accumulate_avx512(float* o, const float* alpha, const float* p, int64_t ld_p,
                                 int rows, const float* const* v, int n, int d);
void attention_scores_bf16_avx512(float* s, int64_t ld_s, const float* q, int rows,
                                  const uint16_t* const* k, int n, int d);
void attention_accumulate_bf16_avx512(float* o, const float* alpha, const float* p, int64_t ld_p,
                                      int rows, const uint16_t* const* v, int n, int d);

void kv_load_bf16_avx512(float* dst, const uint16_t* const* rows, int n, int d);
void kv_load_i8_avx512(float* dst, const int8_t* const* rows, const float* scales, int n, int d);

void attention_scores_avx2(float* s, int64_t ld_s, const float* q, int rows, const float* const* k,
                           int n, int d);
float attention_softmax_row_avx2(float* s, int n_valid, int n, float* m, float* l);
void attention_accumulate_avx2(float* o, const float* alpha, const float* p, int64_t ld_p, int rows,
                               const float* const* v, int n, int d);
void attention_scores_bf16_avx2(float* s, int64_t ld_s, const float* q, int rows,
                                const uint16_t* const* k, int n, int d);
void attention_accumulate_bf16_avx2(float* o, const float* alpha, const float* p, int64_t ld_p,
                                    int rows, const uint16_t* const* v, int n, int d);

void kv_load_bf16_avx2(float* dst, const uint16_t* const* rows, int n, int d);
void kv_load_i8_avx2(float* dst, const int8_t* const* rows, const float* scales, int n, int d);

}  // namespace lmstack::kernels
