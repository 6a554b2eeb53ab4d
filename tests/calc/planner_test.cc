// calc plan with a fixed global batch: the micro-batches, bubble, memory and bytes of a small
// layout derived by hand, and the ranking and predicted MFU checked against published layouts:
//   Llama 3 405B (Dubey et al. 2024, "The Llama 3 Herd of Models", sec. 3.3.2 and Table 4):
//     16,384 H100, TP 8, CP 1, PP 16, DP 128, seq 8192, 16 sequences per DP group, 16M tokens
//     per step, 400 TFLOP/s per GPU, 41% BF16 MFU; 8,192 H100 with DP 64 and 32 sequences per
//     DP group: 430 TFLOP/s, 43% MFU. No activation checkpointing, interleaved schedule (V not
//     stated), FSDP sharding optimizer states and gradients, RoCE at 400 Gb/s per GPU.
//   GPT-3 175B (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
//     Clusters Using Megatron-LM"): Table 2, PTD parallelism, model-parallel size 96 (TP 8 x
//     PP 12 as 96 layers / 8 per stage), batch 1536 x 2048 tokens, micro-batch 1: 153 / 149 /
//     141 TFLOP/s per GPU on 384 / 768 / 1536 A100 (counting the recomputed forward, eq. 3).
//     Sec. 5.1 gives 140 TFLOP/s on 1,024 A100 with batch 1536 for the 34-day estimate but no
//     layout; 1024 GPUs cannot hold 96-GPU model replicas, so that figure is checked against
//     the plan's best layout. Selene: 8 HDR 200 Gb/s HCAs per 8-GPU node.
#include <gtest/gtest.h>

#include "lmstack/calc/params.h"
#include "lmstack/calc/plan_explain.h"
#include "lmstack/calc/reports.h"

