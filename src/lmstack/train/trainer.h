// The training-step driver and the third error boundary of STYLE.md: it sets up the model
// (a Hugging Face directory, a preset, or a config.json, initialized by model/init_model),
// the data loader, AdamW and the JSONL log, resumes from the latest checkpoint when asked
// (refusing, with the differences listed, a checkpoint made with other settings), then runs
// steps of forward/backward over G micro-batches, clipping, the scheduled learning rate and
// AdamW. A NaN/Inf loss, an I/O failure or any lmstack::Error stops the run without writing
// a checkpoint of the bad state; the last good one stays `latest`. Ctrl-C (the `stop` flag)
// saves a checkpoint after the current step, then returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "lmstack/core/dtype.h"
#include "lmstack/core/json.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/dist/comm.h"
#include "lmstack/train/adamw.h"

namespace lmstack::train {

struct TrainConfig {
  std::string model_dir;    // initial weights: an HF directory, or
  std::string init_preset;  // a model/presets.h name, or
  std::string init_config;  // an HF config.json file (random init, seed = `seed`)
  std::string data_dir;     // prepare-data output
  std::string out_dir;
  int64_t steps = 100;
  int batch = 4, seq = 128, grad_accum = 1;
  LrConfig lr;  // lr.total is set to steps
  AdamWConfig adam;
  double grad_clip = 1.0;  // <= 0: off
  DType dtype = DType::kF32;
  bool recompute = false;
  uint64_t seed = 0;
  int64_t eval_every = 0, save_every = 0;  // 0: only at the end
  int eval_batches = 8;
  int keep_checkpoints = 2;
  bool resume = false;
  std::string log_path;   // JSONL; "" = none
  double peak_flops = 0;  // FLOP/s of this machine for MFU (0 = not reported)
  Json machine;           // doctor report for the log (null = none)
  bool progress = true;   // progress line on stderr
  const std::atomic<bool>* stop = nullptr;
  // Data parallelism (data_parallel.h). `batch` is the global micro-batch: rank r of N takes
  // sequences [r·batch/N, (r+1)·batch/N) of each one (Megatron's global batch = batch ·
  // grad_accum, split over ranks), so the batches and their order equal the single-process
  // run's. The data-parallel engine (sharded checkpoints) runs when the world has more than
  // one rank, zero > 0 or a trace is asked for; otherwise the single-process path.
  dist::Comm* comm = nullptr;  // nullptr: dist::world()
  int dp = 0;                  // expected world size (0: whatever the launcher started)
  int zero = 0;
  int64_t bucket_bytes = 25LL << 20;
  std::string trace_path;  // Chrome trace JSON of forward/backward/communication spans
  // Tensor and pipeline parallelism (model_parallel.h): with tp·pp > 1 the world is a
  // tp x dp x pp mesh (dp = world / (tp·pp) when 0) and grad_accum is the number of pipeline
  // micro-batches per step.
  int tp = 1, pp = 1;
  std::string pp_schedule = "1f1b";  // gpipe | 1f1b | interleaved
  int pp_chunks = 2;                 // model chunks per rank of the interleaved schedule
  std::vector<int> pp_layers;        // layers per (virtual) stage; empty: even
  bool sequence_parallel = false;    // Korthikanti et al. 2022 (with tp > 1)
  // Expert parallelism (expert_data_parallel.h): the routed experts split over groups of `ep`
  // consecutive ranks, dispatched with all-to-alls; the dense part data-parallel over the
  // world. 1: off.
  int ep = 1;
  // MoE models (moe_train.h): the load-balancing loss weight (< 0: the config's
  // router_aux_loss_coef / aux_loss_alpha, else 0.01) and DeepSeek-V3's bias update rate
  // (0: off; models with e_score_correction_bias only).
  double moe_aux_loss_coef = -1;
  float moe_bias_update_rate = 0;
};

struct TrainResult {
  int64_t first_step = 0, last_step = 0;  // steps run by this call: (first_step, last_step]
  double last_loss = 0, last_eval_loss = -1;
  double tok_s = 0, mfu = 0;
  bool interrupted = false;
  std::string checkpoint;  // the newest checkpoint directory
  int64_t num_parameters = 0;
  double comm_hidden_fraction = -1;  // share of communication time under the backward (trace)
};

// Runs the training. Throws lmstack::Error subclasses (after reporting the last good
// checkpoint on stderr) on bad configuration, data, I/O or a non-finite loss.
TrainResult run_training(const TrainConfig& config, ThreadPool& pool);

// Training FLOPs per token, PaLM's convention (Chowdhery et al. 2022, appendix B):
// 6·N_matmul + 12·L·T·(H·D), N_matmul counting every matmul weight (lm_head included, tied
// or not; embedding lookups and norms excluded). MoE layers count their active weights: the
// router, top_k routed experts and the shared expert.
double train_flops_per_token(const model::ModelConfig& c, int seq);

}  // namespace lmstack::train
