// The golden training loop shared by the PyTorch parity tests (parity_test.cc, moe_parity_test.cc,
// mla_train_test.cc): the loop of tools/ref/gen_{train,moe_train,mla_train}_parity.py
// (accumulation, clipping, AdamW with warmup + cosine) over a case directory's hparams.json and
// tokens.npy, and the per-tensor comparison with its safetensors goldens.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/core/json.h"
#include "lmstack/core/npy.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/model_train.h"
#include "test_util.h"

namespace lmstack::train::test_parity {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct ParityRun {
  std::vector<float> losses, aux;  // per step: mean CE loss, mean MoE aux loss (0 when dense)
  NamedTensors grads1;             // step 1's gradients (after accumulation, before clipping)
  NamedTensors final_weights;      // HF names
};

// Trains `md` for hparams.json's steps (or max_steps > 0) on `dir`'s token windows. An
// `aux_coef` in hparams.json sets the MoE load-balancing coefficient.
inline ParityRun run_golden_steps(const std::string& dir, const model::ModelDir& md,
                                  TrainModelOptions options, int max_steps = 0) {
  const Json hp = read_json_file(dir + "/hparams.json");
  const NpyArray tokens = read_npy(dir + "/tokens.npy");
  const int steps = max_steps > 0 ? max_steps : hp["steps"].get<int>(), accum = hp["accum"],
            batch = hp["batch"], seq = hp["seq"];
  if (hp.contains("aux_coef")) options.moe_aux_loss_coef = hp["aux_coef"];
  ThreadPool pool(2);
  TrainModel model(md.config, md.weights, pool, options);
  AdamW opt(model.params(), {hp["beta1"], hp["beta2"], hp["eps"], hp["weight_decay"]});
  const LrConfig lr{hp["lr"], hp["min_lr"], hp["warmup"], hp["steps"], LrSchedule::kCosine};
  ParityRun r;
  std::vector<int32_t> in(static_cast<size_t>(batch * seq)), tg(in.size());
  const float scale = 1.0f / static_cast<float>(batch * seq * accum);
  for (int s = 0; s < steps; ++s) {
    model.zero_grads();
    double loss = 0, aux = 0;
    for (int m = 0; m < accum; ++m) {
      const int32_t* w = &tokens.i32[static_cast<size_t>(((s * accum + m) * batch) * (seq + 1))];
      for (int b = 0; b < batch; ++b)
        for (int t = 0; t < seq; ++t) {
          in[static_cast<size_t>(b * seq + t)] = w[b * (seq + 1) + t];
          tg[static_cast<size_t>(b * seq + t)] = w[b * (seq + 1) + t + 1];
        }
      loss += model.forward_backward(in.data(), tg.data(), batch, seq, scale) / accum;
      aux += model.moe_aux_loss() / accum;
    }
    r.losses.push_back(static_cast<float>(loss));
    r.aux.push_back(static_cast<float>(aux));
    if (s == 0)  // to_hf_tensors returns views of the gradients: copy them
      for (auto& [name, t] : model::to_hf_tensors(model.config(), model.grads()))
        r.grads1.emplace_back(name, t.clone());
    clip_grad_norm(pool, model.params(), hp["grad_clip"].get<double>());
    opt.step(pool, static_cast<float>(learning_rate(lr, s)));
    model.sync_compute_weights();
  }
  for (auto& [name, t] : model::to_hf_tensors(model.config(), model.master()))
    r.final_weights.emplace_back(name, t.clone());
  return r;
}

// Every tensor of `actual` against the same-named one of the `golden` safetensors file.
// skip_key_bias: GPT-2's key-bias third is left out (parity_test.cc says why).
inline void expect_tensors_match(const NamedTensors& actual, const std::string& golden, double rtol,
                                 double atol, const std::string& regenerate,
                                 bool skip_key_bias = false) {
  const model::SafetensorsSet ref = model::SafetensorsSet::open_file(golden);
  ASSERT_EQ(actual.size(), ref.names().size()) << golden;
  for (const auto& [name, t] : actual) {
    ASSERT_TRUE(ref.contains(name)) << name << " missing in " << golden;
    std::vector<float> got = t.to_f32_vector(), want = ref.tensor(name).to_f32_vector();
    if (skip_key_bias && name.ends_with("attn.c_attn.bias")) {
      const auto third = static_cast<int64_t>(got.size() / 3);
      std::fill(got.begin() + third, got.begin() + 2 * third, 0.0f);
      std::fill(want.begin() + third, want.begin() + 2 * third, 0.0f);
    }
    EXPECT_TRUE(test::all_close(got, want, rtol, atol))
        << name << " of " << golden << "; " << regenerate;
  }
}

// Two runs that must agree bit for bit (full recompute against the saved activations).
inline void expect_same_bits(const ParityRun& a, const ParityRun& b) {
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.aux, b.aux);
  ASSERT_EQ(a.final_weights.size(), b.final_weights.size());
  for (size_t i = 0; i < a.final_weights.size(); ++i)
    EXPECT_EQ(a.final_weights[i].second.to_f32_vector(), b.final_weights[i].second.to_f32_vector())
        << a.final_weights[i].first;
}

}  // namespace lmstack::train::test_parity
