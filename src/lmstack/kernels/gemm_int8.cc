// The int8 prefill GEMM (gemm_int8.h): per-type block decoding into the panel layout, the
// scalar reference microkernel, and the threaded driver.
#include "lmstack/kernels/gemm_int8.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/quant_blocks.h"

namespace lmstack::kernels {
namespace {

// 32 signed codes and the scale/offset of block b of one weight row (gemm_int8.h's table); for
// half-scale types s/o are those of its first 16 elements and s2/o2 of the rest.
struct BlockCodes {
  int8_t code[32];
  float s, o, s2, o2;
};

// Q4_0's 16 bytes: element i < 16 in byte i's low nibble, i + 16 in its high nibble; less 8.
void q4_0_codes(const uint8_t* qs, int8_t* code) {
  for (int i = 0; i < 16; ++i) {
    code[i] = static_cast<int8_t>((qs[i] & 15) - 8);
    code[i + 16] = static_cast<int8_t>((qs[i] >> 4) - 8);
  }
}

BlockCodes decode_block(DType t, const uint8_t* row, int64_t b) {
  using namespace qblock;
  BlockCodes out{};
  switch (t) {
    case DType::kQ6_K: {
      const uint8_t* blk = row + (b / 8) * kQ6_KBytes;
      const int j = static_cast<int>(b % 8);
      uint8_t code[32];
      q6k_codes(blk, j, code);
      for (int i = 0; i < 32; ++i) out.code[i] = static_cast<int8_t>(code[i] - 32);
      const float d = f16_to_f32(load_u16(blk + kQ6_KDAt));
      const auto* sc = reinterpret_cast<const int8_t*>(blk + kQ6_KScalesAt);
      out.s = d * static_cast<float>(sc[2 * j]);
      out.s2 = d * static_cast<float>(sc[2 * j + 1]);
      break;
    }
    case DType::kQ8_0: {
      const uint8_t* blk = row + b * kQ8_0Bytes;
      const float d = f16_to_f32(load_u16(blk));
      std::memcpy(out.code, blk + 2, 32);
      out.s = d;
      break;
    }
    case DType::kQ4_0: {
      const uint8_t* blk = row + b * kQ4_0Bytes;
      const float d = f16_to_f32(load_u16(blk));
      q4_0_codes(blk + 2, out.code);
      out.s = d;
      break;
    }
    case DType::kQ4_K: {
      const uint8_t* blk = row + (b / 8) * kQ4_KBytes;
      const int j = static_cast<int>(b % 8);
      int sc = 0, mn = 0;
      q4k_scale_min(blk + kQ4_KScalesAt, j, &sc, &mn);
      const uint8_t* qs = blk + kQ4_KQsAt + 32 * (j / 2);  // 64 elements per 32 bytes
      for (int i = 0; i < 32; ++i)
        out.code[i] = static_cast<int8_t>((j % 2 ? qs[i] >> 4 : qs[i] & 15) - 8);
      out.s = f16_to_f32(load_u16(blk)) * static_cast<float>(sc);
      out.o = 8.0f * out.s - f16_to_f32(load_u16(blk + 2)) * static_cast<float>(mn);
      break;
    }
    default: {  // int4_g*: a header per group, then its 32-element chunks laid out as Q4_0's
      const int64_t group = dtype_info(t).block_size, chunks = group / 32;
      const uint8_t* grp = row + (b / chunks) * (kInt4HeaderBytes + group / 2);
      q4_0_codes(grp + kInt4HeaderBytes + 16 * (b % chunks), out.code);
      out.s = f16_to_f32(load_u16(grp));
      out.o = out.s * static_cast<float>(8 - grp[2]);
      break;
    }
  }
  return out;
}

// Each part's corrections, -128 * sum(codes), from the block's codes: the part's groups summed
// byte-wise first (a vector add per group; |sum| <= 8 x 128 fits int16), then each column's 4.
void set_corrections(uint8_t* pb, bool halves) {
  const int parts = halves ? 2 : 1, groups = 8 / parts;
  for (int h = 0; h < parts; ++h) {
    int16_t bytes[64] = {};
    for (int g = groups * h; g < groups * (h + 1); ++g)
      for (int i = 0; i < 64; ++i)
        bytes[i] = static_cast<int16_t>(bytes[i] + static_cast<int8_t>(pb[64 * g + i]));
    int32_t* corr = int8_part_corrections(pb, h);
    for (int c = 0; c < kInt8PanelCols; ++c)
      corr[c] = -128 * (bytes[4 * c] + bytes[4 * c + 1] + bytes[4 * c + 2] + bytes[4 * c + 3]);
  }
}

// The 16 rows of one Q4_0x16 group: per block its 4 words of 64 bytes hold, in lane c, bytes
// 4v..4v+3 of row c's nibbles, low nibbles elements 4v.., high ones 16 + 4v..: the panel's
// groups v and v + 4 (quant_blocks.h).
void pack_q4_0x16_group(const uint8_t* group, int64_t blocks, uint8_t* panel) {
  constexpr int kRows = qblock::kQ4_0x16Rows;
  static_assert(kRows == kInt8PanelCols && qblock::kQ4_0x16BlockCodeBytes == 16 * kRows);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* src = group + qblock::q4_0x16_codes_at(blocks, b);
    const uint8_t* scales = group + qblock::q4_0x16_scales_at(blocks, b);
    uint8_t* pb = panel + b * int8_panel_block_bytes(false);
    for (int i = 0; i < qblock::kQ4_0x16BlockCodeBytes; ++i) {
      pb[i] = static_cast<uint8_t>((src[i] & 15) - 8);
      pb[qblock::kQ4_0x16BlockCodeBytes + i] = static_cast<uint8_t>((src[i] >> 4) - 8);
    }
    for (int c = 0; c < kRows; ++c) {
      int8_part_scales(pb, 0)[c] = f16_to_f32(qblock::load_u16(scales + 2 * c));
      int8_part_offsets(pb, 0)[c] = 0.0f;
    }
    set_corrections(pb, false);
  }
}

// The 16 rows of one Q4_Kx16 group: chunk p's word v holds, in lane c, row c's code bytes
// 4v..4v+3 of sub-blocks 2p (low nibbles) and 2p + 1 (high): the panel's group v of those two
// blocks. Scales as decode_block's Q4_K case computes them, from each row's 12 scale bytes,
// gathered and decoded once per super-block.
void pack_q4_kx16_group(const uint8_t* group, int64_t blocks, uint8_t* panel) {
  using namespace qblock;
  static_assert(kQ4_0x16Rows == kInt8PanelCols);
  for (int64_t s = 0; s < blocks / 8; ++s) {
    const uint8_t* sb = group + s * kQ4_Kx16SuperBytes;
    float scale[8][kInt8PanelCols], offset[8][kInt8PanelCols];
    for (int c = 0; c < kInt8PanelCols; ++c) {
      uint8_t bytes[12];
      for (int t = 0; t < 12; ++t) bytes[t] = sb[kQ4_Kx16ScalesAt + 16 * t + c];
      const float d = f16_to_f32(load_u16(sb + 2 * c));
      const float dmin = f16_to_f32(load_u16(sb + kQ4_Kx16DminAt + 2 * c));
      for (int j = 0; j < 8; ++j) {
        int sc = 0, mn = 0;
        q4k_scale_min(bytes, j, &sc, &mn);
        scale[j][c] = d * static_cast<float>(sc);
        offset[j][c] = 8.0f * scale[j][c] - dmin * static_cast<float>(mn);
      }
    }
    for (int j = 0; j < 8; ++j) {
      uint8_t* pb = panel + (8 * s + j) * int8_panel_block_bytes(false);
      const uint8_t* words = sb + kQ4_Kx16CodesAt + 512 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int i = 0; i < 8 * 64; ++i) pb[i] = static_cast<uint8_t>(((words[i] >> shift) & 15) - 8);
      std::memcpy(int8_part_scales(pb, 0), scale[j], sizeof(scale[j]));
      std::memcpy(int8_part_offsets(pb, 0), offset[j], sizeof(offset[j]));
      set_corrections(pb, false);
    }
  }
}

