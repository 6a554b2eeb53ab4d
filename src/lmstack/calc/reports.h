// The report builders behind each `lmstack calc` subcommand. Each takes parsed options, validates
// them (RequestError / ConfigError naming the option and why), and returns a Report whose rows
// carry value, unit, formula and derivation. The CLI (cli/cmd_calc*.cc) only parses and prints.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lmstack/calc/flops.h"
#include "lmstack/calc/hardware.h"
#include "lmstack/calc/model_shape.h"
#include "lmstack/calc/predict.h"
#include "lmstack/calc/report.h"
#include "lmstack/calc/run_metrics.h"

namespace lmstack::calc {

// calc model: parameters by part, FLOPs per token at `context` tokens.
Report model_report(const ModelShape& m, double context, AttnConvention c);

struct TrainOptions {
  double tokens = 0;  // D, training tokens
  int gpus = 1;
  int dp = 0, tp = 1, pp = 1, ep = 1;  // dp = 0: gpus / (tp * pp)
  int zero = 0;
  int micro_batch = 1;
  int seq = 0;         // 0: the model's max_position (capped at 4096)
  int grad_accum = 1;  // micro-batches per step per DP rank (the m of the bubble)
  // > 0: tokens per optimizer step; grad_accum is then derived from it (micro_batches_per_step).
  double global_batch_tokens = 0;
  int virtual_stages = 1;  // Megatron interleaved 1F1B: model chunks per pipeline rank (v)
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = true;
  double mfu = 0.4;  // assumed end-to-end MFU for calc train's "time at MFU"
  // Fraction of the dense peak the GPU sustains while it computes (GEMMs, attention and the
  // element-wise work between them); the step model adds the pipeline bubble, recomputation and
  // exposed communication on top, so the MFU it predicts is lower. 0.5 is a round middle of the
  // 44-52% of A100 peak Megatron-LM sustains (Narayanan et al. 2021, Table 1); it is not fitted to
  // the published layouts the tests compare against. Set it from a profile of your kernels.
  double compute_efficiency = 0.5;
  std::string precision = "mixed";  // TrainPrecision::parse
  std::string dtype = "bf16";       // compute precision for the peak
  std::string act_dtype = "bf16";   // activations sent by TP, PP and EP (dtype_bytes names)
  int gpus_per_node = 0;            // 0: min(8, the GPU's NVLink domain) (72 on NVL72)
  std::string nic = "ndr";          // link between nodes, one NIC per GPU
  AttnConvention attention = AttnConvention::kPalm;
};
// The layout actually used (dp filled in, grad_accum derived from global_batch_tokens when set)
// after validation; throws RequestError naming the option when tp does not divide heads (or KV
// heads), pp exceeds the layers, virtual_stages does not divide the layers of a stage, ep does
// not divide experts or dp, tp * pp * dp != gpus, or the global batch does not split evenly.
TrainOptions resolve_layout(const ModelShape& m, const TrainOptions& o);
// Micro-batches each DP rank runs per step when a step holds `global_batch_tokens` tokens:
// global batch / (dp x micro_batch x seq). Sequences per step = round(global / seq); throws
// RequestError when dp x micro_batch does not divide them.
int micro_batches_per_step(double global_batch_tokens, int seq, int dp, int micro_batch);
double sequences_per_step(double global_batch_tokens, int seq);  // round(global / seq)
// Layers on the busiest pipeline stage: ceil(L / pp) (Llama 3 405B: 126 layers on 16 stages ->
// 8; Megatron needs L % pp == 0, Llama 3 and torchtitan split unevenly).
int layers_per_stage(const ModelShape& m, int pp);
// Pipeline bubble over the ideal compute time: (pp-1)/m for 1F1B (GPipe, Narayanan et al. 2021
// sec. 2.2.1), (pp-1)/(v m) interleaved with v chunks per rank when m >= pp; with m < pp each
// interleaved round waits for the micro-batch to come back from the last rank.
double pipeline_bubble(int pp, int virtual_stages, int micro_batches);
Report train_report(const ModelShape& m, const HardwareSpec& hw, const TrainOptions& o);

struct InferOptions {
  std::string dtype = "bf16";
  std::string kv_dtype;  // "" = dtype (int8/int4 weights keep a bf16 cache)
  int batch = 1;
  int prompt = 512;
  int output = 256;
  int tp = 1;
};
Report infer_report(const ModelShape& m, const HardwareSpec& hw, const InferOptions& o);

struct RooflinePoint {
  std::string label;
  double flops = 0, bytes = 0;
};
struct RooflineOptions {
  std::string dtype = "bf16";
  std::vector<RooflinePoint> points;
};
// GEMM C[M,N] = A[M,K] B[K,N]: 2MNK FLOPs over (MK + KN + MN) elements moved once.
RooflinePoint gemm_point(double m, double n, double k, const std::string& dtype);
// Fused causal attention of batch b, h heads, s tokens, head dim d: 2 matmuls of 2*s*s*d per
// head, halved by the causal mask; Q, K, V read and O written once (flash-style).
RooflinePoint attention_point(double b, double heads, double s, double d, const std::string& dtype);
// One decode step of `batch` sequences at `context` tokens (decode_bound's bytes and FLOPs).
RooflinePoint decode_point(const ModelShape& m, const HardwareSpec& hw, const std::string& dtype,
                           double batch, double context);
Report roofline_report(const HardwareSpec& hw, const RooflineOptions& o);
// The roofline (log-log, attainable FLOP/s vs FLOP/byte) with the points, as an SVG document.
std::string roofline_svg(const HardwareSpec& hw, const RooflineOptions& o);

struct CommOptions {
  double bytes = 0;  // message size S: the buffer each rank all-reduces
  int ranks = 2;
  std::string link = "nvlink-h100";
  double within_s = 0;  // > 0: also the bandwidth needed to all-reduce S in this time
};
Report comm_report(const CommOptions& o);
// Alpha-beta times (seconds) over n ranks with per-rank bandwidth bw (bytes/s), latency alpha.
double ring_allreduce_s(double bytes, int n, double bw, double alpha);
double tree_allreduce_s(double bytes, int n, double bw, double alpha);
double allgather_s(double bytes, int n, double bw, double alpha);  // bytes = gathered output
double alltoall_s(double bytes, int n, double bw, double alpha);   // bytes = each rank's buffer
double broadcast_s(double bytes, int n, double bw, double alpha);  // pipelined chain
// The link between processes of one machine talking through shared memory (MPI's vader/sm
// transport without single-copy): each byte a rank sends is copied into the shared segment and
// out again, 2 copies = 4 bytes of memory traffic, and the n ranks share the memory bandwidth
// `memory_bw`: beta = memory_bw / (4 n); alpha 1 us (OpenMPI shared-memory latency ~0.3-1 us).
LinkSpec shared_memory_link(double memory_bw, int n);

struct ClusterOptions {
  int gpus = 1024;
  int gpus_per_node = 8;
  std::string nic = "ndr";
  int switch_ports = 64;
  double oversub_down = 1, oversub_up = 1;  // leaf down:up ports, "1:1"
};
Report cluster_report(const ClusterOptions& o);

struct PlanOptions {
  TrainOptions base;  // tokens, gpus, micro_batch, seq, efficiency, precision, nic, ...
  double global_batch_tokens = 4 * 1024 * 1024;  // fixed: each layout derives its micro-batches
  int top = 5;
  // > 0: the layout to place in the ranking (e.g. a published one): the best candidate with
  // this tp and pp (and virtual_stages / zero when > 0 / >= 0), evaluated even if it does not fit.
  int compare_tp = 0, compare_pp = 0, compare_virtual_stages = 0, compare_zero = -1;
  std::optional<Recompute> compare_recompute;
};
Report plan_report(const ModelShape& m, const HardwareSpec& hw, const PlanOptions& o);

// `calc check`: predictions for a run-metrics file (run_metrics.h) against what it measured.
struct CheckOptions {
  double tolerance = 0.05;       // |measured/predicted - 1| allowed for exact quantities
  double min_efficiency = 0.02;  // bounds: a ratio below this is flagged too
  std::string hw_name = "this";  // used when the file names no machine
  std::string machine_file;      // doctor JSON for "this"
};
// The machine a run ran on: its `machine` field (doctor object or preset name), else
// resolve_hardware(o.hw_name, o.machine_file).
HardwareSpec hardware_for_run(const RunMetrics& run, const CheckOptions& o);
// For each measured field: row "<field>" = predicted, "<field>_measured", "<field>_ratio" =
// measured / predicted, text "<field>_verdict" = "ok" or "FLAG: ...". `num_flagged` (optional)
// receives the number of flags.
Report check_report(const RunMetrics& run, const HardwareSpec& hw, const CheckOptions& o,
                    int* num_flagged);

}  // namespace lmstack::calc
