// Training layout arithmetic. Memory: ZeRO paper sec. 3.1/5 (predict.h); activations:
// Korthikanti et al. 2022 Table 2; bubble: GPipe/Megatron (p-1)/m; communication volumes:
// ring all-reduce 2(n-1)/n x S (Patarasuk & Yuan 2009), ZeRO-2 = all-reduce volume, ZeRO-3 =
// 1.5x (ZeRO paper sec. 7), Megatron TP: 2 all-reduces of b*s*h forward + 2 backward per layer
// (Shoeybi et al. 2019, fig. 4), PP: one activation forward + one gradient back per
// micro-batch per stage boundary, EP: dispatch + combine all-to-all forward and backward.
#include "lmstack/calc/train_estimate.h"

#include <fmt/format.h>

#include <algorithm>

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

void dp_cost(const TrainEstimate& e, const HardwareSpec& hw, CommCost& c) {
  const TrainOptions& o = e.layout;
  const int n = o.dp;
  c = group_link(hw, o, o.tp * o.dp);
  if (n == 1) return;
  const LinkSpec l = link_preset(c.link);
  const double G = e.params_per_gpu * TrainPrecision::parse(o.precision).grad;
  const double W = e.params_per_gpu * TrainPrecision::parse(o.precision).weight;
  c.bytes = dp_comm_bytes(e.params_per_gpu, TrainPrecision::parse(o.precision), o.zero, n);
  if (o.zero <= 1) {
    c.time_s = ring_allreduce_s(G, n, l.bw, l.latency);
    c.formula = "ring all-reduce of grads: 2(dp-1)/dp x G";
  } else {
    const double gathers = o.zero == 3 ? 2 : 1;  // ZeRO-3 gathers weights in forward and backward
    c.time_s = allgather_s(G, n, l.bw, l.latency) + gathers * allgather_s(W, n, l.bw, l.latency);
    c.formula = o.zero == 3 ? "reduce-scatter G + 2 all-gathers of W: (dp-1)/dp x (G + 2W)"
                            : "reduce-scatter G + all-gather W: (dp-1)/dp x (G + W)";
  }
}

void model_parallel_costs(const ModelShape& m, const HardwareSpec& hw, TrainEstimate& e) {
  const TrainOptions& o = e.layout;
  const double A = static_cast<double>(o.micro_batch) * o.seq * m.hidden_size * 2;  // bf16 b*s*h
  const double layers = static_cast<double>(m.num_layers) / o.pp, mb = o.grad_accum;
  e.tp = group_link(hw, o, o.tp);
  if (o.tp > 1) {
    const LinkSpec l = link_preset(e.tp.link);
    const double per_layer = o.recompute == Recompute::kFull ? 6 : 4;  // + re-forward
    const double count = layers * mb * per_layer;
    e.tp.bytes = count * 2.0 * (o.tp - 1) / o.tp * A;
    e.tp.time_s = count * ring_allreduce_s(A, o.tp, l.bw, l.latency);
    e.tp.formula = fmt::format("{:.0f} all-reduces/layer x L/pp x m of b*s*h*2 B", per_layer);
  }
  e.pp = group_link(hw, o, o.tp * o.dp * o.pp);
  if (o.pp > 1) {
    const LinkSpec l = link_preset(e.pp.link);
    e.pp.bytes = 2 * mb * A;
    e.pp.time_s = 2 * mb * (l.latency + A / l.bw);
    e.pp.formula = "2 x m x b*s*h*2 B (activation forward, gradient back)";
  }
  e.ep = group_link(hw, o, o.tp * o.ep);
  if (o.ep > 1 && m.is_moe()) {
    const LinkSpec l = link_preset(e.ep.link);
    const double X = A * m.experts_per_token;
    const double moe_layers = static_cast<double>(m.num_moe_layers()) / o.pp;
    const double count = 4 * moe_layers * mb;
    e.ep.bytes = count * (o.ep - 1.0) / o.ep * X;
    e.ep.time_s = count * alltoall_s(X, o.ep, l.bw, l.latency);
    e.ep.formula = "4 all-to-alls/MoE layer x m of b*s*k*h*2 B";
  }
}

double params_per_gpu(const ModelShape& m, const TrainOptions& o) {
  const ParamCount p = count_parameters(m);
  const double experts = static_cast<double>(p.get("experts"));
  return (static_cast<double>(p.total()) - experts + experts / o.ep) / (o.tp * o.pp);
}

}  // namespace

TrainEstimate estimate_train(const ModelShape& m, const HardwareSpec& hw, const TrainOptions& in) {
  TrainEstimate e;
  e.layout = resolve_layout(m, in);
  const TrainOptions& o = e.layout;
  e.params_per_gpu = params_per_gpu(m, o);
  e.states = zero_state_bytes(e.params_per_gpu, TrainPrecision::parse(o.precision), o.zero, o.dp);
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
  e.activations = activation_bytes(a);
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
  const double cluster_flops = o.gpus * hw.compute_flops(o.dtype) * o.mfu;
  e.time_at_mfu_s = e.total_flops / cluster_flops;
  e.bubble = static_cast<double>(o.pp - 1) / o.grad_accum;
  e.compute_step_s = (e.flops_per_token + recompute_flops) * e.tokens_per_step / cluster_flops;
  dp_cost(e, hw, e.dp);
  model_parallel_costs(m, hw, e);
  const double hidden_dp = std::max(0.0, e.dp.time_s - e.compute_step_s * 2 / 3);
  e.step_s =
      e.compute_step_s * (1 + e.bubble) + e.tp.time_s + e.pp.time_s + e.ep.time_s + hidden_dp;
  return e;
}

TrainOptions resolve_layout(const ModelShape& m, const TrainOptions& in) {
  TrainOptions o = in;
  if (o.gpus < 1 || o.tp < 1 || o.pp < 1 || o.ep < 1 || o.dp < 0)
    throw_error<RequestError>("--gpus, --tp, --pp, --ep must be >= 1");
  if (m.num_heads % o.tp != 0)
    throw_error<RequestError>("--tp {} does not divide the {} attention heads of {}", o.tp,
                              m.num_heads, m.name);
  if (!m.is_mla() && m.num_kv_heads % o.tp != 0 && o.tp % m.num_kv_heads != 0)
    throw_error<RequestError>("--tp {} neither divides nor is a multiple of the {} KV heads of {}",
                              o.tp, m.num_kv_heads, m.name);
  if (m.num_layers % o.pp != 0)
    throw_error<RequestError>("--pp {} does not divide the {} layers of {}", o.pp, m.num_layers,
                              m.name);
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
  if (o.micro_batch < 1 || o.grad_accum < 1)
    throw_error<RequestError>("--micro-batch and --grad-accum must be >= 1");
  if (o.seq <= 0)
    o.seq = static_cast<int>(m.max_position > 0 ? std::min<int64_t>(m.max_position, 4096) : 4096);
  if (!(o.tokens > 0)) throw_error<RequestError>("--tokens must be > 0");
  TrainPrecision::parse(o.precision);
  return o;
}

}  // namespace lmstack::calc
