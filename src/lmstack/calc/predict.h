// The prediction functions behind `calc train`, `calc infer` and `calc check`, exposed so other
// layers' commands can print "calc predicts X" beside a measurement. Pure functions of their
// arguments; bytes are per GPU (per rank); rates per second. Derivations:
//   weights/grads/optimizer: ZeRO paper (Rajbhandari et al. 2020, sec. 3.1 and 5): mixed-
//     precision Adam keeps 2 (fp16/bf16 weights) + 2 (grads) + K = 12 (fp32 master, m, v) bytes
//     per parameter; stage 1 shards the 12, stage 2 also the grads, stage 3 also the weights.
//   activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
//     Transformer Models", Table 2 (per layer, 16-bit activations, GPT-style block).
//   KV cache: 2 (K and V) x L x kv_heads x head_dim x bytes per token; MLA caches the
//     compressed latent plus the shared rope key: L x (kv_lora_rank + d_rope) x bytes.
#pragma once

#include <string>

#include "lmstack/calc/flops.h"
#include "lmstack/calc/hardware.h"
#include "lmstack/calc/model_shape.h"
#include "lmstack/calc/params.h"

namespace lmstack::calc {

enum class Recompute { kNone, kSelective, kFull };
Recompute parse_recompute(const std::string& s);  // ConfigError naming the value
const char* recompute_name(Recompute r);

// Bytes per parameter of a training setup.
struct TrainPrecision {
  double weight = 2, grad = 2, optimizer = 12;  // mixed precision Adam (ZeRO's K = 12)
  static TrainPrecision mixed() { return {}; }
  static TrainPrecision fp32() { return {4, 4, 8}; }  // fp32 Adam: 4 + 4 + m 4 + v 4 = 16
  static TrainPrecision parse(const std::string& s);  // "mixed" | "fp32"
};

struct StateBytes {
  double weights = 0, gradients = 0, optimizer = 0;
  double total() const { return weights + gradients + optimizer; }
};
// Model states per GPU of `params` parameters (already divided by TP x PP) under ZeRO `stage`
// over `dp` data-parallel ranks.
StateBytes zero_state_bytes(double params, const TrainPrecision& p, int stage, int dp);
// When ZeRO 2-3 reduce-scatter the gradients: once per step after accumulating them whole
// (lmstack's train::DataParallel), or after every micro-batch's backward, keeping only the shard
// (DeepSpeed, FSDP; what `calc train` assumes).
enum class GradReduce { kPerStep, kPerMicroBatch };
// Bytes each data-parallel rank sends per step: ZeRO 0-1 a ring all-reduce of the gradients
// G, 2(dp-1)/dp x G; ZeRO 2 r reduce-scatters of G and an all-gather of the weights W,
// (dp-1)/dp x (r·G + W); ZeRO 3 gathers W twice (forward and backward) per micro-batch,
// (dp-1)/dp x (r·G + 2·micro_batches·W). r = 1 (kPerStep) or micro_batches (kPerMicroBatch).
double dp_comm_bytes(double params, const TrainPrecision& p, int stage, int dp,
                     double micro_batches = 1, GradReduce reduce = GradReduce::kPerStep);

// Expert parallelism, bytes one rank sends per step (lmstack's train --ep; DeepSpeed-MoE and
// Megatron exchange the same volumes). Each MoE layer and micro-batch runs four all-to-alls of
// the rank's T·k (token, expert) rows of h activations: dispatch and return in the forward,
// the same two on the gradients in the backward. With uniform routing a row's expert lives on
// another rank of the ep group with probability (ep-1)/ep, so
//   all_to_all = 4 · moe_layers · m · T·k·h·act_bytes · (ep-1)/ep
//              + moe_layers · m · (ep-1) · (E/ep) · 4      (the int32 row counts, forward)
// and the experts' gradients are all-reduced over the d = dp/ep ranks holding the same ones:
//   expert_all_reduce = 2(d-1)/d · (expert params / ep) · grad_bytes.
// The dense part's reduction is dp_comm_bytes of the non-expert parameters over all dp ranks.
struct EpShape {
  double tokens = 0;  // T: token rows per rank and micro-batch (micro_batch x seq)
  double top_k = 1, hidden = 0, moe_layers = 0, num_experts = 0;
  double micro_batches = 1;  // m
  double act_bytes = 2;      // bytes of one activation element
  int ep = 1, dp = 1;        // dp: ranks over which the dense part is reduced (ep divides it)
  double expert_params = 0;  // every routed expert of the model
  double grad_bytes = 4;
};
struct EpBytes {
  double all_to_all = 0, expert_all_reduce = 0;
};
EpBytes ep_comm_bytes(const EpShape& s);

struct ActivationShape {
  double seq = 0, micro_batch = 1, hidden = 0, heads = 0, layers = 0;
  int tp = 1, pp = 1;
  double micro_batches = 1;       // micro-batches per step (pipeline in flight = min(pp, m))
  bool sequence_parallel = true;  // Megatron SP when tp > 1
  Recompute recompute = Recompute::kNone;
  double stage_layers = 0;  // layers on the busiest stage; 0: layers / pp
  int virtual_stages = 1;   // interleaved 1F1B model chunks per pipeline rank
};
// Korthikanti et al. Table 2, bytes per layer on one GPU.
double activation_bytes_per_layer(const ActivationShape& a);
// Bytes of saved activations on the busiest (first) pipeline stage: its L/pp layers times the
// micro-batches it holds in flight under 1F1B, min(pp, micro_batches); the interleaved schedule
// holds (1 + (pp-1)/(pp v)) times that (Korthikanti et al. 2022, sec. 4.2.3).
double activation_bytes(const ActivationShape& a);

// Weight bytes of the whole model in `dtype` (dtype_bytes()).
double weight_bytes(const ParamCount& p, const std::string& dtype);
// Bytes of K and V per token: 2 · L · Hkv · (D · bytes + scale) (MLA: L · ((d_c + d_R) · bytes +
// scale)), scale = kv_scale_bytes(kv_dtype).
double kv_bytes_per_token(const ModelShape& m, const std::string& kv_dtype);
// Bytes of quantization scale per cached row (one token, one kv head): 4 for "int8", whose
// scale is one f32 per token per kv head as lmstack's --kv-dtype int8 stores it; 0 otherwise.
double kv_scale_bytes(const std::string& kv_dtype);

// Decode of `batch` sequences whose contexts average `context` tokens, split over `tp` GPUs.
struct DecodeBound {
  double weight_bytes_read = 0;  // weights touched per step (MoE: expected distinct experts)
  double kv_bytes_read = 0;      // KV cache read per step, all sequences
  double memory_time_s = 0;      // (weights + KV) / (tp x HBM bandwidth)
  double compute_time_s = 0;     // batch x forward FLOPs / (tp x peak)
  double step_time_s() const {
    return memory_time_s > compute_time_s ? memory_time_s : compute_time_s;
  }
  bool memory_bound() const { return memory_time_s >= compute_time_s; }
};
DecodeBound decode_bound(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
                         const std::string& dtype, const std::string& kv_dtype, double batch,
                         double context, int tp = 1);

// Roofline bounds in tokens/s: prefill at `prompt` tokens (compute) and training at `seq`.
double prefill_tok_s_bound(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
                           const std::string& dtype, double prompt, AttnConvention c);
double train_tok_s_bound(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
                         const std::string& dtype, double seq, AttnConvention c);

// Expected distinct experts that `tokens` tokens route to per MoE layer, with top-k of E
// chosen uniformly: E x (1 - (1 - k/E)^tokens).
double expected_experts_touched(double experts, double top_k, double tokens);

}  // namespace lmstack::calc
