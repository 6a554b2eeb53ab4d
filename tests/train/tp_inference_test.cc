// Tensor-parallel inference against the unsplit decoder, in one process (ranks are threads over
// dist's LocalComm, so the same code runs under ASan): tiny random models at T = 2 (KV heads
// divided) and T = 4 (KV heads replicated: 2 KV heads), llama, mistral (MQA, replicated), qwen2
// (q/k/v biases, tied embeddings), qwen3 (q/k norms) and gpt2 (LayerNorm, GELU, all biases,
// learned positions). A batch of two sequences runs a prefill (every row's logits for one of
// them), a chunked step and three decode steps; every rank's logits equal the unsplit ones
// within 2e-5 of the logits' max magnitude (f32: the all-reduces regroup the sums over heads and
// the MLP's columns; the measured worst is ~1e-6 of it). Also: slices hold 1/T of the matrices,
// the KV cache 1/T of the bytes, and unsupported models are refused naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <mutex>

#include "lmstack/core/error.h"
#include "lmstack/dist/comm_local.h"
#include "lmstack/model/init_model.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/presets.h"
#include "lmstack/model/tp_inference.h"
#include "lmstack/train/tensor_parallel.h"
#include "test_util.h"

namespace lmstack::train {
namespace {

using model::ForwardBatch;

model::ModelDir tiny_model(const std::string& preset, DType dtype = DType::kF32) {
  model::InitModelOptions o;
  o.config = model::ModelConfig::from_json(model::find_model_preset(preset, "").config, preset);
  o.config.dtype = dtype;
  o.out_dir = test::temp_dir("tp_infer_" + preset + "_" + std::string(dtype_name(dtype)));
  o.seed = 7;
  o.stddev = 0.2f;  // large enough that the logits are far from uniform
  o.num_threads = 1;
  model::init_model(o);
  return model::load_model_dir(o.out_dir);
}

// The steps of the test: two sequences, 5 and 3 prompt tokens, then 2 and 1 more (chunked),
// then three decode steps of both. Token ids are fixed (not sampled), so a mismatch in one step
// cannot change the next step's input.
std::vector<std::vector<float>> run_steps(const model::ModelConfig& c, const model::ModelWeights& w,
                                          const model::TensorParallelGroup& g) {
  ThreadPool pool(1);
  model::Decoder decoder(c, w, pool);
  decoder.set_tensor_parallel(g);
  const int bs = 4;
  model::KvCache cache(c, 8, bs);
  const std::vector<int32_t> blocks_a{0, 1, 2}, blocks_b{3, 4, 5};
  const int v = decoder.vocab_size();
  const auto tok = [v](int i) { return static_cast<int32_t>((i * 37 + 11) % v); };
  std::vector<std::vector<float>> out;
  std::vector<float> logits;
  int len_a = 0, len_b = 0, next = 0;
  const auto step = [&](int new_a, int new_b, bool all_a) {
    ForwardBatch b;
    std::vector<int32_t> ta, tb;
    for (int i = 0; i < new_a; ++i) ta.push_back(tok(next++));
    for (int i = 0; i < new_b; ++i) tb.push_back(tok(next++));
    b.add_sequence(ta, len_a, blocks_a, bs, true, all_a);
    b.add_sequence(tb, len_b, blocks_b, bs, true);
    len_a += new_a, len_b += new_b;
    decoder.forward(b, cache, logits);
    out.push_back(logits);
  };
  step(5, 3, true);
  step(2, 1, false);
  for (int i = 0; i < 3; ++i) step(1, 1, false);
  return out;
}

void tp_matches(const std::string& preset, int tp, DType dtype = DType::kF32) {
  const model::ModelDir md = tiny_model(preset, dtype);
  const std::vector<std::vector<float>> want = run_steps(md.config, md.weights, {});
  std::mutex mu;
  std::vector<std::vector<std::vector<float>>> have(static_cast<size_t>(tp));
  std::vector<int64_t> weight_bytes(static_cast<size_t>(tp)), kv_bytes(static_cast<size_t>(tp));
  dist::run_local(tp, [&](dist::Comm& comm) {
    const model::TpShard s = model::tp_shard(md.config, md.weights, tp, comm.rank());
    std::vector<std::vector<float>> mine = run_steps(s.config, s.weights, tp_group_of(comm));
    const std::lock_guard<std::mutex> lock(mu);
    const auto r = static_cast<size_t>(comm.rank());
    have[r] = std::move(mine);
    weight_bytes[r] = s.weights.bytes();
    kv_bytes[r] = model::KvCache(s.config, 8, 4).bytes();
  });
  double worst = 0;
  for (int r = 0; r < tp; ++r) {
    ASSERT_EQ(have[static_cast<size_t>(r)].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const std::vector<float>& h = have[static_cast<size_t>(r)][i];
      const double scale = test::max_abs(want[i]);
      EXPECT_TRUE(test::all_close(h, want[i], 0, 2e-5 * scale))
          << preset << " tp " << tp << " rank " << r << " step " << i;
      for (size_t k = 0; k < h.size() && h.size() == want[i].size(); ++k)
        worst = std::max(worst, std::abs(h[k] - want[i][k]) / scale);
    }
  }
  std::cout << preset << " tp " << tp << ": worst |logit - unsplit| / max |logit| = " << worst
            << "\n";
  // Bytes per rank: the replicated tensors whole, the KV projections by the rank's KV heads,
  // everything else 1/T.
  const model::ModelConfig& c = md.config;
  const int kv_per_rank = c.num_kv_heads % tp == 0 ? c.num_kv_heads / tp : 1;
  const int64_t kv_whole = model::KvCache(c, 8, 4).bytes();
  EXPECT_EQ(kv_bytes[0], kv_whole / c.num_kv_heads * kv_per_rank);
  const auto sum = [](std::initializer_list<const Tensor*> ts) {
    int64_t n = 0;
    for (const Tensor* t : ts) n += t->defined() ? t->nbytes() : 0;
    return n;
  };
  const model::ModelWeights& w = md.weights;
  int64_t replicated = sum({&w.pos_embed, &w.final_norm, &w.final_norm_bias}), kv = 0;
  for (const model::LayerWeights& l : w.layers) {
    replicated += sum({&l.attn_norm, &l.attn_norm_bias, &l.mlp_norm, &l.mlp_norm_bias, &l.q_norm,
                       &l.k_norm, &l.bo, &l.b_down});
    kv += sum({&l.wk, &l.wv, &l.bk, &l.bv});
  }
  const int64_t rest = w.bytes() - replicated - kv;
  EXPECT_EQ(weight_bytes[0], replicated + rest / tp + kv / c.num_kv_heads * kv_per_rank) << preset;
}

TEST(TpInference, LlamaTp2KvHeadsDivided) { tp_matches("tiny-llama", 2); }
TEST(TpInference, LlamaTp4KvHeadsReplicated) { tp_matches("tiny-llama", 4); }
TEST(TpInference, LlamaBf16Tp2) { tp_matches("tiny-llama", 2, DType::kBF16); }
TEST(TpInference, MistralMqaTp2) { tp_matches("tiny-mistral", 2); }
TEST(TpInference, Qwen2BiasesTiedTp2) { tp_matches("tiny-qwen2", 2); }
TEST(TpInference, Qwen3QkNormTp2) { tp_matches("tiny-qwen3", 2); }
TEST(TpInference, Gpt2Tp2) { tp_matches("tiny-gpt2", 2); }

TEST(TpInference, RefusesWhatItCannotSplit) {
  const model::ModelDir md = tiny_model("tiny-llama");
  const auto message = [&](const model::ModelConfig& c, int tp) {
    try {
      model::check_tp_inference_config(c, tp);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(md.config, 3).find("num_attention_heads"), std::string::npos);
  model::ModelConfig c = md.config;
  c.num_heads = 6, c.num_kv_heads = 3;
  EXPECT_NE(message(c, 2).find("num_key_value_heads"), std::string::npos);
  c = md.config, c.vocab_size = 511;
  EXPECT_NE(message(c, 2).find("vocab_size"), std::string::npos);
  c = md.config, c.intermediate_size = 162;
  EXPECT_NE(message(c, 4).find("intermediate_size"), std::string::npos);
  c = md.config, c.moe.num_experts = 4;
  EXPECT_NE(message(c, 2).find("num_experts"), std::string::npos);
  c = md.config, c.mla.kv_lora_rank = 16;
  EXPECT_NE(message(c, 2).find("kv_lora_rank"), std::string::npos);
  EXPECT_EQ(message(md.config, 2), "accepted");
}

}  // namespace
}  // namespace lmstack::train
