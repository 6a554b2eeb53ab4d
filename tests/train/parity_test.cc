// Training parity with PyTorch (tools/ref/gen_train_parity.py, float64 autograd): for tiny
// llama (GQA, untied), qwen2 (q/k/v biases, tied) and gpt2 (LayerNorm, learned positions,
// GELU, Conv1D, tied) models, the per-tensor gradients of step 1, the losses of 20 AdamW steps
// (with clipping, accumulation and warmup + cosine) and the final weights match. Recompute
// must give the very same bits; bf16 compute stays within bf16's precision; a model written
// after training gives the same logits in the inference Decoder. Sliding-window models
// (Mistral window 8 on every layer, Qwen2 window 8 on layer 1; tools/ref/gen_hf_compat.py)
// give transformers' own loss and gradients over 40-token windows.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "lmstack/core/json.h"
#include "lmstack/core/npy.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/model_train.h"
#include "test_util.h"

namespace lmstack::train {
namespace {

const char* kRegenerate = "regenerate: /usr/bin/python3 tools/ref/gen_train_parity.py --arch ";

struct RunResult {
  std::vector<float> losses;
  std::vector<std::pair<std::string, Tensor>> grads1, final_weights;
};

RunResult run_training(const std::string& arch, TrainModelOptions options, int max_steps = 0) {
  const std::string dir = test::source_path("tests/data/train/" + arch);
  const model::ModelDir md = model::load_model_dir(dir + "/model");
  const Json hp = read_json_file(dir + "/hparams.json");
  const NpyArray tokens = read_npy(dir + "/tokens.npy");
  const int steps = max_steps > 0 ? max_steps : hp["steps"].get<int>(), accum = hp["accum"],
            batch = hp["batch"], seq = hp["seq"];
  ThreadPool pool(2);
  TrainModel model(md.config, md.weights, pool, options);
  AdamW opt(model.params(), {hp["beta1"], hp["beta2"], hp["eps"], hp["weight_decay"]});
  const LrConfig lr{hp["lr"], hp["min_lr"], hp["warmup"], hp["steps"], LrSchedule::kCosine};
  RunResult r;
  std::vector<int32_t> in(static_cast<size_t>(batch * seq)), tg(in.size());
  const float scale = 1.0f / static_cast<float>(batch * seq * accum);
  for (int s = 0; s < steps; ++s) {
    model.zero_grads();
    double loss = 0;
    for (int m = 0; m < accum; ++m) {
      const int32_t* w = &tokens.i32[static_cast<size_t>(((s * accum + m) * batch) * (seq + 1))];
      for (int b = 0; b < batch; ++b)
        for (int t = 0; t < seq; ++t) {
          in[static_cast<size_t>(b * seq + t)] = w[b * (seq + 1) + t];
          tg[static_cast<size_t>(b * seq + t)] = w[b * (seq + 1) + t + 1];
        }
      loss += model.forward_backward(in.data(), tg.data(), batch, seq, scale) / accum;
    }
    r.losses.push_back(static_cast<float>(loss));
    if (s == 0)  // to_hf_tensors returns views of the gradients: copy them
      for (auto& [name, t] : model::to_hf_tensors(model.config(), model.grads()))
        r.grads1.emplace_back(name, t.clone());
    clip_grad_norm(pool, model.params(), hp["grad_clip"].get<double>());
    opt.step(pool, static_cast<float>(learning_rate(lr, s)));
    model.sync_compute_weights();
  }
  r.final_weights = model::to_hf_tensors(model.config(), model.master());
  return r;
}

void expect_tensors_match(const std::vector<std::pair<std::string, Tensor>>& actual,
                          const std::string& golden, double rtol, double atol,
                          const std::string& arch, bool skip_key_bias = false) {
  const model::SafetensorsSet ref = model::SafetensorsSet::open_file(golden);
  ASSERT_EQ(actual.size(), ref.names().size()) << golden;
  for (const auto& [name, t] : actual) {
    ASSERT_TRUE(ref.contains(name)) << name << " missing in " << golden;
    std::vector<float> got = t.to_f32_vector(), want = ref.tensor(name).to_f32_vector();
    if (skip_key_bias && name.ends_with("attn.c_attn.bias")) {
      // GPT-2's key bias adds q·b_k to every score of a query row, which softmax cancels: its
      // true gradient is 0 (grads1 checks that), so Adam turns f32 rounding noise into ±lr
      // steps. Its final values are not comparable; the q and v thirds are.
      const size_t third = got.size() / 3;
      std::fill(got.begin() + static_cast<int64_t>(third),
                got.begin() + static_cast<int64_t>(2 * third), 0.0f);
      std::fill(want.begin() + static_cast<int64_t>(third),
                want.begin() + static_cast<int64_t>(2 * third), 0.0f);
    }
    EXPECT_TRUE(test::all_close(got, want, rtol, atol))
        << name << " of " << golden << "; " << kRegenerate << arch;
  }
}

class ParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ParityTest, GradientsLossesAndWeightsMatchPyTorch) {
  const std::string arch = GetParam();
  const std::string dir = test::source_path("tests/data/train/" + arch);
  const RunResult r = run_training(arch, {});
  expect_tensors_match(r.grads1, dir + "/grads1.safetensors", 1e-4, 1e-6, arch);
  const NpyArray losses = read_npy(dir + "/losses.npy");
  EXPECT_TRUE(test::all_close(r.losses, losses.f32, 1e-5, 0)) << kRegenerate << arch;
  // 20 Adam steps amplify f32 rounding in elements whose gradient is ~0 (their update is
  // lr·m/(sqrt(v)+eps)); 1e-4 of lr = 3e-3 bounds that.
  expect_tensors_match(r.final_weights, dir + "/final.safetensors", 1e-4, 3e-5, arch, true);
}

TEST_P(ParityTest, FullRecomputeGivesTheSameBits) {
  const RunResult plain = run_training(GetParam(), {}, 6);
  const RunResult recompute = run_training(GetParam(), {.recompute = true}, 6);
  EXPECT_EQ(plain.losses, recompute.losses);
  for (size_t i = 0; i < plain.final_weights.size(); ++i)
    EXPECT_EQ(plain.final_weights[i].second.to_f32_vector(),
              recompute.final_weights[i].second.to_f32_vector())
        << plain.final_weights[i].first;
}

TEST_P(ParityTest, Bf16ComputeStaysWithinItsPrecision) {
  const std::string arch = GetParam();
  const RunResult r = run_training(arch, {.compute_dtype = DType::kBF16}, 8);
  NpyArray losses = read_npy(test::source_path("tests/data/train/" + arch + "/losses.npy"));
  losses.f32.resize(8);
  EXPECT_TRUE(test::all_close(r.losses, losses.f32, 2e-2, 0));
}

INSTANTIATE_TEST_SUITE_P(Archs, ParityTest, ::testing::Values("llama", "qwen2", "gpt2"));

TEST(TrainedModelTest, DecoderGivesTheTrainingLogits) {
  for (const std::string arch : {"llama", "gpt2"}) {
    const model::ModelDir md =
        model::load_model_dir(test::source_path("tests/data/train/" + arch + "/model"));
    ThreadPool pool(2);
    TrainModel tm(md.config, md.weights, pool, {});
    const std::vector<int32_t> ids = {3, 17, 42, 5, 9, 60, 1, 33};
    std::vector<float> train_logits, infer_logits;
    tm.logits(ids.data(), 1, static_cast<int>(ids.size()), train_logits);
    // Round trip through the HF writer and loader, then the paged inference forward.
    const std::string out = test::temp_dir("trained_" + arch);
    model::write_model_dir(out, tm.config(), model::to_hf_tensors(tm.config(), tm.master()), {});
    const model::ModelDir back = model::load_model_dir(out);
    model::Decoder dec(back.config, back.weights, pool);
    model::KvCache cache(back.config, 4, 16);
    model::ForwardBatch batch;
    batch.add_sequence(ids, 0, {0}, 16, true, true);
    dec.forward(batch, cache, infer_logits);
    EXPECT_TRUE(test::all_close(infer_logits, train_logits, 1e-4, 1e-5)) << arch;
  }
}

TEST(SlidingWindowTraining, LossAndGradientsMatchTransformers) {
  for (const std::string name : {"mistral_window8", "qwen2_window8"}) {
    SCOPED_TRACE(name);
    const std::string dir = test::source_path("tests/data/model/hf_compat/" + name);
    const model::ModelDir md = model::load_model_dir(dir + "/tf5");
    ASSERT_GT(md.config.attention_window(md.config.num_layers - 1), 0);
    const NpyArray tokens = read_npy(dir + "/train_tokens.npy");
    const int batch = static_cast<int>(tokens.shape[0]),
              seq = static_cast<int>(tokens.shape[1]) - 1;
    std::vector<int32_t> in, tg;
    for (int b = 0; b < batch; ++b)
      for (int t = 0; t < seq; ++t) {
        in.push_back(tokens.i32[static_cast<size_t>(b * (seq + 1) + t)]);
        tg.push_back(tokens.i32[static_cast<size_t>(b * (seq + 1) + t + 1)]);
      }
    ThreadPool pool(2);
    TrainModel tm(md.config, md.weights, pool, {});
    tm.zero_grads();
    const double loss = tm.forward_backward(in.data(), tg.data(), batch, seq,
                                            1.0f / static_cast<float>(batch * seq));
    const model::SafetensorsSet ref =
        model::SafetensorsSet::open_file(dir + "/tf5.train.safetensors");
    EXPECT_NEAR(loss, ref.tensor("loss").to_f32_vector()[0], 1e-5)
        << "regenerate: tools/ref/gen_hf_compat.py";
    std::vector<std::pair<std::string, Tensor>> grads;
    for (auto& [n, t] : model::to_hf_tensors(tm.config(), tm.grads()))
      grads.emplace_back(n, t.clone());
    for (const auto& [n, t] : grads) {
      ASSERT_TRUE(ref.contains(n)) << n;
      EXPECT_TRUE(test::all_close(t.to_f32_vector(), ref.tensor(n).to_f32_vector(), 1e-4, 1e-6))
          << n << "; regenerate: tools/ref/gen_hf_compat.py";
    }
  }
}

}  // namespace
}  // namespace lmstack::train
