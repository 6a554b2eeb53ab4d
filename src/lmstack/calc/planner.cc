// `calc plan`: search TP x PP x DP x ZeRO x recomputation layouts that fit in memory and rank
// them by the step-time model of train_estimate.cc (per token). Candidate TP sizes stay inside
// one node (the glossary's "3D" rule: TP inside a node, PP/DP across nodes), since TP's
// per-layer all-reduces would otherwise cross the slow tier.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "lmstack/calc/train_estimate.h"

namespace lmstack::calc {
namespace {

std::vector<TrainOptions> candidates(const ModelShape& m, const HardwareSpec& hw,
                                     const PlanOptions& o) {
  const TrainOptions& b = o.base;
  const int gpn = b.gpus_per_node > 0 ? b.gpus_per_node : std::max(8, hw.nvlink_domain);
  std::vector<TrainOptions> out;
  for (int tp = 1; tp <= std::min(gpn, b.gpus); tp *= 2) {
    for (int pp = 1; pp <= m.num_layers && tp * pp <= b.gpus; ++pp) {
      if (b.gpus % (tp * pp) != 0 || m.num_layers % pp != 0) continue;
      for (int zero = 0; zero <= 3; ++zero) {
        for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
          TrainOptions t = b;
          t.tp = tp;
          t.pp = pp;
          t.dp = b.gpus / (tp * pp);
          t.zero = zero;
          t.recompute = rc;
          if (zero > 0 && t.dp == 1) continue;
          if (t.ep > 1 && t.dp % t.ep != 0) t.ep = 1;
          const double seqs = o.global_batch_tokens / std::max(1, t.seq);
          t.grad_accum = std::max(1, static_cast<int>(std::lround(seqs / (t.dp * t.micro_batch))));
          out.push_back(t);
        }
      }
    }
  }
  return out;
}

std::string describe(const TrainEstimate& e) {
  const TrainOptions& t = e.layout;
  return fmt::format("tp {} pp {} dp {} zero {} recompute {} m {}", t.tp, t.pp, t.dp, t.zero,
                     recompute_name(t.recompute), t.grad_accum);
}

}  // namespace

Report plan_report(const ModelShape& m, const HardwareSpec& hw, const PlanOptions& o) {
  TrainOptions base = o.base;
  base.tp = base.pp = 1;
  base.dp = 0;
  resolve_layout(m, base);  // validates gpus, tokens, mfu, ...
  std::vector<TrainEstimate> fits;
  int tried = 0;
  for (const TrainOptions& t : candidates(m, hw, o)) {
    TrainEstimate e;
    try {
      e = estimate_train(m, hw, t);
    } catch (const RequestError&) {
      continue;  // tp not dividing the KV heads, ep not dividing experts, ...
    }
    ++tried;
    if (e.fits) fits.push_back(e);
  }
  std::sort(fits.begin(), fits.end(), [](const TrainEstimate& a, const TrainEstimate& b) {
    return a.step_s / a.tokens_per_step < b.step_s / b.tokens_per_step;
  });
  Report r;
  r.title = fmt::format("calc plan {} on {} x {} ({:.4g} tokens)", m.name, o.base.gpus, hw.name,
                        o.base.tokens);
  Section& s = r.section("search", "Search");
  add_row(s, "layouts_tried", "layouts tried", tried, "",
          "tp (in node) x pp | L x zero x recompute");
  add_row(s, "layouts_fitting", "layouts that fit", static_cast<double>(fits.size()), "",
          "weights + grads + optimizer + activations <= GPU memory");
  if (fits.empty()) {
    r.notes.push_back("no layout fits: more GPUs, a smaller micro-batch or sequence, or fp8");
    return r;
  }
  Section& best = r.section("ranking", "Best layouts (fastest first)");
  for (size_t i = 0; i < fits.size() && static_cast<int>(i) < o.top; ++i) {
    const TrainEstimate& e = fits[i];
    const double days = e.step_s * e.steps / 86400;
    add_row(best, fmt::format("rank{}_step_s", i + 1), fmt::format("{}. {}", i + 1, describe(e)),
            e.step_s, "s",
            fmt::format("{} per GPU, bubble {:.0f}%, total {:.3g} days",
                        format_quantity(e.memory_total, "B"), 100 * e.bubble, days));
  }
  const TrainOptions& w = fits.front().layout;
  const int gpn = w.gpus_per_node > 0 ? w.gpus_per_node : std::max(8, hw.nvlink_domain);
  r.notes.push_back(fmt::format(
      "why: TP {} stays inside a node of {} GPUs (its all-reduces run every layer over {}); "
      "PP {} and DP {} cross nodes over {}, where traffic is per stage boundary and per step. "
      "Glossary: fits one GPU -> DP; does not -> ZeRO/FSDP; very large -> TP in node + PP + DP.",
      w.tp, gpn, hw.intra_node_link, w.pp, w.dp, w.nic));
  return r;
}

}  // namespace lmstack::calc
