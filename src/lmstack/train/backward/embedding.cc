// Backward of an embedding lookup out[t, :] = table[ids[t], :]. Each output row is a copy of
// one table row, so ∂L/∂table[v, :] = Σ_{t: ids[t] = v} dout[t, :]: a scatter-add. Rows with
// repeated ids add into the same row, so this runs serially over tokens (it is O(T·C), tiny
// next to the matmuls). The same kernel serves GPT-2's learned positions (ids = positions).
#include "lmstack/train/backward/backward.h"

namespace lmstack::train {

void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t tokens,
                        int64_t dim) {
  for (int64_t t = 0; t < tokens; ++t) {
    float* row = dtable + static_cast<int64_t>(ids[t]) * dim;
    const float* g = dout + t * dim;
    for (int64_t i = 0; i < dim; ++i) row[i] += g[i];
  }
}

}  // namespace lmstack::train
