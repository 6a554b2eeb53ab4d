// Causal self-attention over a dense batch, forward (saving the softmax) and backward. Legend:
// B sequences, T tokens, H query heads, Hkv kv heads, D head dim; query head h reads kv head
// h / (H / Hkv). Per (b, h): S = scale·Q·Kᵀ with S_tj = -inf for j > t (and for j <= t - W
// under a sliding window W, whose masked P_tj = 0 carry no gradient), P = softmax_rows(S),
// O = P·V. Backward (Vaswani et al. 2017; the FlashAttention paper's appendix B.2 form):
//   term 1  dV = Pᵀ·dO                      (summed over the heads sharing a kv head)
//   term 2  dP = dO·Vᵀ,  dS = P ⊙ (dP - rowsum(dP ⊙ P))     (softmax Jacobian)
//   term 3  dQ = scale·dS·K,  dK = scale·dSᵀ·Q  (dK summed over the heads sharing it)
// Work splits over (b, h) forward and (b, kv head) backward, so no two threads write one row.
#include <cmath>
#include <cstring>
#include <vector>

#include "lmstack/kernels/ops.h"
#include "lmstack/train/backward/backward.h"

namespace lmstack::train {
namespace {

struct Strides {
  int64_t q_row, kv_row;  // floats per token row of q and of k/v
};

Strides strides_of(const AttentionDims& d) {
  return {static_cast<int64_t>(d.heads) * d.head_dim,
          static_cast<int64_t>(d.kv_heads) * d.head_dim};
}

// One (b, h): fills probs[T, T] and out rows.
void attention_head_forward(float* out, float* probs, const float* q, const float* k,
                            const float* v, const AttentionDims& d, int64_t b, int h) {
  const Strides s = strides_of(d);
  const int dh = d.head_dim;
  const int kvh = h / (d.heads / d.kv_heads);
  const int64_t base = b * d.seq;
  for (int64_t t = 0; t < d.seq; ++t) {
    const float* qt = q + (base + t) * s.q_row + h * dh;
    float* p = probs + t * d.seq;
    const int64_t first = kernels::attention_window_start(t, d.window);
    for (int64_t j = 0; j < first; ++j) p[j] = 0;
    float mx = -INFINITY;
    for (int64_t j = first; j <= t; ++j) {
      const float* kj = k + (base + j) * s.kv_row + kvh * dh;
      float dot = 0;
      for (int i = 0; i < dh; ++i) dot += qt[i] * kj[i];
      p[j] = dot * d.scale;
      mx = p[j] > mx ? p[j] : mx;
    }
    double sum = 0;
    for (int64_t j = first; j <= t; ++j) {
      p[j] = std::exp(p[j] - mx);
      sum += p[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = first; j <= t; ++j) p[j] *= inv;
    for (int64_t j = t + 1; j < d.seq; ++j) p[j] = 0;
    float* ot = out + (base + t) * s.q_row + h * dh;
    std::memset(ot, 0, sizeof(float) * static_cast<size_t>(dh));
    for (int64_t j = first; j <= t; ++j) {
      const float* vj = v + (base + j) * s.kv_row + kvh * dh;
      for (int i = 0; i < dh; ++i) ot[i] += p[j] * vj[i];
    }
  }
}

// One (b, h) of the backward, accumulating into this head's kv rows of dk and dv.
void attention_head_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                             const float* k, const float* v, const float* probs,
                             const AttentionDims& d, int64_t b, int h, std::vector<float>& dp) {
  const Strides s = strides_of(d);
  const int dh = d.head_dim;
  const int kvh = h / (d.heads / d.kv_heads);
  const int64_t base = b * d.seq;
  for (int64_t t = 0; t < d.seq; ++t) {
    const float* p = probs + t * d.seq;
    const float* dot_ = dout + (base + t) * s.q_row + h * dh;
    const float* qt = q + (base + t) * s.q_row + h * dh;
    float* dqt = dq + (base + t) * s.q_row + h * dh;
    const int64_t first = kernels::attention_window_start(t, d.window);
    double row = 0;
    for (int64_t j = first; j <= t; ++j) {
      const float* vj = v + (base + j) * s.kv_row + kvh * dh;
      float* dvj = dv + (base + j) * s.kv_row + kvh * dh;
      float acc = 0;
      for (int i = 0; i < dh; ++i) {
        acc += dot_[i] * vj[i];
        dvj[i] += p[j] * dot_[i];
      }
      dp[static_cast<size_t>(j)] = acc;
      row += static_cast<double>(acc) * p[j];
    }
    const float rowf = static_cast<float>(row);
    for (int64_t j = first; j <= t; ++j) {
      const float ds = p[j] * (dp[static_cast<size_t>(j)] - rowf) * d.scale;
      const float* kj = k + (base + j) * s.kv_row + kvh * dh;
      float* dkj = dk + (base + j) * s.kv_row + kvh * dh;
      for (int i = 0; i < dh; ++i) {
        dqt[i] += ds * kj[i];
        dkj[i] += ds * qt[i];
      }
    }
  }
}

}  // namespace

void attention_forward(ThreadPool& pool, float* out, float* probs, const float* q, const float* k,
                       const float* v, const AttentionDims& d) {
  const int64_t tt = d.seq * d.seq;
  pool.parallel_for(d.batch * d.heads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / d.heads;
      const int h = static_cast<int>(i % d.heads);
      attention_head_forward(out, probs + i * tt, q, k, v, d, b, h);
    }
  });
}

void attention_backward(ThreadPool& pool, float* dq, float* dk, float* dv, const float* dout,
                        const float* q, const float* k, const float* v, const float* probs,
                        const AttentionDims& d) {
  const Strides s = strides_of(d);
  const int group = d.heads / d.kv_heads;
  const int64_t tt = d.seq * d.seq;
  const size_t dh_bytes = sizeof(float) * static_cast<size_t>(d.head_dim);
  pool.parallel_for(d.batch * d.kv_heads, [&](int64_t begin, int64_t end) {
    std::vector<float> dp(static_cast<size_t>(d.seq));
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / d.kv_heads;
      const int kvh = static_cast<int>(i % d.kv_heads);
      for (int64_t t = 0; t < d.seq; ++t) {
        const int64_t r = b * d.seq + t;
        std::memset(dk + r * s.kv_row + kvh * d.head_dim, 0, dh_bytes);
        std::memset(dv + r * s.kv_row + kvh * d.head_dim, 0, dh_bytes);
        for (int g = 0; g < group; ++g)
          std::memset(dq + r * s.q_row + (kvh * group + g) * d.head_dim, 0, dh_bytes);
      }
      for (int g = 0; g < group; ++g) {
        const int h = kvh * group + g;
        attention_head_backward(dq, dk, dv, dout, q, k, v, probs + (b * d.heads + h) * tt, d, b, h,
                                dp);
      }
    }
  });
}

}  // namespace lmstack::train