// The 16 rows of one Q6_Kx16 group into half-scale panels: block j of super-block s is element
// half j / 4, element group c = j % 4, whose codes decode from each word's three vectors (the
// Q6_K table in quant_blocks.h); scales and offsets as decode_block's Q6_K case.
void pack_q6_kx16_group(const uint8_t* group, int64_t blocks, uint8_t* panel) {
  using namespace qblock;
  const int64_t nsb = blocks / 8, block_bytes = int8_panel_block_bytes(true);
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* header = group + q6_kx16_header_at(nsb, s);
    const uint8_t* codes = group + q6_kx16_codes_at(nsb, s);
    for (int j = 0; j < 8; ++j) {
      const int e = j / 4, c = j % 4;
      uint8_t* pb = panel + (8 * s + j) * block_bytes;
      for (int v = 0; v < 8; ++v) {
        const uint8_t* w = codes + 1536 * e + 192 * v;
        for (int i = 0; i < 64; ++i) {
          const uint8_t low = c % 2 ? w[64 + i] : w[i], high = w[128 + i];
          const int nibble = c < 2 ? low & 15 : low >> 4;
          pb[64 * v + i] = static_cast<uint8_t>((nibble | (((high >> (2 * c)) & 3) << 4)) - 32);
        }
      }
      for (int col = 0; col < kInt8PanelCols; ++col) {
        const float d = f16_to_f32(load_u16(header + 2 * col));
        const auto* sc = reinterpret_cast<const int8_t*>(header + kQ6_Kx16ScalesAt + col);
        for (int h = 0; h < 2; ++h) {
          int8_part_scales(pb, h)[col] = d * static_cast<float>(sc[16 * (2 * j + h)]);
          int8_part_offsets(pb, h)[col] = 0.0f;
        }
      }
      set_corrections(pb, true);
    }
  }
}

}  // namespace

