// Q4_0 <-> Q4_0x16 (quant_repack.h): byte permutations in the layout quant_blocks.h describes.
#include "lmstack/kernels/quant_repack.h"

#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/kernels/quant_blocks.h"

namespace lmstack::kernels {
namespace {

using qblock::kQ4_0Bytes;
using qblock::kQ4_0x16Rows;

// Byte offsets inside a group of 16 rows (nb blocks a row): row j's scale of block b, and its
// code word v of block b (4 bytes, plain bytes 2 + 4v.. of the block).
int64_t scale_at(int64_t nb, int64_t b, int j) { return qblock::q4_0x16_scales_at(nb, b) + 2 * j; }
int64_t word_at(int64_t nb, int64_t b, int v, int j) {
  return qblock::q4_0x16_codes_at(nb, b) + 64 * v + 4 * j;
}

// Whether row r of n sits in a full interleaved group, and that group's offset.
struct RowPlace {
  bool grouped;
  int64_t at;  // the group's byte offset, or the plain row's
  int j;       // lane within the group
};
RowPlace place(int64_t r, int64_t n, int64_t row_bytes) {
  const int64_t full = n / kQ4_0x16Rows * kQ4_0x16Rows;
  if (r >= full) return {false, r * row_bytes, 0};
  return {true, (r - r % kQ4_0x16Rows) * row_bytes, static_cast<int>(r % kQ4_0x16Rows)};
}

// Calls move(plain_offset, packed_offset, bytes) for every piece of rows [row_begin, row_end):
// a plain row's bytes whole, or per block a grouped row's scale and its four code words. Both
// directions of the permutation are this walk, copying one way or the other.
template <class Move>
void for_each_piece(int64_t n, int64_t k, int64_t row_begin, int64_t row_end, const Move& move) {
  const int64_t nb = k / 32, row_bytes = nb * kQ4_0Bytes;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const RowPlace p = place(r, n, row_bytes);
    if (!p.grouped) {
      move(r * row_bytes, p.at, row_bytes);
      continue;
    }
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t blk = r * row_bytes + b * kQ4_0Bytes;
      move(blk, p.at + scale_at(nb, b, p.j), 2);
      for (int v = 0; v < 4; ++v) move(blk + 2 + 4 * v, p.at + word_at(nb, b, v, p.j), 4);
    }
  }
}

}  // namespace

void q4_0x16_rows_to_q4_0(const uint8_t* packed, int64_t n, int64_t k, int64_t row_begin,
                          int64_t row_end, uint8_t* plain) {
  const int64_t first = row_begin * (k / 32 * kQ4_0Bytes);  // plain holds rows from row_begin
  for_each_piece(n, k, row_begin, row_end, [&](int64_t at_plain, int64_t at_packed, int64_t bytes) {
    std::memcpy(plain + (at_plain - first), packed + at_packed, static_cast<size_t>(bytes));
  });
}

void repack_q4_0x16(const uint8_t* plain, int64_t n, int64_t k, uint8_t* packed) {
  for_each_piece(n, k, 0, n, [&](int64_t at_plain, int64_t at_packed, int64_t bytes) {
    std::memcpy(packed + at_packed, plain + at_plain, static_cast<size_t>(bytes));
  });
}

Tensor repack_q4_0x16(const Tensor& w, const Tensor& dst) {
  LMSTACK_CHECK(w.rank() == 2 && w.dtype() == DType::kQ4_0,
                "repack_q4_0x16: want a 2-D q4_0 tensor, got {} {}", dtype_name(w.dtype()),
                w.shape().str());
  LMSTACK_CHECK(dst.nbytes() == w.nbytes() && !dst.is_mapped(),
                "repack_q4_0x16: destination of {} bytes for {} (writable, equal size)",
                dst.nbytes(), w.nbytes());
  Tensor out = dst.view(DType::kQ4_0x16, w.shape());
  repack_q4_0x16(static_cast<const uint8_t*>(w.raw_data()), w.dim(0), w.dim(1),
                 static_cast<uint8_t*>(out.raw_data()));
  return out;
}

}  // namespace lmstack::kernels
