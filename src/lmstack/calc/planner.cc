// `calc plan`: search TP x PP x DP x virtual stages x ZeRO x recomputation layouts for a fixed
// global batch (tokens per step are given, as in every published run: each layout derives its
// micro-batches m = global batch / (dp x micro-batch x seq), hence its bubble), keep those that
// fit in memory and rank them by the step time of train_estimate.cc. Candidate TP sizes stay
// inside one node (the glossary's "3D" rule: TP in a node, PP/DP across nodes), since TP's
// per-layer all-reduces would otherwise cross the slow tier. A layout to compare (a published
// one) is placed in the ranking and the term that separates it from the best is named
// (plan_explain.cc).
#include <fmt/format.h>

#include <algorithm>

#include "lmstack/calc/plan_explain.h"

namespace lmstack::calc {
namespace {

struct Search {
  std::vector<TrainOptions> layouts;
  int indivisible = 0;  // (tp, pp) pairs whose dp x micro-batch does not divide the batch
};

std::vector<int> virtual_stage_options(const ModelShape& m, int pp) {
  if (pp == 1) return {1};
  const int stage = layers_per_stage(m, pp);
  std::vector<int> v;
  for (int d = 1; d <= stage; ++d)
    if (stage % d == 0) v.push_back(d);
  return v;
}

Search candidates(const ModelShape& m, const HardwareSpec& hw, const PlanOptions& o, int seq) {
  const TrainOptions& b = o.base;
  const int gpn = b.gpus_per_node > 0 ? b.gpus_per_node : std::max(8, hw.nvlink_domain);
  Search s;
  for (int tp = 1; tp <= std::min(gpn, b.gpus); tp *= 2) {
    for (int pp = 1; pp <= m.num_layers && tp * pp <= b.gpus; ++pp) {
      if (b.gpus % (tp * pp) != 0) continue;
      const int dp = b.gpus / (tp * pp);
      try {
        micro_batches_per_step(o.global_batch_tokens, seq, dp, b.micro_batch);
      } catch (const RequestError&) {  // dp x micro-batch does not divide the batch
        ++s.indivisible;
        continue;
      }
      for (int v : virtual_stage_options(m, pp))
        for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero)
          for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
            TrainOptions t = b;
            t.tp = tp, t.pp = pp, t.dp = dp, t.virtual_stages = v, t.zero = zero;
            t.recompute = rc;
            t.seq = seq;
            t.global_batch_tokens = o.global_batch_tokens;
            if (t.ep > 1 && t.dp % t.ep != 0) t.ep = 1;
            s.layouts.push_back(t);
          }
    }
  }
  return s;
}

bool matches_compare(const TrainOptions& t, const PlanOptions& o) {
  return t.tp == o.compare_tp && t.pp == o.compare_pp &&
         (o.compare_virtual_stages <= 0 || t.virtual_stages == o.compare_virtual_stages) &&
         (o.compare_zero < 0 || t.zero == o.compare_zero) &&
         (!o.compare_recompute || t.recompute == *o.compare_recompute);
}

bool faster(const TrainEstimate& a, const TrainEstimate& b) {
  if (a.step_s != b.step_s) return a.step_s < b.step_s;
  return a.memory_total < b.memory_total;  // same speed: the one with more headroom
}

void add_ranking(const std::vector<TrainEstimate>& fits, int top, Report& r) {
  Section& best = r.section("ranking", "Best layouts (fastest first)");
  for (size_t i = 0; i < fits.size() && static_cast<int>(i) < top; ++i) {
    const TrainEstimate& e = fits[i];
    add_row(best, fmt::format("rank{}_step_s", i + 1),
            fmt::format("{}. {}", i + 1, describe_layout(e)), e.step_s, "s",
            fmt::format("m {}, bubble {:.1f}%, MFU {:.1f}%, {} per GPU, {:.3g} days",
                        e.layout.grad_accum, 100 * e.bubble, 100 * e.mfu,
                        format_quantity(e.memory_total, "B"), e.step_s * e.steps / 86400));
  }
}

}  // namespace

std::string describe_layout(const TrainEstimate& e) {
  const TrainOptions& t = e.layout;
  return fmt::format("tp {} pp {} dp {} v {} zero {} recompute {}", t.tp, t.pp, t.dp,
                     t.virtual_stages, t.zero, recompute_name(t.recompute));
}

Report plan_report(const ModelShape& m, const HardwareSpec& hw, const PlanOptions& o) {
  TrainOptions base = o.base;
  base.tp = base.pp = base.virtual_stages = 1;
  base.dp = 0;
  base.global_batch_tokens = 0;
  base = resolve_layout(m, base);  // validates gpus, tokens, efficiency, seq, ...
  micro_batches_per_step(o.global_batch_tokens, base.seq, 1, 1);  // at least one sequence
  const Search search = candidates(m, hw, o, base.seq);
  std::vector<TrainEstimate> fits, compared;
  int tried = 0;
  for (const TrainOptions& t : search.layouts) {
    TrainEstimate e;
    try {
      e = estimate_train(m, hw, t);
    } catch (const RequestError&) {
      continue;  // tp not dividing the KV heads, ep not dividing experts, ...
    }
    ++tried;
    if (e.fits) fits.push_back(e);
    if (o.compare_tp > 0 && matches_compare(t, o)) compared.push_back(e);
  }
  std::sort(fits.begin(), fits.end(), faster);
  Report r;
  r.title = fmt::format("calc plan {} on {} x {} ({:.4g} tokens, {:.4g} per step)", m.name,
                        o.base.gpus, hw.name, o.base.tokens, o.global_batch_tokens);
  Section& s = r.section("search", "Search");
  add_row(s, "sequences_per_step", "sequences per step",
          sequences_per_step(o.global_batch_tokens, base.seq), "", "global batch tokens / seq",
          fmt::format("{:.6g} / {}", o.global_batch_tokens, base.seq));
  add_row(s, "layouts_indivisible", "(tp, pp) skipped: dp x micro-batch does not divide them",
          search.indivisible, "", "m = sequences / (dp x micro_batch) must be a whole number");
  add_row(s, "layouts_tried", "layouts tried", tried, "",
          "tp (in node) x pp <= L x v | ceil(L/pp) x zero x recompute");
  add_row(s, "layouts_fitting", "layouts that fit", static_cast<double>(fits.size()), "",
          "weights + grads + optimizer + activations <= GPU memory");
  if (fits.empty()) {
    r.notes.push_back("no layout fits: more GPUs, a smaller micro-batch or sequence, or fp8");
  } else {
    add_ranking(fits, o.top, r);
    add_layout_breakdown(r.section("best", "Best layout"), "best", fits.front());
  }
  if (o.compare_tp > 0) add_comparison(m, hw, o, fits, compared, r);
  add_plan_notes(hw, fits, r);
  return r;
}

}  // namespace lmstack::calc