bool int8_gemm_supports(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_0x16 || t == DType::kQ4_K ||
         t == DType::kQ4_Kx16 || t == DType::kQ6_K || t == DType::kQ6_Kx16 ||
         t == DType::kInt4G32 || t == DType::kInt4G64 || t == DType::kInt4G128;
}

Int8PanelKind int8_panel_kind(DType t) {
  Int8PanelKind kind;
  kind.halves = t == DType::kQ6_K || t == DType::kQ6_Kx16;
  kind.offsets = t == DType::kQ4_K || t == DType::kQ4_Kx16 || t == DType::kInt4G32 ||
                 t == DType::kInt4G64 || t == DType::kInt4G128;
  kind.wide = t == DType::kQ8_0;
  return kind;
}

void pack_int8_panel(DType t, const void* w, int64_t n, int64_t k, int64_t n0, uint8_t* panel) {
  const int64_t blocks = k / 32;
  const auto* wb = static_cast<const uint8_t*>(w);
  if (is_row_interleaved(t)) {  // full groups, then the n % 16 plain rows
    const DType base = row_interleaved_base(t);
    const int64_t row_bytes = dtype_bytes(base, k);
    const int64_t full = n / qblock::kQ4_0x16Rows * qblock::kQ4_0x16Rows;
    if (n0 < full && t == DType::kQ4_0x16)
      return pack_q4_0x16_group(wb + n0 * row_bytes, blocks, panel);
    if (n0 < full && t == DType::kQ4_Kx16)
      return pack_q4_kx16_group(wb + n0 * row_bytes, blocks, panel);
    if (n0 < full) return pack_q6_kx16_group(wb + n0 * row_bytes, blocks, panel);
    return pack_int8_panel(base, wb + full * row_bytes, n - full, k, n0 - full, panel);
  }
  const int64_t row_bytes = dtype_bytes(t, k);
  const bool halves = int8_panel_kind(t).halves;
  const int64_t block_bytes = int8_panel_block_bytes(halves);
  std::memset(panel, 0, static_cast<size_t>(blocks * block_bytes));
  for (int c = 0; c < kInt8PanelCols && n0 + c < n; ++c) {
    const uint8_t* row = wb + (n0 + c) * row_bytes;
    for (int64_t b = 0; b < blocks; ++b) {
      const BlockCodes bc = decode_block(t, row, b);
      uint8_t* pb = panel + b * block_bytes;
      for (int g = 0; g < 8; ++g) std::memcpy(pb + g * 64 + c * 4, bc.code + 4 * g, 4);
      int8_part_scales(pb, 0)[c] = bc.s;
      int8_part_offsets(pb, 0)[c] = bc.o;
      if (!halves) continue;
      int8_part_scales(pb, 1)[c] = bc.s2;
      int8_part_offsets(pb, 1)[c] = bc.o2;
    }
  }
  for (int64_t b = 0; b < blocks; ++b) set_corrections(panel + b * block_bytes, halves);
}