namespace lmstack::calc {
namespace {

// gpt2-124m (12 layers, h 768, 12 heads) on 16 A100: tp 2 x pp 4 x dp 2, v 3, micro-batch 2.
TrainOptions small_layout(int zero, double global_tokens) {
  TrainOptions o;
  o.tokens = 1e9;
  o.gpus = 16;
  o.tp = 2, o.pp = 4, o.dp = 2, o.virtual_stages = 3, o.zero = zero;
  o.micro_batch = 2;
  o.seq = 1024;
  o.global_batch_tokens = global_tokens;
  return o;
}

TEST(Plan, SmallLayoutByHand) {
  const ModelShape m = model_preset("gpt2");
  const HardwareSpec hw = hardware_preset("a100-80g");
  const TrainEstimate e = estimate_train(m, hw, small_layout(1, 24576));
  // 24576 tokens = 24 sequences of 1024; / (dp 2 x micro-batch 2) = 6 micro-batches.
  EXPECT_EQ(e.layout.grad_accum, 6);
  EXPECT_DOUBLE_EQ(e.tokens_per_step, 24576);
  EXPECT_EQ(e.stage_layers, 3);
  EXPECT_DOUBLE_EQ(e.bubble, 3.0 / (3 * 6));  // (pp-1)/(v m)
  const double P = 124439808, Pg = P / 8;     // tp x pp = 8 shards
  EXPECT_DOUBLE_EQ(e.params_per_gpu, Pg);
  EXPECT_DOUBLE_EQ(e.states.total(), 2 * Pg + 2 * Pg + 12 * Pg / 2);  // ZeRO-1 over dp 2
  // Korthikanti Table 2 with SP: sbh/t (34 + 5as/h) = 2*1024*768/2 x (34 + 80) per layer, 3
  // layers, 4 micro-batches in flight, interleaving x (1 + 3/(4x3)).
  EXPECT_DOUBLE_EQ(e.activations, 786432.0 * 114 * 3 * 4 * 1.25);
  EXPECT_DOUBLE_EQ(e.memory_total, 2 * Pg + 2 * Pg + 6 * Pg + 786432.0 * 114 * 15);
  // Bytes per GPU per step, A = b*s*h*2 = 3145728: TP 4 all-reduces x 3 layers x 6 micro-
  // batches, ring 2(t-1)/t = 1; PP 2 x m x v sends of A/t; DP all-reduce 2(d-1)/d G = G.
  const double A = 2.0 * 1024 * 768 * 2;
  EXPECT_DOUBLE_EQ(e.tp.bytes, 72 * A);
  EXPECT_DOUBLE_EQ(e.pp.bytes, 36 * A / 2);
  EXPECT_DOUBLE_EQ(e.dp.bytes, 2 * Pg);
  // Times: TP and DP (tp x dp = 4 GPUs) inside the node over NVLink A100 (300 GB/s, 1 us);
  // PP spans 16 GPUs, so it crosses nodes over the default NDR NIC (50 GB/s, 2 us).
  EXPECT_DOUBLE_EQ(e.tp.time_s, 72 * (2 * 1e-6 + A / 300e9));
  EXPECT_DOUBLE_EQ(e.pp.time_s, 36 * (2e-6 + A / 2 / 50e9));
  EXPECT_DOUBLE_EQ(e.dp.time_s, 3 * (2 * 1e-6 + 2 * Pg / 3 / 300e9));  // per-layer buckets
  const TokenFlops tf = token_flops(m, count_parameters(m), 1024, AttnConvention::kPalm);
  const double compute = tf.training() * 24576 / (16 * 312e12 * 0.5);
  EXPECT_DOUBLE_EQ(e.compute_step_s, compute);
  const double dp_exposed = std::max(0.0, e.dp.time_s - 2 * compute / 6 / 3);
  EXPECT_DOUBLE_EQ(e.dp_exposed_s, dp_exposed);
  EXPECT_DOUBLE_EQ(e.step_s, compute * (1 + 1.0 / 6) + e.tp.time_s + e.pp.time_s + dp_exposed);
  EXPECT_DOUBLE_EQ(e.mfu, tf.training() * 24576 / (e.step_s * 16 * 312e12));
}

TEST(Plan, ZeroThreeMovesOneAndAHalfAllReducesPerMicroBatch) {
  const ModelShape m = model_preset("gpt2");
  const HardwareSpec hw = hardware_preset("a100-80g");
  const double G = 2 * 124439808.0 / 8;
  // One micro-batch (4 sequences = dp x micro-batch): ZeRO paper sec. 7.2, 1.5x the all-reduce.
  const TrainEstimate z1 = estimate_train(m, hw, small_layout(1, 4096));
  const TrainEstimate z3 = estimate_train(m, hw, small_layout(3, 4096));
  EXPECT_EQ(z3.layout.grad_accum, 1);
  EXPECT_DOUBLE_EQ(z3.dp.bytes, 1.5 * z1.dp.bytes);
  // Six micro-batches: the gathers and reduce-scatters repeat for each.
  EXPECT_DOUBLE_EQ(estimate_train(m, hw, small_layout(3, 24576)).dp.bytes, 6 * 0.5 * 3 * G);
  EXPECT_DOUBLE_EQ(estimate_train(m, hw, small_layout(2, 24576)).dp.bytes, 0.5 * (6 * G + G));
}

TEST(Plan, PipelineBubble) {
  EXPECT_DOUBLE_EQ(pipeline_bubble(16, 1, 16), 15.0 / 16);   // 1F1B: (p-1)/m
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 1, 2), 3.0 / 2);       // ... for any m
  EXPECT_DOUBLE_EQ(pipeline_bubble(16, 8, 16), 15.0 / 128);  // interleaved: (p-1)/(v m)
  EXPECT_DOUBLE_EQ(pipeline_bubble(8, 2, 24), 7.0 / 48);
  // m < p interleaved, in chunk units: rounds of max(m, p) = 4, 4, then 2 + drain 3 = 13 of
  // an ideal v m = 6.
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 3, 2), 13.0 / 6 - 1);
  EXPECT_DOUBLE_EQ(pipeline_bubble(1, 1, 7), 0);
}

