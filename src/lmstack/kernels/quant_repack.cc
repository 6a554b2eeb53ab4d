// Q4_0 <-> Q4_0x16, Q4_K <-> Q4_Kx16 and Q6_K <-> Q6_Kx16 (quant_repack.h): byte permutations
// in the layouts quant_blocks.h describes.
#include "lmstack/kernels/quant_repack.h"

#include <cstring>

#include "lmstack/core/cpu_features.h"
#include "lmstack/core/error.h"
#include "lmstack/kernels/quant_blocks.h"

namespace lmstack::kernels {
namespace {

using qblock::kQ4_0Bytes;
using qblock::kQ4_0x16Rows;
using qblock::kQ4_KBytes;

// Per layout, the pieces of one plain block (Q4_0) or super-block (Q4_K, Q6_K) b of lane j, as
// emit(offset in the plain row, offset in the group, bytes); nb blocks (super-blocks) a row.
struct Q4_0Pieces {
  static constexpr int64_t kElements = 32, kBytes = kQ4_0Bytes;
  template <class Emit>
  static void each(int64_t nb, int64_t b, int j, const Emit& emit) {
    const int64_t blk = b * kQ4_0Bytes;
    emit(blk, qblock::q4_0x16_scales_at(nb, b) + 2 * j, 2);
    for (int v = 0; v < 4; ++v)  // code word v: plain bytes 2 + 4v..
      emit(blk + 2 + 4 * v, qblock::q4_0x16_codes_at(nb, b) + 64 * v + 4 * j, 4);
  }
};

struct Q4_KPieces {
  static constexpr int64_t kElements = 256, kBytes = kQ4_KBytes;
  template <class Emit>
  static void each(int64_t, int64_t s, int j, const Emit& emit) {
    const int64_t blk = s * kQ4_KBytes, at = s * qblock::kQ4_Kx16SuperBytes;
    emit(blk, at + 2 * j, 2);
    emit(blk + 2, at + qblock::kQ4_Kx16DminAt + 2 * j, 2);
    for (int t = 0; t < 12; ++t)
      emit(blk + qblock::kQ4_KScalesAt + t, at + qblock::kQ4_Kx16ScalesAt + 16 * t + j, 1);
    for (int p = 0; p < 4; ++p)
      for (int v = 0; v < 8; ++v)
        emit(blk + qblock::kQ4_KQsAt + 32 * p + 4 * v,
             at + qblock::kQ4_Kx16CodesAt + 512 * p + 64 * v + 4 * j, 4);
  }
};

struct Q6_KPieces {
  static constexpr int64_t kElements = 256, kBytes = qblock::kQ6_KBytes;
  template <class Emit>
  static void each(int64_t nsb, int64_t s, int j, const Emit& emit) {
    const int64_t blk = s * qblock::kQ6_KBytes;
    const int64_t header = qblock::q6_kx16_header_at(nsb, s);
    const int64_t codes = qblock::q6_kx16_codes_at(nsb, s);
    emit(blk + qblock::kQ6_KDAt, header + 2 * j, 2);
    for (int t = 0; t < 16; ++t)
      emit(blk + qblock::kQ6_KScalesAt + t, header + qblock::kQ6_Kx16ScalesAt + 16 * t + j, 1);
    for (int e = 0; e < 2; ++e)
      for (int v = 0; v < 8; ++v) {
        const int64_t at = codes + 1536 * e + 192 * v + 4 * j;
        emit(blk + 64 * e + 4 * v, at, 4);                            // ql, low nibbles c = 0, 2
        emit(blk + 64 * e + 32 + 4 * v, at + 64, 4);                  // ql, c = 1, 3
        emit(blk + qblock::kQ6_KQhAt + 32 * e + 4 * v, at + 128, 4);  // qh, two bits per c
      }
  }
};

// Calls move(plain_offset, packed_offset, bytes) for every piece of rows [row_begin, row_end):
// a row past the last full group whole (it stays plain), or per block a grouped row's pieces.
// Both directions of the permutation are this walk, copying one way or the other.
template <class Pieces, class Move>
void for_each_piece(int64_t n, int64_t k, int64_t row_begin, int64_t row_end, const Move& move) {
  const int64_t nb = k / Pieces::kElements, row_bytes = nb * Pieces::kBytes;
  const int64_t full = n / kQ4_0x16Rows * kQ4_0x16Rows;
  for (int64_t r = row_begin; r < row_end; ++r) {
    if (r >= full) {
      move(r * row_bytes, r * row_bytes, row_bytes);
      continue;
    }
    const int64_t group = (r - r % kQ4_0x16Rows) * row_bytes;
    const int j = static_cast<int>(r % kQ4_0x16Rows);
    for (int64_t b = 0; b < nb; ++b)
      Pieces::each(nb, b, j, [&](int64_t plain_at, int64_t packed_at, int64_t bytes) {
        move(r * row_bytes + plain_at, group + packed_at, bytes);
      });
  }
}

template <class Move>
void walk(DType t, int64_t n, int64_t k, int64_t row_begin, int64_t row_end, const Move& move) {
  if (t == DType::kQ4_0x16) return for_each_piece<Q4_0Pieces>(n, k, row_begin, row_end, move);
  if (t == DType::kQ4_Kx16) return for_each_piece<Q4_KPieces>(n, k, row_begin, row_end, move);
  LMSTACK_CHECK(t == DType::kQ6_Kx16, "x16 repack: {} is not an interleaved layout", dtype_name(t));
  for_each_piece<Q6_KPieces>(n, k, row_begin, row_end, move);
}

}  // namespace

DType x16_dtype_for(DType t) {
  for (DType x : {DType::kQ4_0x16, DType::kQ4_Kx16, DType::kQ6_Kx16})
    if (row_interleaved_base(x) == t) return x;
  return DType::kCount;
}

bool x16_pays_off(DType t) {
  if (x16_dtype_for(t) == DType::kCount) return false;
  return t != DType::kQ6_K || cpu_features().has_avx512();
}

void x16_rows_to_plain(DType t, const uint8_t* packed, int64_t n, int64_t k, int64_t row_begin,
                       int64_t row_end, uint8_t* plain) {
  const int64_t first = row_begin * dtype_bytes(t, k);  // plain holds rows from row_begin
  walk(t, n, k, row_begin, row_end, [&](int64_t at_plain, int64_t at_packed, int64_t bytes) {
    std::memcpy(plain + (at_plain - first), packed + at_packed, static_cast<size_t>(bytes));
  });
}

void repack_x16(DType t, const uint8_t* plain, int64_t n, int64_t k, uint8_t* packed) {
  walk(t, n, k, 0, n, [&](int64_t at_plain, int64_t at_packed, int64_t bytes) {
    std::memcpy(packed + at_packed, plain + at_plain, static_cast<size_t>(bytes));
  });
}

Tensor repack_x16(const Tensor& w, const Tensor& dst) {
  const DType t = x16_dtype_for(w.dtype());
  LMSTACK_CHECK(w.rank() == 2 && t != DType::kCount,
                "repack_x16: want a 2-D q4_0, q4_K or q6_K tensor, got {} {}",
                dtype_name(w.dtype()), w.shape().str());
  LMSTACK_CHECK(dst.nbytes() == w.nbytes() && !dst.is_mapped(),
                "repack_x16: destination of {} bytes for {} (writable, equal size)", dst.nbytes(),
                w.nbytes());
  Tensor out = dst.view(t, w.shape());
  repack_x16(t, static_cast<const uint8_t*>(w.raw_data()), w.dim(0), w.dim(1),
             static_cast<uint8_t*>(out.raw_data()));
  return out;
}

}  // namespace lmstack::kernels
