// calc's per-rank predictions for a TP/PP training log, by hand for the tiny test llama
// (C 32, H 4, Hkv 2, D 8, F 64, V 64, 2 layers) at tp 2, micro-batch 2 x seq 8 (N = 16 tokens),
// m = 2 micro-batches:
//   weights per rank: a layer 2·32 (norms) + 2·(16·32) (Q, O: 2 heads of 8) + 2·(8·32) (K, V:
//   one KV head) + 3·32·32 (gate, up, down: 32 columns) = 4672 floats; 2 layers, the embedding
//   and lm_head 32·32 each, the final norm 32: 11424 floats = 45696 B.
//   TP: per micro-batch (4·2 + 1 + 1) all-reduces of 16·32·4 = 2048 B at 2(T-1)/T = 1, plus the
//   cross-entropy's 3·16 floats: 20480 + 192 = 20672 B; x 2 = 41344 B.
//   pp 2 (tp 1, one layer per stage): stage 0 sends 2 activations of 2048 B, stage 1 2
//   gradients.
#include "lmstack/calc/parallel_check.h"

#include <gtest/gtest.h>

namespace lmstack::calc {
namespace {

ModelShape tiny() {
  ModelShape m;
  m.name = "tiny";
  m.vocab_size = 64, m.hidden_size = 32, m.num_layers = 2, m.num_heads = 4, m.num_kv_heads = 2;
  m.head_dim = 8, m.intermediate_size = 64, m.max_position = 64;
  return m;
}

Json parallel(int pp, std::vector<int> layers) {
  return {{"chunks", 1},
          {"micro_batches", 2},
          {"layers_per_stage", layers},
          {"stages", pp},
          {"bubble_formula", (pp - 1) / 2.0},
          {"bubble_measured", 0.5},
          {"ranks", Json::array()}};
}

TEST(ParallelCheck, TensorParallelByHand) {
  RunSetup s;
  s.tp = 2, s.micro_batch = 2, s.seq = 8;
  const ParallelRank r = predict_parallel_rank(tiny(), s, parallel(1, {2}), 0);
  EXPECT_DOUBLE_EQ(r.weights_bytes, 45696);
  EXPECT_DOUBLE_EQ(r.tp_bytes, 41344);
  EXPECT_DOUBLE_EQ(r.pp_bytes, 0);
  EXPECT_DOUBLE_EQ(r.dp_bytes, 0);
}

TEST(ParallelCheck, PipelineByHand) {
  RunSetup s;
  s.pp = 2, s.dp = 2, s.micro_batch = 2, s.seq = 8;
  const Json p = parallel(2, {1, 1});
  const ParallelRank first = predict_parallel_rank(tiny(), s, p, 0);
  const ParallelRank last = predict_parallel_rank(tiny(), s, p, 1);
  EXPECT_DOUBLE_EQ(first.pp_bytes, 2 * 2048);
  EXPECT_DOUBLE_EQ(last.pp_bytes, 2 * 2048);
  // tp 1: a layer is 2·32 + 2·1024 + 2·512 + 3·2048 = 9280 floats; stage 0 adds the
  // embedding (2048), stage 1 the final norm and lm_head (32 + 2048); DP ring 2(2-1)/2 = 1.
  EXPECT_DOUBLE_EQ(first.weights_bytes, 4 * (9280 + 2048));
  EXPECT_DOUBLE_EQ(last.weights_bytes, 4 * (9280 + 2080));
  EXPECT_DOUBLE_EQ(first.dp_bytes, first.weights_bytes);
}

}  // namespace
}  // namespace lmstack::calc
