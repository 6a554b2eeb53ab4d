// Full-sequence logits through the one Decoder, for model tests that compare two ways of
// loading or storing the same model (GGUF vs directory, quantized vs f32).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "lmstack/core/thread_pool.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/kv_cache.h"

namespace lmstack::model::test_logits {

// ||a - b|| / ||b||: the relative RMS error of `a` against the reference `b`.
inline double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(b[i]) * b[i];
  }
  return std::sqrt(e / n);
}

// rel_rms of each position's `vocab` logits, sorted: a quantized MoE model's error is a small
// one at most positions and a jump of order 1 at the few whose router top-k flipped under the
// rounding, so MoE tests bound the median and count the jumps instead of one overall RMS.
inline std::vector<double> sorted_position_errors(const std::vector<float>& a,
                                                  const std::vector<float>& b, size_t vocab) {
  std::vector<double> errs;
  for (size_t at = 0; at + vocab <= b.size(); at += vocab)
    errs.push_back(rel_rms(std::vector<float>(a.begin() + at, a.begin() + at + vocab),
                           std::vector<float>(b.begin() + at, b.begin() + at + vocab)));
  std::sort(errs.begin(), errs.end());
  return errs;
}

// Logits of every position of `tokens` as one sequence (16-token KV blocks, 2 threads).
inline std::vector<float> logits_of(const ModelConfig& c, const ModelWeights& w,
                                    const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  Decoder dec(c, w, pool);
  const int bs = 16, nb = (static_cast<int>(tokens.size()) + bs - 1) / bs;
  KvCache cache(c, nb, bs);
  std::vector<int32_t> blocks(static_cast<size_t>(nb));
  std::iota(blocks.begin(), blocks.end(), 0);
  ForwardBatch batch;
  batch.add_sequence(tokens, 0, blocks, bs, true, true);
  std::vector<float> logits;
  dec.forward(batch, cache, logits);
  return logits;
}

}  // namespace lmstack::model::test_logits
