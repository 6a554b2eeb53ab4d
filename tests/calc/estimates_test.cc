// Layout validation, training/inference/network estimates against hand arithmetic, hardware
// presets and dtype handling, and report rendering.
#include <gtest/gtest.h>

#include <cmath>

#include "lmstack/calc/params.h"
#include "lmstack/calc/reports.h"
#include "lmstack/calc/train_estimate.h"

namespace lmstack::calc {
namespace {

template <class E>
void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TrainOptions train_opts(int gpus, int tp, int pp) {
  TrainOptions o;
  o.tokens = 1e9;
  o.gpus = gpus;
  o.tp = tp;
  o.pp = pp;
  o.seq = 4096;
  return o;
}

TEST(Layout, ImpossibleLayoutsSayWhy) {
  const ModelShape m = model_preset("llama-3-8b");
  expect_error<RequestError>([&] { resolve_layout(m, train_opts(6, 3, 1)); }, "32 attention heads");
  expect_error<RequestError>([&] { resolve_layout(m, train_opts(33, 1, 33)); }, "32 layers");
  EXPECT_EQ(resolve_layout(m, train_opts(5, 1, 5)).pp, 5);  // uneven: stages of 7 and 6 layers
  expect_error<RequestError>([&] { resolve_layout(m, train_opts(6, 4, 1)); }, "--gpus is 6");
  TrainOptions o = train_opts(8, 1, 1);
  o.ep = 2;
  expect_error<RequestError>([&] { resolve_layout(m, o); }, "mixture-of-experts");
  o = train_opts(8, 1, 1);
  o.zero = 4;
  expect_error<RequestError>([&] { resolve_layout(m, o); }, "--zero");
  // TP 16 > 8 KV heads is allowed (KV heads replicated): 16 is a multiple of 8.
  EXPECT_EQ(resolve_layout(m, train_opts(16, 16, 1)).dp, 1);
}

TEST(Train, TensorParallelShardsAndCommunicatesByHand) {
  const ModelShape m = model_preset("llama-2-7b");
  const TrainEstimate e = estimate_train(m, hardware_preset("h100-sxm"), train_opts(8, 8, 1));
  const double params = static_cast<double>(count_parameters(m).total());
  EXPECT_DOUBLE_EQ(e.params_per_gpu, params / 8);
  EXPECT_DOUBLE_EQ(e.states.weights, 2 * params / 8);
  // Megatron TP: 4 all-reduces per layer per micro-batch of b*s*h*2 bytes, ring 2(t-1)/t.
  const double A = 1.0 * 4096 * 4096 * 2;
  EXPECT_DOUBLE_EQ(e.tp.bytes, 32 * 4 * 2.0 * 7 / 8 * A);
  EXPECT_TRUE(e.tp.intra_node);
  EXPECT_EQ(e.tp.link, "nvlink-h100");
  EXPECT_EQ(e.dp.bytes, 0);  // dp = 1
  // 6ND plus PaLM attention: (6N + 12 L H Q T) x D.
  const double N = static_cast<double>(count_parameters(m).matmul_active());
  EXPECT_DOUBLE_EQ(e.total_flops, (6 * N + 12.0 * 32 * 32 * 128 * 4096) * 1e9);
}

TEST(Train, DataParallelAcrossNodesUsesTheNic) {
  const TrainEstimate e =
      estimate_train(model_preset("gpt2"), hardware_preset("a100-80g"), train_opts(16, 1, 1));
  EXPECT_FALSE(e.dp.intra_node);  // tp 1 x dp 16 spans two 8-GPU nodes
  EXPECT_EQ(e.dp.link, "ndr");
  EXPECT_DOUBLE_EQ(e.dp.bytes, 2.0 * 15 / 16 * 124439808.0 * 2);
}

// DP bytes per step, G = W = 2 B per parameter: the gradient reduce-scatters of ZeRO 2-3 run
// once per step (calc check of lmstack's runs) or once per micro-batch (calc train); ZeRO 0-1's
// all-reduce and ZeRO 3's two gathers per micro-batch do not depend on that.
TEST(Train, DataParallelBytesPerGradientSchedule) {
  const TrainPrecision p = TrainPrecision::mixed();
  const double params = 1e6, G = 2e6, W = 2e6, f = 3.0 / 4, m = 3;
  const GradReduce once = GradReduce::kPerStep, each = GradReduce::kPerMicroBatch;
  EXPECT_EQ(dp_comm_bytes(params, p, 3, 1, m, each), 0);
  for (GradReduce r : {once, each}) {
    EXPECT_DOUBLE_EQ(dp_comm_bytes(params, p, 0, 4, m, r), 2 * f * G);
    EXPECT_DOUBLE_EQ(dp_comm_bytes(params, p, 1, 4, m, r), 2 * f * G);
  }
  EXPECT_DOUBLE_EQ(dp_comm_bytes(params, p, 2, 4, m), f * (G + W));
  EXPECT_DOUBLE_EQ(dp_comm_bytes(params, p, 2, 4, m, each), f * (m * G + W));
  EXPECT_DOUBLE_EQ(dp_comm_bytes(params, p, 3, 4, m), f * (G + 2 * m * W));
  EXPECT_DOUBLE_EQ(dp_comm_bytes(params, p, 3, 4, m, each), f * m * (G + 2 * W));
}

// Expert parallelism by hand: tiny-mixtral-like, 2 MoE layers, T = 32 rows, k = 2, h = 32, f32
// activations, m = 2, 4 experts over ep 2 within dp 4 (so d = 2 ranks hold each expert).
TEST(Train, ExpertParallelBytesByHand) {
  EpShape s;
  s.tokens = 32, s.top_k = 2, s.hidden = 32, s.moe_layers = 2, s.num_experts = 4;
  s.micro_batches = 2, s.act_bytes = 4, s.ep = 2, s.dp = 4, s.expert_params = 24576;
  s.grad_bytes = 4;
  const EpBytes b = ep_comm_bytes(s);
  // 4 exchanges x 2 layers x 2 micro-batches x 32·2·32·4 B x 1/2, + 2 x 2 x (1 peer x 2 counts x 4
  // B).
  EXPECT_DOUBLE_EQ(b.all_to_all, 4 * 2 * 2 * 8192.0 / 2 + 2 * 2 * 8);
  // All-reduce of 24576 / 2 expert params over d = 2: 2 x 1/2 x 12288 x 4 B.
  EXPECT_DOUBLE_EQ(b.expert_all_reduce, 12288.0 * 4);
  s.ep = 1;
  EXPECT_EQ(ep_comm_bytes(s).all_to_all, 0);
}

TEST(Infer, MemoryAndConcurrencyByHand) {
  InferOptions o;  // bf16, batch 1, prompt 512, output 256
  const Report r = infer_report(model_preset("llama-3-8b"), hardware_preset("h100-sxm"), o);
  EXPECT_DOUBLE_EQ(r.value("weights_bytes"), 8030261248.0 * 2);
  EXPECT_DOUBLE_EQ(r.value("kv_bytes_per_sequence"), 131072.0 * 768);
  EXPECT_EQ(r.value("max_concurrency"), std::floor((80e9 - 8030261248.0 * 2) / (131072.0 * 768)));
  // Weights-only crossover: ridge x 2 B / 2 FLOP per weight = 989.5e12 / 3.35e12.
  EXPECT_NEAR(r.value("crossover_batch_no_kv"), 989.5 / 3.35, 1e-9);
  EXPECT_EQ(r.find("decode_bound")->text, "memory-bound");
  o.tp = 3;
  expect_error<RequestError>(
      [&] { infer_report(model_preset("llama-3-8b"), hardware_preset("h100-sxm"), o); }, "--tp 3");
}

TEST(Infer, MoeDecodeReadsOnlyTouchedExperts) {
  EXPECT_DOUBLE_EQ(expected_experts_touched(8, 2, 1), 2);
  EXPECT_NEAR(expected_experts_touched(8, 2, 1000), 8, 1e-9);
  const ModelShape m = model_preset("mixtral-8x7b");
  const ParamCount p = count_parameters(m);
  const HardwareSpec hw = hardware_preset("h100-sxm");
  const DecodeBound one = decode_bound(m, p, hw, "bf16", "bf16", 1, 1);
  const double experts = static_cast<double>(p.get("experts"));
  EXPECT_NEAR(one.weight_bytes_read, 2 * (p.total() - p.get("embedding") - experts * 6 / 8), 1.0);
}

TEST(Network, ClusterThreeTiersAndErrors) {
  ClusterOptions o;
  o.gpus = 16384;  // 2048 nodes: 8 rails x 64 leaves = 512 leaves > 64 ports
  const Report r = cluster_report(o);
  EXPECT_EQ(r.value("leaf_switches"), 512);
  EXPECT_EQ(r.value("spine_switches"), 512);  // 16 pods x 32
  EXPECT_EQ(r.value("core_switches"), 256);   // 512 x 32 up / 64
  o.gpus = 1001;                              // not a multiple of 8 GPUs per node
  expect_error<RequestError>([&] { cluster_report(o); }, "multiple");
  ClusterOptions two;
  two.oversub_down = 2;  // 2:1 -> 42 down, 22 up ports per 64-port leaf
  EXPECT_EQ(cluster_report(two).value("leaf_down_ports"), 42);
}

TEST(Network, TreeBeatsRingForSmallMessagesOnManyRanks) {
  EXPECT_LT(tree_allreduce_s(1024, 1024, 50e9, 2e-6), ring_allreduce_s(1024, 1024, 50e9, 2e-6));
  EXPECT_GT(tree_allreduce_s(1e10, 8, 50e9, 2e-6), ring_allreduce_s(1e10, 8, 50e9, 2e-6));
  expect_error<ConfigError>([] { comm_report({1e9, 8, "token-ring", 0}); }, "nvlink-h100");
  expect_error<RequestError>([] { comm_report({1e9, 1, "ndr", 0}); }, "--ranks");
}

// Broadcast: a pipelined chain, (n-1) alpha + S/beta; shared memory: 4 bytes of memory
// traffic per byte sent (copy in, copy out), the memory bandwidth shared by the n ranks.
TEST(Network, BroadcastAndSharedMemoryLink) {
  EXPECT_DOUBLE_EQ(broadcast_s(1e9, 4, 10e9, 1e-6), 3e-6 + 0.1);
  EXPECT_EQ(broadcast_s(1e9, 1, 10e9, 1e-6), 0);
  const LinkSpec shm = shared_memory_link(16e9, 2);
  EXPECT_DOUBLE_EQ(shm.bw, 2e9);
  EXPECT_DOUBLE_EQ(shm.latency, 1e-6);
}

TEST(Hardware, PresetsAndDtypes) {
  EXPECT_EQ(hardware_preset("H100").name, "h100-sxm");
  expect_error<ConfigError>([] { hardware_preset("tpu-v5"); }, "gb200-nvl72");
  expect_error<ConfigError>([] { dtype_bytes("fp12"); }, "q4_0");
  EXPECT_DOUBLE_EQ(dtype_bytes("q4_0"), 18.0 / 32);
  // V100 has no fp8 or bf16: both run at its fp16 tensor-core rate.
  EXPECT_DOUBLE_EQ(hardware_preset("v100").compute_flops("fp8"), 125e12);
  EXPECT_DOUBLE_EQ(hardware_preset("h100-sxm").compute_flops("int4"), 989.5e12);
  for (const std::string& n : hardware_preset_names()) {
    const HardwareSpec h = hardware_preset(n);
    EXPECT_GT(h.memory_bw, 0) << n;
    EXPECT_GT(h.peak_flops(Precision::kBf16), 0) << n;
    EXPECT_NO_THROW(link_preset(h.intra_node_link)) << n;
  }
  MachineReport cpu;
  cpu.cpu_model = "x";
  cpu.physical_cores = 2;
  cpu.dram_read_gbs = 28;
  cpu.peak_f32_avx512_gflops = 348;
  const HardwareSpec h = hardware_from_doctor(cpu, 0);
  EXPECT_DOUBLE_EQ(h.compute_flops("bf16"), 348e9);  // no bf16 path: f32 rate
  EXPECT_DOUBLE_EQ(h.memory_bw, 28e9);
}

TEST(Report, Formatting) {
  EXPECT_EQ(format_quantity(131072, "B"), "131.1 KB (128 KiB)");
  EXPECT_EQ(format_quantity(4.18e-3, "s"), "4.18 ms");
  EXPECT_EQ(format_quantity(16896, ""), "16,896");
  EXPECT_EQ(format_quantity(0.375, "%"), "37.5%");
  EXPECT_EQ(format_quantity(2.24e12, "b/s"), "2.24 Tb/s");
  Report r;
  Section& s = r.section("a", "A");
  add_row(s, "x", "x", 2, "B", "1 + 1", "one plus one");
  add_text(s, "y", "y", "yes");
  const Json j = render_json(r);
  EXPECT_EQ(j["values"]["x"], 2);
  EXPECT_EQ(j["values"]["y"], "yes");
  EXPECT_NE(render_text(r, true).find("= one plus one"), std::string::npos);
  EXPECT_EQ(render_text(r, false).find("one plus one"), std::string::npos);
}

}  // namespace
}  // namespace lmstack::calc
