// Predictions for a TP/PP training log (see parallel_check.h for the rules).
#include "lmstack/calc/parallel_check.h"

#include <fmt/format.h>

#include <cmath>

#include "lmstack/core/error.h"

namespace lmstack::calc {
namespace {

struct Layout {
  int tp = 1, pp = 1, dp = 1, chunks = 1, m = 1, batch = 1, seq = 1;
  bool sp = false;
  std::vector<int> layers;  // per virtual stage
};

Layout layout_of(const RunSetup& setup, const Json& parallel) {
  const std::string src = "run: measured.parallel";
  Layout l;
  l.tp = setup.tp, l.pp = setup.pp, l.dp = setup.dp;
  l.batch = setup.micro_batch, l.seq = setup.seq;
  l.chunks = require<int>(parallel, "chunks", src);
  l.m = require<int>(parallel, "micro_batches", src);
  l.sp = parallel.value("sequence_parallel", false);
  l.layers = require<std::vector<int>>(parallel, "layers_per_stage", src);
  if (static_cast<int>(l.layers.size()) != l.pp * l.chunks)
    throw_error<ConfigError>("{}: layers_per_stage has {} entries for pp {} x chunks {}", src,
                             l.layers.size(), l.pp, l.chunks);
  return l;
}

// Floats of one layer's weights on a TP rank.
double layer_params(const ModelShape& m, int tp) {
  const double c = m.hidden_size, d = m.head_dim, h = m.num_heads / tp;
  const double kv = m.num_kv_heads >= tp ? m.num_kv_heads / tp : 1;
  double n = 2 * c + h * d * c * 2 + kv * d * c * 2 + 3.0 * m.intermediate_size / tp * c;
  if (m.qkv_bias) n += h * d + 2 * kv * d;
  return n;
}

}  // namespace

ParallelRank predict_parallel_rank(const ModelShape& m, const RunSetup& setup, const Json& parallel,
                                   int pp_rank) {
  const Layout l = layout_of(setup, parallel);
  const double t = l.tp, c = m.hidden_size, n = static_cast<double>(l.batch) * l.seq;
  const double rows = l.sp ? n / t : n, vocab = static_cast<double>(m.vocab_size) / t;
  const int vstages = l.pp * l.chunks;
  double params = 0, layers = 0, embed = 0, head = 0, p2p_msgs = 0, acts = 0;
  for (int chunk = 0; chunk < l.chunks; ++chunk) {
    const int vs = chunk * l.pp + pp_rank, lr = l.layers[static_cast<size_t>(vs)];
    layers += lr;
    params += lr * layer_params(m, l.tp);
    const double h = m.num_heads / t, kv = m.num_kv_heads >= l.tp ? m.num_kv_heads / t : 1;
    const double ff = static_cast<double>(m.intermediate_size) / t, dd = m.head_dim;
    // No [B, H, T, T] softmax: the attention backward recomputes it (kernels/).
    acts += lr * (4 * rows * c + 2 * rows + n * h * dd * 2 + n * kv * dd * 2 + 3 * n * ff);
    acts += rows * c + n;  // the chunk's output; positions (int32, 4 bytes as a float)
    if (vs == 0) embed = 1, params += vocab * c, acts += n;
    if (vs == vstages - 1) head = 1, params += c + vocab * c, acts += rows * c + rows + n * vocab;
    p2p_msgs += (vs < vstages - 1) + (vs > 0);
  }
  ParallelRank r;
  r.weights_bytes = 4 * params;
  r.activation_bytes = 4 * acts;
  if (l.tp > 1) {
    const double ring = 2 * (t - 1) / t, half = (t - 1) / t, nc = 4 * n * c;
    const double per_mb = l.sp ? half * nc * (10 * layers + 2 * embed + 3 * head)
                               : ring * nc * (4 * layers + embed + head);
    r.tp_bytes = l.m * (per_mb + head * ring * 4 * 3 * n);
    if (l.sp) r.tp_bytes += ring * 4 * (2 * c * layers + c * head);  // norm gradients
    if (m.num_kv_heads < l.tp) {  // replicated KV heads: gradients summed over replicas
      const double rep = static_cast<double>(l.tp) / m.num_kv_heads;
      r.tp_bytes += 2 * (rep - 1) / rep * 4 * layers *
                    (2 * m.head_dim * c + (m.qkv_bias ? 2 * m.head_dim : 0));
    }
  }
  r.pp_bytes = l.m * p2p_msgs * 4 * rows * c;
  if (l.dp > 1) r.dp_bytes = 2.0 * (l.dp - 1) / l.dp * r.weights_bytes;
  return r;
}

int add_parallel_checks(const ModelShape& m, const RunSetup& setup, const Json& parallel,
                        double tolerance, Report& r) {
  int flagged = 0;
  auto check = [&](Section& s, const std::string& key, double measured, double predicted,
                   const std::string& unit, const std::string& formula) {
    const double ratio = predicted > 0 ? measured / predicted : (measured == 0 ? 1 : INFINITY);
    const bool ok = std::fabs(ratio - 1) <= tolerance;
    add_row(s, key, key + " predicted", predicted, unit, formula);
    add_row(s, key + "_measured", "  measured", measured, unit, "from the run");
    add_text(s, key + "_verdict", "  ratio", fmt::format("{:.4f} {}", ratio, ok ? "ok" : "FLAG"));
    flagged += ok ? 0 : 1;
  };
  const Json& ranks = require<Json>(parallel, "ranks", "run: measured.parallel");
  for (const Json& q : ranks) {
    const int rank = require<int>(q, "rank", "run: measured.parallel.ranks");
    // Every TP rank of a stage holds and sends the same amounts.
    const ParallelRank p = predict_parallel_rank(m, setup, parallel, require<int>(q, "pp", "rank"));
    Section& s = r.section(fmt::format("rank{}", rank),
                           fmt::format("rank {} (tp {}, dp {}, pp {})", rank, q.value("tp", 0),
                                       q.value("dp", 0), q.value("pp", 0)));
    const std::string k = fmt::format("r{}_", rank);
    check(s, k + "weights_bytes", require<double>(q, "weights_bytes", "rank"), p.weights_bytes, "B",
          "layer, embedding, head slices x 4 B (parallel_check.h)");
    const Json& cb = require<Json>(q, "comm_bytes", "rank");
    check(s, k + "tp_bytes", require<double>(cb, "tp", "rank"), p.tp_bytes, "B",
          "m x (4 L + embed + head) all-reduces of N·C·4 x 2(T-1)/T (+ CE 3N)");
    check(s, k + "pp_bytes", require<double>(cb, "pp", "rank"), p.pp_bytes, "B",
          "m x sends x N·C·4 (N/T rows under SP)");
    check(s, k + "dp_bytes", require<double>(cb, "dp", "rank"), p.dp_bytes, "B",
          "2(D-1)/D x weight bytes");
    check(s, k + "activation_bytes", require<double>(q, "micro_batch_activation_bytes", "rank"),
          p.activation_bytes, "B", "one micro-batch's saved tensors, f32 (parallel_check.h)");
  }
  if (setup.pp <= 1) return flagged;
  // The formula is the schedule's bubble with equal stages and free transfers: a lower bound.
  // Measured above it is reported (uneven stages, transfers, ranks sharing cores), below it
  // beyond the tolerance is flagged.
  Section& b = r.section("bubble", "pipeline bubble");
  const double formula = require<double>(parallel, "bubble_formula", "run: measured.parallel");
  const double measured = require<double>(parallel, "bubble_measured", "run: measured.parallel");
  add_row(b, "bubble", "bubble predicted (lower bound)", formula, "x",
          "(P-1)/m, interleaved (P-1)/(v m)");
  add_row(b, "bubble_measured", "  measured", measured, "x",
          "(step - forward/backward compute) / compute, mean over ranks");
  const bool low = measured < formula * (1 - tolerance);
  add_text(b, "bubble_verdict", "  ratio",
           fmt::format("{:.4f} {}", measured / formula, low ? "FLAG: below the bound" : "ok"));
  return flagged + (low ? 1 : 0);
}

}  // namespace lmstack::calc
