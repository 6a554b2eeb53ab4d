// Byte layouts of the block-quantized types, shared by the reference codec (quant.cc,
// quant_kquants.cc) and the optimized kernels. Q8_0, Q4_0, Q4_K and Q6_K are the block structs
// of ggml's ggml-common.h (GGUF); int4_g* is lmstack's (see core/dtype.h). Plain structs and
// constants only, so the ISA leaf files (*_avx512.cc) may include it.
#pragma once

#include <cstdint>
#include <cstring>

namespace lmstack::kernels::qblock {

// Q8_0: f16 d, then 32 int8; x = d * q.
inline constexpr int kQ8_0Bytes = 34;
// Q4_0: f16 d, then 16 bytes; byte j: element j (low nibble) and j + 16 (high); x = d(q - 8).
inline constexpr int kQ4_0Bytes = 18;
// Q4_K (256 elements): f16 d, f16 dmin, 12 bytes of 6-bit sub-scales/sub-mins (8 each), then
// 128 bytes of nibbles: byte 32p + l holds element 64p + l (low) and 64p + 32 + l (high).
// Sub-block j (32 elements): x = d * sc_j * q - dmin * m_j.
inline constexpr int kQ4_KBytes = 144;
inline constexpr int kQ4_KScalesAt = 4;
inline constexpr int kQ4_KQsAt = 16;
// Q6_K (256 elements): 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8
// sub-scales (one per 16 elements), f16 d; x = d * sc_(i/16) * (q - 32). For half h (128
// elements) and l < 32, with L = ql + 64h, H = qh + 32h:
//   element 128h + l      : L[l] & 15      | (H[l] >> 0 & 3) << 4
//   element 128h + l + 32 : L[l + 32] & 15 | (H[l] >> 2 & 3) << 4
//   element 128h + l + 64 : L[l] >> 4      | (H[l] >> 4 & 3) << 4
//   element 128h + l + 96 : L[l + 32] >> 4 | (H[l] >> 6 & 3) << 4
inline constexpr int kQ6_KBytes = 210;
inline constexpr int kQ6_KQhAt = 128;
inline constexpr int kQ6_KScalesAt = 192;
inline constexpr int kQ6_KDAt = 208;
// int4_g*: f16 scale, u8 zero, u8 pad, then g/32 chunks of 16 bytes laid out as Q4_0's;
// x = scale * (q - zero).
inline constexpr int kInt4HeaderBytes = 4;

// Q4_0x16 (DType::kQ4_0x16): Q4_0 rows interleaved so one 32-bit SIMD lane is one row
// (quant_repack.h makes it at load time; the decode GEMV reads it, quant_gemv_x16.h).
// A [n, k] matrix (nb = k / 32 blocks a row, row_bytes = 18 nb) holds n / 16 full groups of
// 16 rows, group g at byte 16 g row_bytes. Per block, 288 bytes: 16 f16 scales (row j's at
// 2 j, one 32-byte load) and 256 code bytes (word v < 4 at 64 v, row j at + 4 j holds bytes
// 4v..4v+3 of row j's plain 16 nibble bytes: low nibbles are elements 4v..4v+3, high nibbles
// 16+4v..16+4v+3: vpdpbusd's 4 codes per lane against 4 broadcast activations). Blocks go in
// pairs, 576 bytes each from 576 p: both blocks' scales (64 bytes), then both blocks' codes,
// so the code words stay 64-byte aligned and the whole group is one front-to-back stream for
// the hardware prefetcher (scales in a run of their own ahead of the codes were a second,
// short stream per group: decode read 1.3x slower from DRAM). An odd nb's last block stands
// alone after the pairs: its 32 scale bytes, then its codes.
// The n % 16 rows after the last full group stay plain Q4_0 rows, so the whole matrix takes
// exactly Q4_0's n * row_bytes bytes.
inline constexpr int kQ4_0x16Rows = 16;
inline constexpr int kQ4_0x16BlockCodeBytes = 16 * kQ4_0x16Rows;  // 256
inline constexpr int64_t kQ4_0x16PairBytes = 2 * (2 * kQ4_0x16Rows + kQ4_0x16BlockCodeBytes);

// Byte offsets of block b's 16 scales and of its 256 code bytes inside a group of nb blocks.
inline int64_t q4_0x16_scales_at(int64_t nb, int64_t b) {
  const int64_t pair = b / 2, base = pair * kQ4_0x16PairBytes;
  return 2 * pair + 1 < nb ? base + 2 * kQ4_0x16Rows * (b % 2) : base;
}
inline int64_t q4_0x16_codes_at(int64_t nb, int64_t b) {
  const int64_t pair = b / 2, base = pair * kQ4_0x16PairBytes;
  return 2 * pair + 1 < nb ? base + 4 * kQ4_0x16Rows + kQ4_0x16BlockCodeBytes * (b % 2)
                           : base + 2 * kQ4_0x16Rows;
}

// Q4_Kx16 (DType::kQ4_Kx16): Q4_K rows interleaved the same way, for its decode GEMV
// (quant_gemv_x16.h). A [n, k] matrix (nsb = k / 256 super-blocks a row) holds n / 16 full
// groups of 16 rows, group g at byte 16 g nsb 144; super-block s of the group at 2304 s:
//   [0, 32)      the 16 rows' f16 d (row j's at 2 j), one 32-byte load
//   [32, 64)     their f16 dmin
//   [64, 256)    the 12 packed 6-bit scale bytes: byte t of row j at 64 + 16 t + j, so byte
//                t of all rows is one 16-byte load, decoded for 16 lanes at once
//   [256, 2304)  the codes: chunk p < 4 (64 elements) word v < 8 row j at 256 + 512 p + 64 v
//                + 4 j holds row j's plain bytes qs[32 p + 4v .. + 3]: low nibbles are
//                sub-block 2p's elements 4v..4v+3, high nibbles sub-block 2p + 1's
// so each super-block is one front-to-back stream with its code words 64-byte aligned. The
// n % 16 rows after the last full group stay plain Q4_K rows (Q4_K's n * row_bytes bytes).
inline constexpr int64_t kQ4_Kx16SuperBytes = 16 * kQ4_KBytes;  // 2304
inline constexpr int kQ4_Kx16DminAt = 32;
inline constexpr int kQ4_Kx16ScalesAt = 64;
inline constexpr int kQ4_Kx16CodesAt = 256;

// Q6_Kx16 (DType::kQ6_Kx16): Q6_K rows interleaved the same way. Per super-block s of a group,
// a 288-byte header: the 16 rows' f16 d at 2 j, then the 16 int8 sub-scales, scale t of row j
// at 32 + 16 t + j; and 3072 code bytes: for element half e < 2 and word v < 8, at 1536 e +
// 192 v, three 64-byte vectors (row j at + 4 j) holding row j's plain ql[64e + 4v ..],
// ql[64e + 32 + 4v ..] and qh[32e + 4v ..] (4 bytes each), from which one vector each of the
// 6-bit codes of elements 128e + 32c + 4v.. (c < 4) decode (the Q6_K table above). Super-
// blocks go in pairs as Q4_0x16's blocks do, both headers (576 bytes) before both code runs, so
// the code vectors stay 64-byte aligned (3360 bytes a super-block is not a multiple of 64); an
// odd last one stands alone, header then codes.
inline constexpr int64_t kQ6_Kx16SuperBytes = 16 * kQ6_KBytes;  // 3360
inline constexpr int64_t kQ6_Kx16HeaderBytes = 32 + 16 * 16;    // 288
inline constexpr int kQ6_Kx16ScalesAt = 32;                     // in the header
inline int64_t q6_kx16_header_at(int64_t nsb, int64_t s) {
  const int64_t pair = s / 2, base = pair * 2 * kQ6_Kx16SuperBytes;
  return 2 * pair + 1 < nsb ? base + kQ6_Kx16HeaderBytes * (s % 2) : base;
}
inline int64_t q6_kx16_codes_at(int64_t nsb, int64_t s) {
  const int64_t pair = s / 2, base = pair * 2 * kQ6_Kx16SuperBytes;
  const int64_t codes = kQ6_Kx16SuperBytes - kQ6_Kx16HeaderBytes;
  return 2 * pair + 1 < nsb ? base + 2 * kQ6_Kx16HeaderBytes + codes * (s % 2)
                            : base + kQ6_Kx16HeaderBytes;
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Q4_K's packed 6-bit scale (sc) and min (m) of sub-block j < 8 from the 12 scale bytes.
inline void q4k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The 32 unsigned 6-bit codes (0..63, offset 32) of Q6_K's 32-element block j < 8 of the
// super-block at blk: element i of the 128-element half h = j / 4 is the low (parts 0, 1) or
// high (parts 2, 3) nibble of ql[64 h + 32 (part % 2) + i] with bits 2 part, 2 part + 1 of
// qh[32 h + i] above it, part = j % 4 (ggml's block_q6_K).
inline void q6k_codes(const uint8_t* blk, int j, uint8_t* code) {
  const int h = j / 4, part = j % 4;
  const uint8_t* ql = blk + 64 * h + 32 * (part % 2);
  const uint8_t* qh = blk + kQ6_KQhAt + 32 * h;
  for (int i = 0; i < 32; ++i) {
    const int low = part < 2 ? ql[i] & 15 : ql[i] >> 4;
    code[i] = static_cast<uint8_t>(low | ((qh[i] >> (2 * part)) & 3) << 4);
  }
}

// All eight (sc, m) pairs of a Q4_K super-block at once, as bytes j = 0..7 of *sc and *m:
// the same bits as q4k_scale_min, moved four sub-blocks at a time in 32-bit words (bytes 0-3
// of the scales hold sc 0-3 and the top bits of sc 4-7, bytes 4-7 m 0-3 and the top bits of
// m 4-7, bytes 8-11 the low nibbles of sc 4-7 and m 4-7).
inline void q4k_scales_mins(const uint8_t* s, uint64_t* sc, uint64_t* m) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t sc_lo = a & 0x3f3f3f3fu, m_lo = b & 0x3f3f3f3fu;
  const uint32_t sc_hi = (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4);
  *sc = uint64_t{sc_lo} | uint64_t{sc_hi} << 32;
  *m = uint64_t{m_lo} | uint64_t{m_hi} << 32;
}

}  // namespace lmstack::kernels::qblock
