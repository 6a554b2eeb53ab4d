// Training layout arithmetic. Memory: ZeRO paper sec. 3.1/5 (predict.h); activations:
// Korthikanti et al. 2022 Table 2; bubble: GPipe/Megatron (p-1)/m, interleaved (p-1)/(v m)
// (Narayanan et al. 2021, sec. 2.2); communication volumes: ring all-reduce 2(n-1)/n x S
// (Patarasuk & Yuan 2009), ZeRO-3 = 1.5x an all-reduce per forward + backward (ZeRO paper
// sec. 7), Megatron TP: 2 all-reduces of b*s*h forward + 2 backward per layer (Shoeybi et al.
// 2019, fig. 4), PP: one activation forward + one gradient back per micro-batch per model
// chunk, b*s*h/t each with Megatron's scatter/gather (Narayanan et al. 2021, sec. 4.1); EP:
// dispatch + combine all-to-all forward and backward.
#include "lmstack/calc/train_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "lmstack/calc/params.h"

namespace lmstack::calc {
namespace {

int gpus_per_node(const HardwareSpec& hw, const TrainOptions& o) {
  if (o.gpus_per_node > 0) return o.gpus_per_node;
  return hw.nvlink_domain > 8 ? hw.nvlink_domain : 8;
}

CommCost group_link(const HardwareSpec& hw, const TrainOptions& o, int span) {
  CommCost c;
  c.intra_node = span <= gpus_per_node(hw, o);
  c.link = c.intra_node ? hw.intra_node_link : o.nic;
  return c;
}

// DP collectives are issued per layer (FSDP's unit, Megatron's buckets), so a ring over n ranks
// pays its (n-1) alpha once per layer of the stage: what makes a DP of thousands slow.
struct DpTimes {
  double allreduce_g = 0, reduce_scatter_g = 0, allgather_w = 0;
};

DpTimes dp_times(const TrainEstimate& e, const LinkSpec& l) {
  const TrainOptions& o = e.layout;
  const TrainPrecision p = TrainPrecision::parse(o.precision);
  const double G = e.params_per_gpu * p.grad, W = e.params_per_gpu * p.weight;
  const double k = e.stage_layers;
  DpTimes t;
  t.allreduce_g = k * ring_allreduce_s(G / k, o.dp, l.bw, l.latency);
  t.reduce_scatter_g = k * allgather_s(G / k, o.dp, l.bw, l.latency);
  t.allgather_w = k * allgather_s(W / k, o.dp, l.bw, l.latency);
  return t;
}

// Per step: ZeRO-0/1 all-reduce the accumulated gradients once. ZeRO-2/3 keep only a shard of
// the gradients, so each micro-batch's are reduce-scattered; ZeRO-2 all-gathers the updated
// weights once, ZeRO-3 gathers them for every micro-batch's forward and again for its backward
// (with one micro-batch: (dp-1)/dp x (G + 2W) = 1.5x an all-reduce, ZeRO paper sec. 7.2).
void dp_cost(TrainEstimate& e, const HardwareSpec& hw) {
  const TrainOptions& o = e.layout;
  CommCost& c = e.dp;
  c = group_link(hw, o, o.tp * o.dp);
  if (o.dp == 1) return;
  const LinkSpec l = link_preset(c.link);
  const double m = o.grad_accum;
  c.bytes = dp_comm_bytes(e.params_per_gpu, TrainPrecision::parse(o.precision), o.zero, o.dp, m,
                          GradReduce::kPerMicroBatch);
  const DpTimes t = dp_times(e, l);
  // Overlap windows (Megatron --overlap-grad-reduce / --overlap-param-gather, FSDP prefetch): a
  // layer's gradient is final only in the last micro-batch's backward, so the reduction hides
  // behind one micro-batch's backward (2/3 of its compute), a gather behind its forward (1/3).
  const double mb = e.compute_step_s / m, fwd = mb / 3, bwd = 2 * mb / 3;
  auto exposed = [](double t_comm, double window) { return std::max(0.0, t_comm - window); };
  if (o.zero <= 1) {
    c.time_s = t.allreduce_g;
    e.dp_exposed_s = exposed(t.allreduce_g, bwd);
    c.formula = "ring all-reduce of grads once per step: 2(dp-1)/dp x G";
  } else if (o.zero == 2) {
    c.time_s = m * t.reduce_scatter_g + t.allgather_w;
    e.dp_exposed_s = m * exposed(t.reduce_scatter_g, bwd) + exposed(t.allgather_w, fwd);
    c.formula = "reduce-scatter G per micro-batch + all-gather W: (dp-1)/dp x (m G + W)";
  } else {
    c.time_s = m * (t.reduce_scatter_g + 2 * t.allgather_w);
    e.dp_exposed_s =
        m * (exposed(t.allgather_w, fwd) + exposed(t.allgather_w + t.reduce_scatter_g, bwd));
    c.formula = "per micro-batch reduce-scatter G + 2 all-gathers of W: (dp-1)/dp x m (G + 2W)";
  }
}

void model_parallel_costs(const ModelShape& m, const HardwareSpec& hw, TrainEstimate& e) {
  const TrainOptions& o = e.layout;
  const double A = static_cast<double>(o.micro_batch) * o.seq * m.hidden_size *
                   dtype_bytes(o.act_dtype);  // b*s*h activations
  const double layers = e.stage_layers, mb = o.grad_accum;
  e.tp = group_link(hw, o, o.tp);
  if (o.tp > 1) {
    const LinkSpec l = link_preset(e.tp.link);
    const double per_layer = o.recompute == Recompute::kFull ? 6 : 4;  // + re-forward
    const double count = layers * mb * per_layer;
    e.tp.bytes = count * 2.0 * (o.tp - 1) / o.tp * A;
    e.tp.time_s = count * ring_allreduce_s(A, o.tp, l.bw, l.latency);
    e.tp.formula = fmt::format("{:.0f} all-reduces/layer x ceil(L/pp) x m of b*s*h*2 B", per_layer);
  }
  e.pp = group_link(hw, o, o.tp * o.dp * o.pp);
  if (o.pp > 1) {
    const LinkSpec l = link_preset(e.pp.link);
    const double count = 2 * mb * o.virtual_stages, msg = A / o.tp;
    e.pp.bytes = count * msg;
    e.pp.time_s = count * (l.latency + msg / l.bw);
    e.pp.formula = "2 x m x v x b*s*h*2/t B (activation forward, gradient back, per chunk)";
  }
  e.ep = group_link(hw, o, o.tp * o.ep);
  if (o.ep > 1 && m.is_moe()) {
    const LinkSpec l = link_preset(e.ep.link);
    const double X = A * m.experts_per_token;
    const double moe_layers = static_cast<double>(m.num_moe_layers()) / o.pp;
    const double count = 4 * moe_layers * mb;
    EpShape s;  // the bytes as calc check predicts a run's (predict.h)
    s.tokens = static_cast<double>(o.micro_batch) * o.seq, s.top_k = m.experts_per_token;
    s.hidden = m.hidden_size, s.moe_layers = moe_layers, s.micro_batches = mb;
    s.num_experts = static_cast<double>(m.num_experts), s.act_bytes = dtype_bytes(o.act_dtype);
    s.ep = o.ep;
    e.ep.bytes = ep_comm_bytes(s).all_to_all;
    e.ep.time_s = count * alltoall_s(X, o.ep, l.bw, l.latency);
    e.ep.formula =
        fmt::format("4 all-to-alls/MoE layer x m of b*s*k*h*{:.0f} B x (ep-1)/ep (uniform routing)",
                    dtype_bytes(o.act_dtype));
  }
}

double params_per_gpu(const ModelShape& m, const TrainOptions& o) {
  const ParamCount p = count_parameters(m);
  const double experts = static_cast<double>(p.get("experts"));
  return (static_cast<double>(p.total()) - experts + experts / o.ep) / (o.tp * o.pp);
}

}  // namespace

ActivationShape train_activation_shape(const ModelShape& m, const TrainEstimate& e) {
  const TrainOptions& o = e.layout;
  ActivationShape a{static_cast<double>(o.seq),
                    static_cast<double>(o.micro_batch),
                    static_cast<double>(m.hidden_size),
                    static_cast<double>(m.num_heads),
                    static_cast<double>(m.num_layers),
                    o.tp,
                    o.pp,
                    static_cast<double>(o.grad_accum),
                    o.sequence_parallel,
                    o.recompute};
  a.stage_layers = e.stage_layers;
  a.virtual_stages = o.virtual_stages;
  return a;
}

TrainEstimate estimate_train(const ModelShape& m, const HardwareSpec& hw, const TrainOptions& in) {
  TrainEstimate e;
  e.layout = resolve_layout(m, in);
  const TrainOptions& o = e.layout;
  e.stage_layers = layers_per_stage(m, o.pp);
  e.stage_imbalance = static_cast<double>(e.stage_layers) * o.pp / m.num_layers;
  e.params_per_gpu = params_per_gpu(m, o);
  e.states = zero_state_bytes(e.params_per_gpu, TrainPrecision::parse(o.precision), o.zero, o.dp);
  e.activations = activation_bytes(train_activation_shape(m, e));
  e.memory_total = e.states.total() + e.activations;
  e.fits = hw.memory_bytes <= 0 || e.memory_total <= hw.memory_bytes;
  e.tokens_per_step = static_cast<double>(o.dp) * o.micro_batch * o.seq * o.grad_accum;
  e.steps = o.tokens / e.tokens_per_step;
  const TokenFlops tf = token_flops(m, count_parameters(m), o.seq, o.attention);
  e.flops_per_token = tf.training();
  // Recomputation executes FLOPs the model does not count (MFU excludes them): a second
  // forward (full) or the attention core again (selective, Korthikanti et al. sec. 5).
  const double recompute_flops = o.recompute == Recompute::kFull        ? tf.forward()
                                 : o.recompute == Recompute::kSelective ? tf.attention_forward
                                                                        : 0;
  e.total_flops = e.flops_per_token * o.tokens;
  const double peak = hw.compute_flops(o.dtype);
  e.time_at_mfu_s = e.total_flops / (o.gpus * peak * o.mfu);
  e.bubble = pipeline_bubble(o.pp, o.virtual_stages, o.grad_accum);
  const double step_flops = (e.flops_per_token + recompute_flops) * e.tokens_per_step;
  e.compute_step_s = step_flops / (o.gpus * peak * o.compute_efficiency) * e.stage_imbalance;
  dp_cost(e, hw);
  model_parallel_costs(m, hw, e);
  e.step_s =
      e.compute_step_s * (1 + e.bubble) + e.tp.time_s + e.pp.time_s + e.ep.time_s + e.dp_exposed_s;
  e.mfu = e.flops_per_token * e.tokens_per_step / (e.step_s * o.gpus * peak);
  e.hw_flops_per_gpu = step_flops / (e.step_s * o.gpus);
  return e;
}

// In chunk-times t/v: rank 0 runs chunk c+1 of micro-batch 0 only after it has left the last
// rank, p units after it entered, so each of the first v-1 rounds takes max(m, p) units; the
// pipeline then drains in p-1. Bubble = ((v-1) max(m,p) + m + p - 1) / (v m) - 1, which is
// (p-1)/(v m) when m >= p (Narayanan et al. 2021 sec. 2.2.2 assume m a multiple of p).
double pipeline_bubble(int pp, int virtual_stages, int micro_batches) {
  const double p = pp, v = virtual_stages, m = micro_batches;
  return ((v - 1) * std::max(m, p) + m + p - 1) / (v * m) - 1;
}

int layers_per_stage(const ModelShape& m, int pp) {
  return static_cast<int>((m.num_layers + pp - 1) / pp);
}

double sequences_per_step(double global_batch_tokens, int seq) {
  return std::round(global_batch_tokens / seq);
}

int micro_batches_per_step(double global_batch_tokens, int seq, int dp, int micro_batch) {
  const double sequences = sequences_per_step(global_batch_tokens, seq);
  const double per_step = static_cast<double>(dp) * micro_batch;
  if (sequences < 1)
    throw_error<RequestError>("--global-batch-tokens {:.6g} is less than one sequence of {}",
                              global_batch_tokens, seq);
  if (std::fmod(sequences, per_step) != 0)
    throw_error<RequestError>(
        "--global-batch-tokens {:.6g} / --seq {} = {:.0f} sequences, not a multiple of dp {} x "
        "--micro-batch {} = {:.0f}",
        global_batch_tokens, seq, sequences, dp, micro_batch, per_step);
  return static_cast<int>(sequences / per_step);
}

TrainOptions resolve_layout(const ModelShape& m, const TrainOptions& in) {
  TrainOptions o = in;
  if (o.gpus < 1 || o.tp < 1 || o.pp < 1 || o.ep < 1 || o.dp < 0 || o.virtual_stages < 1)
    throw_error<RequestError>("--gpus, --tp, --pp, --ep, --virtual-stages must be >= 1");
  if (m.num_heads % o.tp != 0)
    throw_error<RequestError>("--tp {} does not divide the {} attention heads of {}", o.tp,
                              m.num_heads, m.name);
  if (!m.is_mla() && m.num_kv_heads % o.tp != 0 && o.tp % m.num_kv_heads != 0)
    throw_error<RequestError>("--tp {} neither divides nor is a multiple of the {} KV heads of {}",
                              o.tp, m.num_kv_heads, m.name);
  if (o.pp > m.num_layers)
    throw_error<RequestError>("--pp {} exceeds the {} layers of {}", o.pp, m.num_layers, m.name);
  const int stage = layers_per_stage(m, o.pp);
  if (stage % o.virtual_stages != 0 || (o.pp == 1 && o.virtual_stages > 1))
    throw_error<RequestError>(
        "--virtual-stages {} must divide the {} layers of a pipeline stage (and needs --pp > 1)",
        o.virtual_stages, stage);
  if (o.dp == 0) o.dp = o.gpus / (o.tp * o.pp);
  if (o.dp < 1 || o.tp * o.pp * o.dp != o.gpus)
    throw_error<RequestError>("--tp {} x --pp {} x --dp {} = {} GPUs, but --gpus is {}", o.tp, o.pp,
                              o.dp, o.tp * o.pp * o.dp, o.gpus);
  if (o.ep > 1 && !m.is_moe())
    throw_error<RequestError>("--ep {} needs a mixture-of-experts model; {} is dense", o.ep,
                              m.name);
  if (o.ep > 1 && (m.num_experts % o.ep != 0 || o.dp % o.ep != 0))
    throw_error<RequestError>("--ep {} must divide the {} experts and --dp {}", o.ep, m.num_experts,
                              o.dp);
  if (o.zero < 0 || o.zero > 3) throw_error<RequestError>("--zero must be 0..3, got {}", o.zero);
  if (!(o.mfu > 0 && o.mfu <= 1)) throw_error<RequestError>("--mfu must be in (0, 1]");
  if (!(o.compute_efficiency > 0 && o.compute_efficiency <= 1))
    throw_error<RequestError>("--compute-efficiency must be in (0, 1]");
  if (o.micro_batch < 1 || o.grad_accum < 1)
    throw_error<RequestError>("--micro-batch and --grad-accum must be >= 1");
  if (o.seq <= 0)
    o.seq = static_cast<int>(m.max_position > 0 ? std::min<int64_t>(m.max_position, 4096) : 4096);
  if (o.global_batch_tokens > 0)
    o.grad_accum = micro_batches_per_step(o.global_batch_tokens, o.seq, o.dp, o.micro_batch);
  if (!(o.tokens > 0)) throw_error<RequestError>("--tokens must be > 0");
  TrainPrecision::parse(o.precision);
  return o;
}

}  // namespace lmstack::calc
