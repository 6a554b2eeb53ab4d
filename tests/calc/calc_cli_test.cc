// `lmstack calc` end to end: every subcommand runs with --json (parsed here) and --explain,
// writes its plot, exits 3 on a flagged check, and reports bad input naming what is wrong.
#include <gtest/gtest.h>

#include "lmstack/calc/run_metrics.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/core/machine_probe.h"
#include "test_util.h"

namespace lmstack::calc {
namespace {

std::string calc(const std::string& args, int* status) {
  std::string out;
  *status = test::run_command(test::lmstack_binary() + " calc " + args, &out, true);
  return out;
}

Json calc_json(const std::string& args) {
  int status = 0;
  const std::string out = calc(args + " --json", &status);
  EXPECT_EQ(status, 0) << args << "\n" << out;
  return status == 0 ? parse_json(out, args)["values"] : Json::object();
}

TEST(CalcCli, EverySubcommandSpeaksJson) {
  EXPECT_EQ(calc_json("model llama-3-8b")["params_total"], 8030261248.0);
  EXPECT_EQ(calc_json("train llama-2-7b --tokens 2e12 --gpus 64 --gpu a100-80g --zero 3 --seq 2048 "
                      "--recompute full")["fits"]
                .get<std::string>()
                .substr(0, 3),
            "yes");
  EXPECT_EQ(calc_json("infer llama-3-8b --gpu h100-sxm --batch 100 --prompt 4096 --output "
                      "4096")["kv_cache_bytes"],
            131072.0 * 8192 * 100);
  EXPECT_EQ(calc_json("comm --bytes 280GB --ranks 128 --link ndr --within 1")["needed_bits_per_s"],
            2.24e12);
  EXPECT_EQ(calc_json("cluster --gpus 1024 --gpus-per-node 8 --nic ndr")["spine_switches"], 16);
  EXPECT_GT(calc_json("plan llama-2-7b --gpus 16 --gpu h100-sxm --tokens 1e12")["layouts_fitting"],
            0);
  EXPECT_EQ(calc_json("roofline --gpu h100-sxm --gemm 4096,4096,4096")["p0_bound"], "compute");
}

TEST(CalcCli, ExplainAndPlot) {
  int status = 0;
  std::string out = calc("infer llama-3-8b --gpu h100-sxm --explain", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("      = 2 x 32 x 8 x 128 x 2 / 1 = 131072 B"), std::string::npos) << out;
  const std::string svg = path_join(test::temp_dir("calc_cli"), "roof.svg");
  out = calc("roofline --gpu a100-80g --decode llama-3-8b --batch 8 --plot " + svg, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_TRUE(read_file(svg).starts_with("<svg"));
  out = calc(
      "plan llama-3.1-405b --gpus 16384 --tokens 15.6e12 --seq 8192 "
      "--global-batch-tokens 16777216 --nic roce-400 --tp 8 --pp 16 --recompute selective "
      "--explain",
      &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("the activation memory model"), std::string::npos) << out;
  out = calc("list", &status);
  EXPECT_NE(out.find("deepseek-v3"), std::string::npos);
}

TEST(CalcCli, ThisMachineFromDoctorFile) {
  MachineReport m;
  m.cpu_model = "test cpu";
  m.physical_cores = m.logical_cpus = 2;
  m.dram_read_gbs = 25;
  m.peak_f32_avx2_gflops = 150;
  const std::string path = path_join(test::temp_dir("calc_cli_this"), "doctor.json");
  write_file_atomic(path, machine_report_to_json(m).dump());
  const Json v =
      calc_json("roofline --gpu this --machine " + path + " --dtype f32 --gemm 64,64,64");
  EXPECT_DOUBLE_EQ(v["ridge"].get<double>(), 150.0 / 25);
}

TEST(CalcCli, CheckExitsThreeWhenFlagged) {
  const std::string dir = test::temp_dir("calc_cli_check");
  RunMetrics run;
  run.kind = "generate";
  run.model = "gpt2";
  run.machine = "h100-sxm";
  run.setup.dtype = "f32";
  run.measured.weights_bytes = 124439808.0 * 4;
  write_file_atomic(path_join(dir, "ok.json"), run_metrics_to_json(run).dump());
  run.measured.weights_bytes = 124439808.0 * 3;
  write_file_atomic(path_join(dir, "bad.json"), run_metrics_to_json(run).dump());
  int status = 0;
  std::string out = calc("check " + path_join(dir, "ok.json"), &status);
  EXPECT_EQ(status, 0) << out;
  out = calc("check " + path_join(dir, "bad.json"), &status);
  EXPECT_EQ(status, 3) << out;
  EXPECT_NE(out.find("FLAG"), std::string::npos) << out;
}

TEST(CalcCli, BadInputSaysWhy) {
  const std::string dir = test::temp_dir("calc_cli_bad");
  const std::string cfg = path_join(dir, "config.json");
  write_file_atomic(cfg, R"({"model_type":"llama","vocab_size":32000,"num_hidden_layers":2})");
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"model llama-9", "tinyllama-1.1b"},
      {"model " + cfg, "hidden_size"},
      {"train llama-3-8b --tokens 1e9 --gpus 6 --tp 3", "32 attention heads"},
      {"train llama-3-8b --tokens 1e9 --gpus 33 --pp 33", "32 layers"},
      {"train llama-3-8b --tokens 1e9 --gpus 8 --global-batch-tokens 12288 --seq 4096",
       "not a multiple of dp 8"},
      {"plan llama-3-8b --tokens 1e9 --gpus 8 --global-batch-tokens 100", "one sequence"},
      {"plan llama-3-8b --tokens 1e9 --gpus 8 --tp 8", "--tp and --pp"},
      {"infer llama-3-8b --gpu tpu", "h100-sxm"},
      {"comm --bytes 12XB --ranks 8", "--bytes"},
      {"roofline --gpu h100-sxm --gemm 1,2", "--gemm"},
      {"check " + path_join(dir, "missing.json"), "missing.json"},
  };
  for (const Case& c : cases) {
    int status = 0;
    const std::string out = calc(c.args, &status);
    EXPECT_EQ(status, 1) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.needle), std::string::npos) << c.args << "\n" << out;
  }
}

}  // namespace
}  // namespace lmstack::calc