void int8_micro_ref(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel, float* c,
                    int64_t ldc, int nr, bool add, Int8PanelKind kind) {
  const int64_t blocks = x.k / 32;
  for (int r = 0; r < mr; ++r) {
    const int64_t row = row0 + r;
    for (int j = 0; j < nr; ++j) {
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* pb = panel + b * int8_panel_block_bytes(kind.halves);
        const float dx = x.d[row * blocks + b];
        // The whole block at once, or (half scales) elements [16 h, 16 h + 16) per half h.
        const int parts = kind.halves ? 2 : 1, len = 32 / parts;
        for (int h = 0; h < parts; ++h) {
          int32_t dot = int8_part_corrections(pb, h)[j];
          for (int i = h * len; i < (h + 1) * len; ++i)
            dot += static_cast<int8_t>(pb[(i / 4) * 64 + j * 4 + i % 4]) *
                   x.qu[row * x.k + 32 * b + i];
          const float xsum =
              kind.halves ? x.sum16[row * 2 * blocks + 2 * b + h] : x.sum32[row * blocks + b];
          acc += dx * int8_part_scales(pb, h)[j] * static_cast<float>(dot) +
                 int8_part_offsets(pb, h)[j] * xsum;
        }
      }
      c[r * ldc + j] = add ? c[r * ldc + j] + acc : acc;
    }
  }
}

void gemm_int8(Int8MicroFn* micro, ThreadPool& pool, float* y, const QuantizedRows& xq, int64_t m,
               DType t, const void* w, int64_t n, bool accumulate) {
  const int64_t k = xq.k;
  LMSTACK_CHECK(
      int8_gemm_supports(t) && k % 32 == 0 && k / 32 % (dtype_info(t).block_size / 32) == 0,
      "gemm_int8: unsupported weight {} with k {}", dtype_name(t), k);
  const int64_t panels = (n + kInt8PanelCols - 1) / kInt8PanelCols;
  const Int8PanelKind kind = int8_panel_kind(t);
  LMSTACK_CHECK(xq.qu, "gemm_int8: activations without their unsigned codes");
  pool.parallel_for(panels, [&](int64_t p0, int64_t p1) {
    thread_local std::vector<uint8_t> panel;
    panel.resize(static_cast<size_t>(k / 32 * int8_panel_block_bytes(kind.halves)));
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * kInt8PanelCols;
      const int nr = static_cast<int>(std::min<int64_t>(kInt8PanelCols, n - n0));
      pack_int8_panel(t, w, n, k, n0, panel.data());
      for (int64_t r0 = 0; r0 < m; r0 += kInt8MicroRows) {
        const int mr = static_cast<int>(std::min<int64_t>(kInt8MicroRows, m - r0));
        micro(xq, r0, mr, panel.data(), y + r0 * n + n0, n, nr, accumulate, kind);
      }
    }
  });
}

}  // namespace lmstack::kernels
