// Training of DeepSeek multi-head latent attention (train/mla_train.cc) against an independent
// float64 PyTorch reference (tools/ref/gen_mla_train_parity.py, whose forward is checked against
// transformers' logits when it runs): V2-style (q_proj, interleaved RoPE) and V3-style (q latent,
// YaRN with mscale != mscale_all_dim) models with dense MLPs match step 1's gradients, 12 AdamW
// steps' losses and the final weights; recompute gives the same bits; the trained weights give
// the training logits in the inference Decoder's absorbed and expanded forms; the trainer's
// checkpoints resume bit-exactly and export to the same logits, in process and through the
// `lmstack` CLI; data parallelism on 2 in-process ranks equals one process; tensor and pipeline
// parallelism are refused by name.
#include <cmath>
#include <mutex>

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/core/npy.h"
#include "lmstack/dist/comm_local.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/model_train.h"
#include "lmstack/train/sharded_checkpoint.h"
#include "train/parity_util.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

const std::string kRegenerate =
    "regenerate: /usr/bin/python3 tools/ref/gen_mla_train_parity.py --case ";

std::string case_dir(const std::string& c) {
  return test::source_path("tests/data/train/mla_" + c);
}

using test_parity::ParityRun;

ParityRun run_steps(const std::string& c, TrainModelOptions options, int max_steps = 0) {
  return test_parity::run_golden_steps(case_dir(c), model::load_model_dir(case_dir(c) + "/model"),
                                       options, max_steps);
}

void expect_match(const test_parity::NamedTensors& actual, const std::string& golden, double rtol,
                  double atol, const std::string& c) {
  test_parity::expect_tensors_match(actual, golden, rtol, atol, kRegenerate + c);
}

class MlaTrainParity : public ::testing::TestWithParam<std::string> {};

TEST_P(MlaTrainParity, GradientsLossesAndWeightsMatchPyTorch) {
  const std::string c = GetParam();
  const ParityRun r = run_steps(c, {});
  expect_match(r.grads1, case_dir(c) + "/grads1.safetensors", 1e-4, 1e-6, c);
  EXPECT_TRUE(test::all_close(r.losses, read_npy(case_dir(c) + "/losses.npy").f32, 1e-5, 0))
      << kRegenerate << c;
  expect_match(r.final_weights, case_dir(c) + "/final.safetensors", 1e-4, 3e-5, c);
}

TEST_P(MlaTrainParity, FullRecomputeGivesTheSameBits) {
  test_parity::expect_same_bits(run_steps(GetParam(), {}, 3),
                                run_steps(GetParam(), {.recompute = true}, 3));
}

TEST_P(MlaTrainParity, Bf16ComputeStaysWithinItsPrecision) {
  const ParityRun r = run_steps(GetParam(), {.compute_dtype = DType::kBF16}, 4);
  std::vector<float> want = read_npy(case_dir(GetParam()) + "/losses.npy").f32;
  want.resize(4);
  EXPECT_TRUE(test::all_close(r.losses, want, 2e-2, 0));
}