TEST(Plan, GlobalBatchMustSplitEvenly) {
  EXPECT_EQ(micro_batches_per_step(16 * 1024 * 1024, 8192, 128, 1), 16);
  EXPECT_EQ(micro_batches_per_step(16 * 1024 * 1024, 8192, 64, 1), 32);
  try {
    micro_batches_per_step(4e6, 4096, 1024, 1);  // 977 sequences
    FAIL() << "no error";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("--global-batch-tokens"), std::string::npos) << e.what();
  }
  EXPECT_THROW(micro_batches_per_step(1000, 4096, 1, 1), RequestError);
  // 126 layers on 16 stages: the busiest holds 8 (Llama 3 405B); v must divide it.
  const ModelShape m = model_preset("llama-3.1-405b");
  EXPECT_EQ(layers_per_stage(m, 16), 8);
  TrainOptions o;
  o.tokens = 1e9, o.gpus = 128, o.tp = 8, o.pp = 16, o.virtual_stages = 3;
  EXPECT_THROW(resolve_layout(m, o), RequestError);
  o.pp = 127;
  EXPECT_THROW(resolve_layout(m, o), RequestError);
}

// Llama 3 405B as Table 4 runs it; FlashAttention stores no attention scores, which is
// Korthikanti's "selective" case (Llama 3 used no activation checkpointing). V is not published:
// the comparison takes the fastest v.
PlanOptions llama3_405b(int gpus) {
  PlanOptions p;
  p.base.tokens = 15.6e12;
  p.base.gpus = gpus;
  p.base.seq = 8192;
  p.base.nic = "roce-400";
  p.global_batch_tokens = 16 * 1024 * 1024;
  p.compare_tp = 8, p.compare_pp = 16;
  p.compare_recompute = Recompute::kSelective;
  return p;
}

const ModelShape& llama405b() {
  static const ModelShape m = model_preset("llama-3.1-405b");
  return m;
}

// Published: 41% MFU on 16,384 GPUs (m = 16), 43% on 8,192 (m = 32). Band: +-3 points.
TEST(PlanPublished, Llama3_405bMfuAndItsDropWithDp) {
  const HardwareSpec hw = hardware_preset("h100-sxm");
  const Report r16 = plan_report(llama405b(), hw, llama3_405b(16384));
  const Report r8 = plan_report(llama405b(), hw, llama3_405b(8192));
  EXPECT_EQ(r16.value("compare_micro_batches"), 16);  // 2048 sequences / DP 128
  EXPECT_EQ(r8.value("compare_micro_batches"), 32);
  EXPECT_EQ(r16.find("compare_layout")->text, "tp 8 pp 16 dp 128 v 8 zero 2 recompute selective");
  EXPECT_DOUBLE_EQ(r16.value("compare_bubble"), 15.0 / 128);
  EXPECT_NEAR(r16.value("compare_mfu"), 0.41, 0.03);
  EXPECT_NEAR(r8.value("compare_mfu"), 0.43, 0.03);
  // The paper attributes the drop to the smaller batch per DP group: 41/43 = 0.953.
  EXPECT_NEAR(r16.value("compare_mfu") / r8.value("compare_mfu"), 41.0 / 43, 0.02);
}

// By step time the published layout ranks first (no fitting layout is faster), but the
// activation model (Korthikanti Table 2) puts it 0-15% over the H100's 80 GB, so the search
// picks another layout; --explain names that assumption.
TEST(PlanPublished, Llama3_405bRanksFirstButTheMemoryModelRejectsIt) {
  const Report r = plan_report(llama405b(), hardware_preset("h100-sxm"), llama3_405b(16384));
  EXPECT_EQ(r.find("compare_fits")->text, "NO");
  EXPECT_EQ(r.value("compare_rank"), 1);
  EXPECT_LT(r.value("compare_slower"), 0);
  EXPECT_GT(r.value("compare_slower"), -0.05);  // the best that fits is within 5%
  const double over = r.value("compare_memory_bytes") / 80e9;
  EXPECT_GT(over, 1.0);
  EXPECT_LT(over, 1.15);
  const Row* v = r.find("compare_verdict");
  EXPECT_NE(v->text.find("faster than the best that fits"), std::string::npos) << v->text;
  EXPECT_NE(v->explain.find("activation memory model"), std::string::npos) << v->explain;
}

