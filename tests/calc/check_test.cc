// calc check: predictions for run-metrics files against hand-computed values, verdicts for
// runs that match, miss, or beat their roofline; and `this` hardware from a doctor report.
#include <gtest/gtest.h>

#include "lmstack/calc/reports.h"
#include "lmstack/calc/run_metrics.h"
#include "lmstack/core/machine_probe.h"

namespace lmstack::calc {
namespace {

RunMetrics llama_run() {
  RunMetrics r;
  r.kind = "bench_decode";
  r.model = "llama-3-8b";
  r.setup.dtype = "bf16";
  r.setup.kv_dtype = "f32";
  r.setup.prompt_tokens = 128;
  r.setup.generated_tokens = 64;
  r.machine = "h100-sxm";
  return r;
}

std::string verdict(const Report& r, const std::string& key) {
  const Row* row = r.find(key + "_verdict");
  return row ? row->text : "missing";
}

TEST(Check, ExactBytesPass) {
  RunMetrics run = llama_run();
  run.measured.weights_bytes = 8030261248.0 * 2;               // HF count x bf16
  run.measured.kv_cache_bytes = 2.0 * 32 * 8 * 128 * 4 * 192;  // 2 L kv d x f32 x 192 tokens
  int flagged = -1;
  const Report r = check_report(run, hardware_for_run(run, {}), {}, &flagged);
  EXPECT_EQ(flagged, 0);
  EXPECT_DOUBLE_EQ(r.value("weights_bytes_ratio"), 1.0);
  EXPECT_DOUBLE_EQ(r.value("kv_cache_bytes_ratio"), 1.0);
  EXPECT_EQ(verdict(r, "weights_bytes"), "ok");
}

TEST(Check, WrongBytesAreFlagged) {
  RunMetrics run = llama_run();
  run.measured.weights_bytes = 8030261248.0 * 4;  // f32 weights reported as bf16
  int flagged = 0;
  const Report r = check_report(run, hardware_for_run(run, {}), {}, &flagged);
  EXPECT_EQ(flagged, 1);
  EXPECT_DOUBLE_EQ(r.value("weights_bytes_ratio"), 2.0);
  EXPECT_TRUE(verdict(r, "weights_bytes").starts_with("FLAG"));
}

TEST(Check, DecodeBoundOnCpuFromDoctorReport) {
  MachineReport m;
  m.cpu_model = "test cpu";
  m.physical_cores = m.logical_cpus = 2;
  m.dram_read_gbs = 20;
  m.peak_f32_avx2_gflops = 100;
  RunMetrics run;
  run.kind = "bench_decode";
  run.model = "smollm-135m";
  run.setup.dtype = "f32";
  run.setup.prompt_tokens = 100;
  run.setup.generated_tokens = 200;  // mean context 100 + 200/2 = 200
  run.machine = machine_report_to_json(m);
  // By hand: tied model, so every weight is read per token: 134,515,008 x 4 B; KV f32 per token
  // 2 x 30 layers x 3 kv heads x 64 x 4 B = 46,080 B, times the mean context of 200.
  const double bound = 20e9 / (134515008.0 * 4 + 46080.0 * 200);
  run.measured.decode_tok_s = 0.5 * bound;
  int flagged = 0;
  const HardwareSpec hw = hardware_for_run(run, {});
  EXPECT_TRUE(hw.is_cpu);
  const Report r = check_report(run, hw, {}, &flagged);
  EXPECT_NEAR(r.value("decode_tok_s"), bound, bound * 1e-9);
  EXPECT_NEAR(r.value("decode_tok_s_ratio"), 0.5, 1e-9);
  EXPECT_EQ(flagged, 0);
  run.measured.decode_tok_s = 1.5 * bound;  // faster than the roofline: impossible
  check_report(run, hw, {}, &flagged);
  EXPECT_EQ(flagged, 1);
  run.measured.decode_tok_s = 0.001 * bound;  // far below: flagged as inefficient
  check_report(run, hw, {}, &flagged);
  EXPECT_EQ(flagged, 1);
}

TEST(Check, TrainingStatesAndActivations) {
  RunMetrics run;
  run.kind = "train";
  run.model = "gpt2";
  run.machine = "a100-80g";
  run.setup.precision = "fp32";
  run.setup.seq = 1024;
  run.setup.micro_batch = 4;
  run.measured.gradients_bytes = 124439808.0 * 4;
  run.measured.optimizer_bytes = 124439808.0 * 8;
  // Korthikanti eq. (1) for GPT-2: s b h (34 + 5 a s / h) x L.
  run.measured.activations_bytes = 1024.0 * 4 * 768 * (34 + 5.0 * 12 * 1024 / 768) * 12;
  run.measured.flops_per_token = 2.0 * 123532032 + 4.0 * 12 * 12 * 64 * 1024;  // 2N + 4LHQT
  int flagged = -1;
  const Report r = check_report(run, hardware_for_run(run, {}), {}, &flagged);
  EXPECT_EQ(flagged, 0) << render_text(r, false);
  for (const char* k :
       {"gradients_bytes", "optimizer_bytes", "activations_bytes", "flops_per_token"})
    EXPECT_NEAR(r.value(std::string(k) + "_ratio"), 1.0, 1e-12) << k;
}

TEST(Check, UnknownModelInRunIsAnError) {
  RunMetrics run = llama_run();
  run.model = "llama-9";
  run.measured.weights_bytes = 1;
  EXPECT_THROW(check_report(run, hardware_preset("h100-sxm"), {}, nullptr), ConfigError);
}

}  // namespace
}  // namespace lmstack::calc
