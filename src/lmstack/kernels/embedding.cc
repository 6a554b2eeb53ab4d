// Token embedding lookup: copies (and widens bf16/f16 to f32, or dequantizes a block-quantized
// row with quant.h's codec) one table row per token id,
// rejecting ids outside the vocabulary with a RequestError that names the id and position.
// A copy per row is already memory-bound, so there is one implementation and no table.
// The backward scatters gradient rows back, accumulating for repeated ids.
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/quant.h"

namespace lmstack::kernels {

void embedding_lookup(float* out, const Tensor& table, const int32_t* ids, int64_t tokens) {
  LMSTACK_CHECK(table.rank() == 2, "embedding table must be 2-D, got {}", table.shape().str());
  const int64_t vocab = table.dim(0), width = table.dim(1);
  for (int64_t t = 0; t < tokens; ++t)
    if (ids[t] < 0 || ids[t] >= vocab)
      throw_error<RequestError>("token id {} at position {} is outside the vocabulary [0, {})",
                                ids[t], t, vocab);
  for (int64_t t = 0; t < tokens; ++t) {
    float* dst = out + t * width;
    const int64_t row = ids[t];
    switch (table.dtype()) {
      case DType::kF32:
        std::memcpy(dst, table.data<float>() + row * width, static_cast<size_t>(width) * 4);
        break;
      case DType::kBF16:
        convert_bf16_to_f32(table.data<uint16_t>() + row * width, dst, width);
        break;
      case DType::kF16:
        convert_f16_to_f32(table.data<uint16_t>() + row * width, dst, width);
        break;
      default:
        // q4_0x16 / q4_Kx16 / q6_Kx16: a tied lm_head repacked for decode (quant_repack.h);
        // dequantize_rows reads it.
        if (!is_row_codec_dtype(table.dtype()) && !is_row_interleaved(table.dtype()))
          throw_error<ConfigError>(
              "embedding table dtype {} is not supported (f32, bf16, f16, block-quantized)",
              dtype_name(table.dtype()));
        dequantize_rows(table, row, row + 1, dst);
        break;
    }
  }
}

void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t tokens,
                        int64_t vocab, int64_t width) {
  for (int64_t t = 0; t < tokens; ++t) {
    LMSTACK_CHECK(ids[t] >= 0 && ids[t] < vocab, "token id {} at position {} outside [0, {})",
                  ids[t], t, vocab);
    float* row = dtable + int64_t{ids[t]} * width;
    for (int64_t c = 0; c < width; ++c) row[c] += dout[t * width + c];
  }
}

}  // namespace lmstack::kernels
