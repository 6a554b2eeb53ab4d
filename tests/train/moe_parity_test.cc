// MoE training parity with PyTorch (tools/ref/gen_moe_train_parity.py, float64 autograd with a
// hand-written MoE block checked there against transformers' logits): tiny Mixtral, Qwen2-MoE
// (gated shared expert, a dense layer) and a Qwen3-MoE with DeepSeek-V3 routing (sigmoid, score
// bias, group-limited, routed scale). The step-1 gradients, the CE and load-balancing losses of
// 12 AdamW steps (aux coefficient 0.02) and the final weights match; recompute gives the same
// bits; the trained weights give the training logits in the inference Decoder.
#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/core/npy.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/moe.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/model_train.h"
#include "train/parity_util.h"

namespace lmstack::train {
namespace {

const std::string kRegenerate =
    "regenerate: /usr/bin/python3 tools/ref/gen_moe_train_parity.py --case ";

// The case's model, with routing.json's DeepSeek-V3 router applied when the case has one.
model::ModelDir load_case(const std::string& dir) {
  model::ModelDir md = model::load_model_dir(dir + "/model");
  if (!file_exists(dir + "/routing.json")) return md;
  const Json r = read_json_file(dir + "/routing.json");
  model::MoeConfig& m = md.config.moe;
  m.score = model::RouterScore::kSigmoid;
  m.num_groups = r["num_groups"], m.topk_groups = r["topk_groups"];
  m.group_top2_sum = r["group_top2_sum"], m.routed_scale = r["routed_scale"];
  m.norm_topk_prob = r["norm_topk_prob"], m.score_bias = true;
  for (auto& [layer, bias] : r["bias"].items())
    md.weights.layers[static_cast<size_t>(std::stoi(layer))].moe->score_bias =
        Tensor::from_f32(Shape{m.num_experts}, bias.get<std::vector<float>>());
  return md;
}

using test_parity::ParityRun;

ParityRun run_training(const std::string& name, TrainModelOptions options, int max_steps = 0) {
  const std::string dir = test::source_path("tests/data/train/" + name);
  return test_parity::run_golden_steps(dir, load_case(dir), options, max_steps);
}

void expect_tensors_match(const test_parity::NamedTensors& actual, const std::string& golden,
                          double rtol, double atol, const std::string& name) {
  test_parity::expect_tensors_match(actual, golden, rtol, atol, kRegenerate + name);
}

class MoeParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeParityTest, GradientsLossesAndWeightsMatchPyTorch) {
  const std::string name = GetParam();
  const std::string dir = test::source_path("tests/data/train/" + name);
  const ParityRun r = run_training(name, {});
  expect_tensors_match(r.grads1, dir + "/grads1.safetensors", 1e-4, 1e-6, name);
  EXPECT_TRUE(test::all_close(r.losses, read_npy(dir + "/losses.npy").f32, 1e-5, 0))
      << kRegenerate << name;
  EXPECT_TRUE(test::all_close(r.aux, read_npy(dir + "/aux.npy").f32, 1e-5, 0))
      << kRegenerate << name;
  expect_tensors_match(r.final_weights, dir + "/final.safetensors", 1e-4, 3e-5, name);
}

TEST_P(MoeParityTest, FullRecomputeGivesTheSameBits) {
  test_parity::expect_same_bits(run_training(GetParam(), {}, 3),
                                run_training(GetParam(), {.recompute = true}, 3));
}

// bf16 expert matmuls (routers stay f32): the losses stay within bf16's precision, 2e-2, of the
// float64 reference, as the dense models' do (parity_test.cc).
TEST_P(MoeParityTest, Bf16ComputeStaysWithinItsPrecision) {
  const std::string name = GetParam();
  const ParityRun r = run_training(name, {.compute_dtype = DType::kBF16}, 8);
  std::vector<float> want =
      read_npy(test::source_path("tests/data/train/" + name + "/losses.npy")).f32;
  want.resize(8);
  EXPECT_TRUE(test::all_close(r.losses, want, 2e-2, 0));
}

TEST_P(MoeParityTest, DecoderGivesTheTrainingLogits) {
  const std::string dir = test::source_path("tests/data/train/" + GetParam());
  const model::ModelDir md = load_case(dir);
  ThreadPool pool(2);
  TrainModel tm(md.config, md.weights, pool, {});
  const std::vector<int32_t> ids = {3, 17, 42, 5, 9, 60, 1, 33, 12, 7};
  std::vector<float> train_logits, infer_logits;
  tm.logits(ids.data(), 1, static_cast<int>(ids.size()), train_logits);
  // Through the HF writer and loader (routing.json's router is not a config.json field: that
  // case runs the Decoder on the in-memory config and the written tensors).
  const std::string out = test::temp_dir("moe_trained_" + GetParam());
  model::write_model_dir(out, tm.config(), model::to_hf_tensors(tm.config(), tm.master()), {});
  const model::ModelDir back = model::load_model_dir(out);
  model::ModelWeights weights = back.weights;
  for (size_t l = 0; l < weights.layers.size(); ++l)
    if (weights.layers[l].moe && tm.master().layers[l].moe->score_bias.defined())
      weights.layers[l].moe->score_bias = tm.master().layers[l].moe->score_bias;
  model::Decoder dec(tm.config(), weights, pool);
  model::KvCache cache(tm.config(), 4, 16);
  model::ForwardBatch batch;
  batch.add_sequence(ids, 0, {0}, 16, true, true);
  dec.forward(batch, cache, infer_logits);
  EXPECT_TRUE(test::all_close(infer_logits, train_logits, 1e-4, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeParityTest,
                         ::testing::Values("mixtral", "qwen2_moe", "qwen3_moe_v3routing"));

}  // namespace
}  // namespace lmstack::train
