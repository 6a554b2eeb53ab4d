// `calc check` of a tensor/pipeline-parallel training log (issue 15 item 7): for every rank of
// the run, its weight bytes, the bytes it sent per step in its TP, PP and DP groups, and the
// activation bytes of one micro-batch, predicted from the model shape and the layout by the
// rules below, and the measured bubble against (P-1)/m, (P-1)/(v·m) interleaved.
//   weights: per layer (norms whole, Q/K/V/gate/up by rows, O/down by columns over T; KV heads
//     Hkv/T, or 1 when T > Hkv), the embedding and lm_head by vocabulary rows, on the virtual
//     stages that hold them; f32.
//   TP per micro-batch: 4 all-reduces of N·C per layer (Megatron's f and g, forward and
//     backward), 1 for the embedding, 1 for the lm_head's input gradient and 3N floats of the
//     vocabulary-parallel cross-entropy; ring cost 2(T-1)/T. Sequence parallel: each all-reduce
//     of N·C becomes a reduce-scatter and an all-gather ((T-1)/T each), plus the re-gather of
//     the two norm outputs in the backward (10 per layer; embedding 2, head 3); once per step
//     the norms' gradients are all-reduced (SP) and replicated KV heads' over their replicas.
//   PP per micro-batch and chunk: the activation forward unless last, its gradient back unless
//     first, N·C floats (N/T rows under SP).
//   DP: the ring all-reduce of this rank's gradients, 2(D-1)/D x its weight bytes.
//   activations of one micro-batch (f32, no dropout; Korthikanti et al. 2022 count the same
//     tensors in 16 bits with dropout masks): per layer x, n1, x_mid, n2 [N/T or N rows, C],
//     their rstd, q, k, v, the attention output, gate, up, act (no B·H·T² probabilities:
//     the attention backward recomputes them);
//     per chunk the output, token positions (and ids on the first), the final norm and
//     dL/dlogits [N, V/T] on the last.
#pragma once

#include "lmstack/calc/model_shape.h"
#include "lmstack/calc/report.h"
#include "lmstack/calc/run_metrics.h"
#include "lmstack/core/json.h"

namespace lmstack::calc {

struct ParallelRank {
  double weights_bytes = 0, tp_bytes = 0, pp_bytes = 0, dp_bytes = 0;
  double activation_bytes = 0;  // one micro-batch, all this rank's chunks
};

// `parallel` is a log line's measured.parallel; `setup` its setup. ConfigError naming the
// field on a malformed object.
ParallelRank predict_parallel_rank(const ModelShape& m, const RunSetup& setup, const Json& parallel,
                                   int pp_rank);

// Appends one section per rank (predicted, measured, ratio, verdict per quantity) and the
// bubble to `r`; returns the number flagged (|ratio - 1| > tolerance).
int add_parallel_checks(const ModelShape& m, const RunSetup& setup, const Json& parallel,
                        double tolerance, Report& r);

}  // namespace lmstack::calc
