// Reference linear layer: y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) (+ y[m, n]), one
// output at a time, accumulated in double. Block-quantized weights are dequantized row by row
// with quant.h's reference codec (so the truth is "dequantize, then an exact dot"). The truth for
// linear_test.cc; see ops.h for the contract and linear.cc for the fast paths.
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/quant.h"

namespace lmstack::kernels::ref {
namespace {

// Row n of w converted to f32 (w is f32, bf16 or f16, checked by the caller).
void weight_row(const Tensor& w, int64_t n, std::vector<float>& out) {
  const int64_t k = w.dim(1);
  if (is_quantized(w.dtype())) {
    dequantize_rows(w, n, n + 1, out.data());
    return;
  }
  for (int64_t i = 0; i < k; ++i) {
    const int64_t at = n * k + i;
    switch (w.dtype()) {
      case DType::kF32:
        out[static_cast<size_t>(i)] = w.data<float>()[at];
        break;
      case DType::kBF16:
        out[static_cast<size_t>(i)] = bf16_to_f32(w.data<uint16_t>()[at]);
        break;
      default:
        out[static_cast<size_t>(i)] = f16_to_f32(w.data<uint16_t>()[at]);
        break;
    }
  }
}

}  // namespace

void linear(float* y, const float* x, const Tensor& w, int64_t m, const float* bias,
            bool accumulate) {
  LMSTACK_CHECK(w.rank() == 2, "linear: weight must be 2-D, got {}", w.shape().str());
  const DType dt = w.dtype();
  LMSTACK_CHECK(is_row_codec_dtype(dt) || is_row_interleaved(dt),
                "linear: unsupported weight dtype {}", dtype_name(dt));
  const int64_t n_out = w.dim(0), k = w.dim(1);
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t n = 0; n < n_out; ++n) {
    weight_row(w, n, row);
    for (int64_t r = 0; r < m; ++r) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t i = 0; i < k; ++i)
        acc += static_cast<double>(x[r * k + i]) * row[static_cast<size_t>(i)];
      float& out = y[r * n_out + n];
      out = accumulate ? static_cast<float>(out + acc) : static_cast<float>(acc);
    }
  }
}

}  // namespace lmstack::kernels::ref