// Megatron GPT-3 175B, Table 2: TP 8 x PP 12, batch 1536 x 2048, micro-batch 1, full
// recomputation, Selene A100 80GB with one HDR NIC per GPU.
PlanOptions gpt3_175b(int gpus, int tp, int pp) {
  PlanOptions p;
  p.base.tokens = 300e9;
  p.base.gpus = gpus;
  p.base.seq = 2048;
  p.base.nic = "hdr";
  p.global_batch_tokens = 1536 * 2048;
  p.compare_tp = tp, p.compare_pp = pp;
  p.compare_recompute = Recompute::kFull;
  return p;
}

// Published 153 / 149 / 141 TFLOP/s per GPU (recomputed forward counted). Band: +-10%.
TEST(PlanPublished, Gpt3_175bMegatronTable2) {
  const ModelShape m = model_preset("gpt3-175b");
  const HardwareSpec hw = hardware_preset("a100-80g");
  EXPECT_NEAR(static_cast<double>(count_parameters(m).total()), 174.6e9, 0.05e9);  // Table 2
  const struct {
    int gpus;
    double tflops;
  } rows[] = {{384, 153}, {768, 149}, {1536, 141}};
  for (const auto& row : rows) {
    const Report r = plan_report(m, hw, gpt3_175b(row.gpus, 8, 12));
    EXPECT_EQ(r.value("compare_micro_batches"), 1536 / (row.gpus / 96)) << row.gpus;
    EXPECT_EQ(r.find("compare_fits")->text, "yes") << row.gpus;
    EXPECT_NEAR(r.value("compare_hw_flops_per_gpu") / 1e12, row.tflops, 0.1 * row.tflops)
        << row.gpus;
  }
}

// With the recomputation left to the search, TP 8 x PP 12 on 1536 GPUs is within 2% of the
// best; with full recomputation, as in 2021 (selective recomputation is Korthikanti et al.
// 2022), it loses ~1/3 on compute and the explanation says so.
TEST(PlanPublished, Gpt3_175bRankAndWhatMakesAnotherLayoutWin) {
  const ModelShape m = model_preset("gpt3-175b");
  const HardwareSpec hw = hardware_preset("a100-80g");
  PlanOptions free_rc = gpt3_175b(1536, 8, 12);
  free_rc.compare_recompute.reset();
  const Report r = plan_report(m, hw, free_rc);
  EXPECT_LT(r.value("compare_slower"), 0.02);
  EXPECT_EQ(r.find("compare_fits")->text, "yes");
  const Report full = plan_report(m, hw, gpt3_175b(1536, 8, 12));
  EXPECT_GT(full.value("compare_slower"), 0.2);
  const std::string why = full.find("compare_verdict")->explain;
  EXPECT_NE(why.find("wins mainly on compute"), std::string::npos) << why;
  EXPECT_NE(why.find("Recomputation differs"), std::string::npos) << why;
}

// Sec. 5.1: 140 TFLOP/s on 1,024 A100, layout not stated. 96-GPU replicas (TP 8 x PP 12) do
// not tile 1024 GPUs; both TP 8 layouts that do, PP 8 and PP 16, land within 10% of 140.
TEST(PlanPublished, Gpt3_175bOn1024Gpus) {
  const ModelShape m = model_preset("gpt3-175b");
  const HardwareSpec hw = hardware_preset("a100-80g");
  EXPECT_EQ(plan_report(m, hw, gpt3_175b(1024, 8, 12)).find("compare_verdict")->text,
            "not a candidate");
  for (int pp : {8, 16}) {
    const Report r = plan_report(m, hw, gpt3_175b(1024, 8, pp));
    EXPECT_NEAR(r.value("compare_hw_flops_per_gpu") / 1e12, 140, 14) << pp;
  }
}

}  // namespace
}  // namespace lmstack::calc