// The inference Decoder (model/mla.cc) over the same weights, both forms, against the training
// forward: two implementations of one function (the absorbed one never builds K or V).
TEST_P(MlaTrainParity, DecoderGivesTheTrainingLogitsInBothForms) {
  const model::ModelDir md = model::load_model_dir(case_dir(GetParam()) + "/model");
  ThreadPool pool(2);
  TrainModel tm(md.config, md.weights, pool, {});
  const std::vector<int32_t> ids = {3, 17, 42, 5, 9, 60, 1, 33, 8, 21, 50, 2};
  std::vector<float> train_logits;
  tm.logits(ids.data(), 1, static_cast<int>(ids.size()), train_logits);
  for (const model::MlaMode mode : {model::MlaMode::kExpanded, model::MlaMode::kAbsorbed}) {
    model::Decoder dec(md.config, md.weights, pool);
    dec.set_mla_mode(mode);
    model::KvCache cache(md.config, 4, 16);
    model::ForwardBatch batch;
    batch.add_sequence(ids, 0, {0}, 16, true, true);
    std::vector<float> infer_logits;
    dec.forward(batch, cache, infer_logits);
    EXPECT_TRUE(test::all_close(infer_logits, train_logits, 1e-4, 1e-5))
        << (mode == model::MlaMode::kAbsorbed ? "absorbed" : "expanded");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MlaTrainParity, ::testing::Values("v2", "v3"));

// activation_bytes() against the saved tensors counted from the shapes: without recompute every
// layer keeps its own, with recompute one layer's set serves all, so the difference is (L - 1)
// layers of: n1, n2, x_mid [N, C], both norms' rstd [N], gate/up/act [N, F], the q latent
// [N, qr] x 2 + [N], the kv latent [N, r] x 2 + [N], q/k/v [N, H, qk], the padded attention output
// [N, H, qk] and the attention output [N, H, dv].
TEST(MlaTraining, ActivationBytesCountTheSavedTensors) {
  const model::ModelDir md = model::load_model_dir(case_dir("v3") + "/model");
  const model::ModelConfig& c = md.config;
  ThreadPool pool(1);
  TrainModel plain(c, md.weights, pool, {}), recompute(c, md.weights, pool, {.recompute = true});
  const int batch = 2, seq = 8;
  const std::vector<int32_t> ids(batch * seq, 7);
  std::vector<float> logits;
  plain.logits(ids.data(), batch, seq, logits);
  recompute.logits(ids.data(), batch, seq, logits);
  const int64_t n = batch * seq, h = c.num_heads, qk = c.mla.qk_head_dim();
  const int64_t per_layer = 3 * n * c.hidden_size + 2 * n + 3 * n * c.intermediate_size +
                            2 * n * c.mla.q_lora_rank + n + 2 * n * c.mla.kv_lora_rank + n +
                            4 * n * h * qk + n * h * c.mla.v_head_dim;
  EXPECT_EQ(plain.activation_bytes() - recompute.activation_bytes(),
            (c.num_layers - 1) * per_layer * static_cast<int64_t>(sizeof(float)));
}

TEST(MlaTraining, UnsupportedShapesAreRefusedByName) {
  model::ModelDir md = model::load_model_dir(case_dir("v2") + "/model");
  ThreadPool pool(1);
  model::ModelConfig c = md.config;
  c.mla.v_head_dim = c.mla.qk_head_dim() + 2;
  try {
    TrainModel tm(c, md.weights, pool, {});
    FAIL() << "v_head_dim > qk_head_dim was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("v_head_dim"), std::string::npos) << e.what();
  }
}

using test_fixtures::losses_of;
using test_fixtures::make_data;
using test_fixtures::tiny_config;

TEST(MlaTraining, CheckpointsResumeBitExactlyAndExportToTheSameLogits) {
  const std::string data = make_data("mla_trainer_data");
  ThreadPool pool(2);
  const TrainConfig full = tiny_config(data, test::temp_dir("mla_full"), "mla_v3");
  const TrainResult done = run_training(full, pool);
  const std::vector<double> expected = losses_of(full.log_path);
  ASSERT_EQ(expected.size(), 6u);
  // Killed while writing step 4's checkpoint (tests/train/trainer_test.cc's fault hook), then
  // resumed from step 2's: its weights and both Adam moments, MLA's tensors among them.
  TrainConfig part = tiny_config(data, test::temp_dir("mla_part"), "mla_v3");
  set_file_fault_hook([](std::string_view op, const std::string& path) -> int64_t {
    const bool hit = op == "write" && path.find("step-00000004") != std::string::npos &&
                     path.find("optimizer.exp_avg_sq") != std::string::npos;
    return hit ? -2 : -1;
  });
  EXPECT_THROW(run_training(part, pool), IoError);
  set_file_fault_hook(nullptr);
  part.resume = true;
  const TrainResult r = run_training(part, pool);
  EXPECT_EQ(r.first_step, 2);
  EXPECT_EQ(losses_of(part.log_path), expected);  // bit for bit

  const std::string out = test::temp_dir("mla_export");
  export_checkpoint(done.checkpoint, out);
  const model::ModelDir ckpt = model::load_model_dir(done.checkpoint);
  const model::ModelDir back = model::load_model_dir(out);
  TrainModel tm(ckpt.config, ckpt.weights, pool, {});
  const std::vector<int32_t> ids = {5, 9, 60, 1, 33, 8, 21};
  std::vector<float> train_logits, infer_logits;
  tm.logits(ids.data(), 1, static_cast<int>(ids.size()), train_logits);
  model::Decoder dec(back.config, back.weights, pool);
  model::KvCache cache(back.config, 4, 16);
  model::ForwardBatch batch;
  batch.add_sequence(ids, 0, {0}, 16, true, true);
  dec.forward(batch, cache, infer_logits);
  EXPECT_TRUE(test::all_close(infer_logits, train_logits, 1e-4, 1e-5));
}

// The CLI end to end: `train --init-config` on a DeepSeek config with dense MLPs, stopped at step
// 3 and resumed (constant learning rate, so the two runs share a schedule), gives the
// uninterrupted run's losses bit for bit; `checkpoint export` writes a directory the Decoder
// loads with the checkpoint's exact logits.
TEST(MlaTraining, CliTrainsResumesAndExports) {
  const std::string dir = test::temp_dir("mla_cli");
  const std::string data = make_data("mla_cli_data");
  const std::string bin = test::lmstack_binary();
  std::string out;
  Json config = read_json_file(case_dir("v3") + "/model/config.json");
  config["vocab_size"] = 320;  // init writes a 259-token byte-level tokenizer
  write_file_atomic(dir + "/config.json", config.dump());
  const std::string common = " train --init-config " + dir + "/config.json --data " + data +
                             " --seq 16 --batch 2 --warmup 1 --lr 0.003 --schedule constant" +
                             " --save-every 3 --seed 4 -t 1";
  for (const std::string& args :
       {common + " --steps 6 --out " + dir + "/a --log " + dir + "/a.jsonl",
        common + " --steps 3 --out " + dir + "/b --log " + dir + "/b.jsonl",
        common + " --steps 6 --resume --out " + dir + "/b --log " + dir + "/b.jsonl",
        std::string(" checkpoint export ") + dir + "/a --out " + dir + "/hf"})
    ASSERT_EQ(test::run_command(bin + args, &out), 0) << args << "\n" << out;
  const std::vector<double> want = losses_of(dir + "/a.jsonl");
  ASSERT_EQ(want.size(), 6u);
  EXPECT_LT(want.back(), want.front());
  EXPECT_EQ(losses_of(dir + "/b.jsonl"), want);
  ThreadPool pool(1);
  const std::vector<int32_t> ids = {5, 9, 60, 1, 33};
  std::vector<float> logits[2];
  const std::string dirs[2] = {dir + "/hf", dir + "/a/checkpoints/step-00000006"};
  for (int i = 0; i < 2; ++i) {
    const model::ModelDir md = model::load_model_dir(dirs[i]);
    ASSERT_TRUE(md.config.mla.enabled() && !md.config.moe.enabled()) << dirs[i];
    model::Decoder dec(md.config, md.weights, pool);
    model::KvCache cache(md.config, 4, 16);
    model::ForwardBatch batch;
    batch.add_sequence(ids, 0, {0}, 16, true, true);
    dec.forward(batch, cache, logits[i]);
  }
  EXPECT_EQ(logits[0], logits[1]);
}

// Flat-parameter data parallelism sees MLA's tensors through weight_fields like any other:
// 2 ranks (ZeRO 0, and 3, which gathers and frees each layer's MLA weights) equal one process
// within the summation-order tolerance of tests/train/data_parallel_test.cc.
TEST(MlaTraining, DataParallelTwoRanksEqualOneProcess) {
  const std::string data = make_data("mla_dp_data");
  ThreadPool pool(1);
  TrainConfig single = tiny_config(data, test::temp_dir("mla_dp_single"), "mla_v2");
  single.batch = 4;
  const TrainResult ref = run_training(single, pool);
  const std::vector<double> want = losses_of(single.log_path);
  const model::ModelDir ref_md = model::load_model_dir(ref.checkpoint);
  for (const int zero : {0, 3}) {
    TrainConfig c = tiny_config(data, test::temp_dir("mla_dp_z" + std::to_string(zero)), "mla_v2");
    c.batch = 4;
    dist::run_local(2, [&](dist::Comm& comm) {
      TrainConfig mine = c;
      mine.comm = &comm;
      mine.zero = zero;
      ThreadPool p(1);
      run_training(mine, p);
    });
    const std::vector<double> have = losses_of(c.log_path);
    ASSERT_EQ(have.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(have[i], want[i], 2e-5 * std::fabs(want[i])) << "zero " << zero << " step " << i;
    // The sharded checkpoint, exported (CheckpointReader::full_weights finds MLA's tensors).
    const std::string hf = test::temp_dir("mla_dp_hf" + std::to_string(zero));
    export_checkpoint(*latest_checkpoint(c.out_dir), hf);
    const model::ModelDir md = model::load_model_dir(hf);
    const auto got = model::to_hf_tensors(md.config, md.weights);
    const auto exp = model::to_hf_tensors(ref_md.config, ref_md.weights);
    ASSERT_EQ(got.size(), exp.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(
          test::all_close(got[i].second.to_f32_vector(), exp[i].second.to_f32_vector(), 1e-4, 1e-5))
          << "zero " << zero << " " << got[i].first;
  }
}

TEST(MlaTraining, TensorAndPipelineParallelAreRefusedByName) {
  const std::string data = make_data("mla_tp_data");
  for (const auto& [tp, pp] : {std::pair{2, 1}, std::pair{1, 2}}) {
    TrainConfig c = tiny_config(data, test::temp_dir("mla_tp"), "mla_v3");
    c.tp = tp;
    c.pp = pp;
    std::string what;
    dist::run_local(2, [&](dist::Comm& comm) {
      TrainConfig mine = c;
      mine.comm = &comm;
      ThreadPool p(1);
      try {
        run_training(mine, p);
      } catch (const ConfigError& e) {
        if (comm.rank() == 0) what = e.what();
      }
    });
    EXPECT_NE(what.find("latent attention"), std::string::npos)
        << "tp " << tp << " pp " << pp << ": " << what;
  }
}

}  // namespace
}  // namespace lmstack::train
