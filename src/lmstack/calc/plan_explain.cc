// Step-time breakdowns and the best-vs-compared explanation of `calc plan`. Each step-time term
// of train_estimate.cc rests on one assumption; when a compared layout loses, the term with the
// largest difference names the assumption to question (or memory, when it does not fit).
#include "lmstack/calc/plan_explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace lmstack::calc {
namespace {

struct Term {
  const char* name;
  double best_s, other_s;
  std::string assumption;
};

std::vector<Term> step_terms(const TrainEstimate& best, const TrainEstimate& other) {
  const TrainOptions& o = other.layout;
  auto bubble_s = [](const TrainEstimate& e) { return e.compute_step_s * e.bubble; };
  return {
      {"compute", best.compute_step_s, other.compute_step_s,
       "recomputation and the busiest stage's ceil(L/pp) layers cost compute; kernels are "
       "assumed equally efficient in every layout (--compute-efficiency), so smaller TP "
       "GEMMs are not penalized"},
      {"bubble", bubble_s(best), bubble_s(other),
       fmt::format("pipeline bubble (pp-1)/(v m) with m = global batch / (dp x micro-batch x "
                   "seq) = {} here; interleaving (v = {}) is assumed free apart from its p2p sends",
                   o.grad_accum, o.virtual_stages)},
      {"TP", best.tp.time_s, other.tp.time_s,
       fmt::format("TP all-reduces (4 per layer per micro-batch, 6 with full recomputation) are "
                   "not overlapped with compute; link {}",
                   other.tp.link)},
      {"PP", best.pp.time_s, other.pp.time_s,
       fmt::format("p2p sends (2 m v per step, b*s*h/t each) are not overlapped; link {}",
                   other.pp.link)},
      {"EP", best.ep.time_s, other.ep.time_s, "all-to-alls are not overlapped"},
      {"DP", best.dp_exposed_s, other.dp_exposed_s,
       fmt::format("DP collectives hide only behind one micro-batch's backward (forward for "
                   "gathers) and pay the ring latency (dp-1) alpha per layer; link {}",
                   other.dp.link)},
  };
}

std::string verdict_explain(const TrainEstimate& best, const TrainEstimate& c,
                            const HardwareSpec& hw) {
  std::vector<Term> terms = step_terms(best, c);
  std::string out = "step-time terms, compared - best:";
  for (const Term& t : terms) out += fmt::format(" {} {:+.3g} s;", t.name, t.other_s - t.best_s);
  std::sort(terms.begin(), terms.end(), [](const Term& a, const Term& b) {
    return a.other_s - a.best_s > b.other_s - b.best_s;
  });
  if (c.step_s > best.step_s)
    out += fmt::format(" the best wins mainly on {} ({:+.3g} s): assumption: {}.", terms[0].name,
                       terms[0].other_s - terms[0].best_s, terms[0].assumption);
  if (!c.fits)
    out += fmt::format(
        " It does not fit: {} needed of {} ({} of activations). The assumption that rejects it is "
        "the activation memory model: Korthikanti et al. 2022 Table 2 (GPT block with dropout, "
        "34 sbh/t per layer), the busiest stage holding ceil(L/pp) layers x min(pp, m) micro-"
        "batches, x (1 + (pp-1)/(pp v)) interleaved; runs that free stage inputs/outputs early or "
        "give the first and last stage fewer layers (Llama 3) need less.",
        format_quantity(c.memory_total, "B"), format_quantity(hw.memory_bytes, "B"),
        format_quantity(c.activations, "B"));
  if (best.layout.recompute != c.layout.recompute)
    out += fmt::format(" Recomputation differs ({} vs {}): the activation memory model decides it.",
                       recompute_name(best.layout.recompute), recompute_name(c.layout.recompute));
  return out;
}

}  // namespace

void add_layout_breakdown(Section& s, const std::string& prefix, const TrainEstimate& e) {
  const std::string p = prefix + "_";
  add_text(s, p + "layout", "layout", describe_layout(e), "tp x pp x dp = GPUs; v chunks per rank");
  add_row(s, p + "micro_batches", "micro-batches per step (m)", e.layout.grad_accum, "",
          "global batch / (dp x micro_batch x seq)");
  add_row(s, p + "step_s", "step", e.step_s, "s", "compute x (1 + bubble) + TP + PP + EP + DP");
  add_row(s, p + "compute_s", "  compute", e.compute_step_s, "s",
          "incl. recomputation and stage imbalance");
  add_row(s, p + "bubble", "  bubble", e.bubble, "%",
          "(pp - 1) / (v x m) when m >= pp, else ((v-1) pp + m + pp - 1) / (v m) - 1");
  add_row(s, p + "bubble_s", "  bubble time", e.compute_step_s * e.bubble, "s", "compute x bubble");
  add_row(s, p + "tp_s", "  TP all-reduces", e.tp.time_s, "s", e.tp.formula);
  add_row(s, p + "pp_s", "  PP sends", e.pp.time_s, "s", e.pp.formula);
  add_row(s, p + "ep_s", "  EP all-to-alls", e.ep.time_s, "s", e.ep.formula);
  add_row(s, p + "dp_exposed_s", "  DP exposed", e.dp_exposed_s, "s",
          fmt::format("of {} in all: {}", format_quantity(e.dp.time_s, "s"), e.dp.formula));
  add_row(s, p + "dp_bytes", "DP bytes/GPU/step", e.dp.bytes, "B", e.dp.formula);
  add_row(s, p + "tp_bytes", "TP bytes/GPU/step", e.tp.bytes, "B", e.tp.formula);
  add_row(s, p + "pp_bytes", "PP bytes/GPU/step", e.pp.bytes, "B", e.pp.formula);
  add_row(s, p + "mfu", "MFU predicted", e.mfu, "%",
          "flops/token x tokens/step / (step x gpus x peak)");
  add_row(s, p + "hw_flops_per_gpu", "FLOP/s per GPU incl. recomputation", e.hw_flops_per_gpu,
          "FLOP/s", "Megatron-LM's 'teraFLOP/s per GPU'");
  add_row(s, p + "memory_bytes", "memory per GPU", e.memory_total, "B",
          "weights + grads + optimizer + activations");
  add_text(s, p + "fits", "fits", e.fits ? "yes" : "NO", "memory <= GPU memory");
}

void add_comparison(const ModelShape& m, const HardwareSpec& hw, const PlanOptions& o,
                    const std::vector<TrainEstimate>& fits,
                    const std::vector<TrainEstimate>& compared, Report& r) {
  Section& s = r.section("compare",
                         fmt::format("Compared layout (tp {} pp {})", o.compare_tp, o.compare_pp));
  if (compared.empty()) {
    add_text(s, "compare_verdict", "verdict", "not a candidate",
             fmt::format("tp must be a power of two within a node, pp <= {} layers, dp x "
                         "micro-batch must divide the sequences per step, v must divide the "
                         "layers of a stage",
                         m.num_layers));
    return;
  }
  // The fastest variant, fitting or not: a published layout ran, so when the memory model
  // rejects it that is a finding to print, not a reason to show a slower variant.
  auto pick = std::min_element(compared.begin(), compared.end(),
                               [](const auto& a, const auto& b) { return a.step_s < b.step_s; });
  const TrainEstimate& c = *pick;
  add_layout_breakdown(s, "compare", c);
  if (fits.empty()) {
    add_text(s, "compare_verdict", "verdict", "nothing fits to compare with");
    return;
  }
  const TrainEstimate& best = fits.front();
  const auto rank = std::count_if(fits.begin(), fits.end(),
                                  [&](const TrainEstimate& e) { return e.step_s < c.step_s; });
  add_row(s, "compare_rank", "rank by step time", static_cast<double>(rank + 1), "",
          fmt::format("among the {} layouts that fit{}", fits.size(),
                      c.fits ? "" : " (it does not fit itself)"));
  const double slower = c.step_s / best.step_s - 1;
  add_row(s, "compare_slower", "slower than the best", slower, "%", "compared step / best - 1");
  const bool same = describe_layout(c) == describe_layout(best);
  std::string verdict = "ranks first";
  if (!same && slower < 0)  // faster than all that fit, so it cannot fit itself
    verdict =
        fmt::format("{:.1f}% faster than the best that fits ({}), but needs {} of {}",
                    -100 * slower, describe_layout(best), format_quantity(c.memory_total, "B"),
                    format_quantity(hw.memory_bytes, "B"));
  else if (!same)
    verdict = fmt::format("{:.1f}% slower than {}{}", 100 * slower, describe_layout(best),
                          c.fits ? "" : "; does not fit");
  add_text(s, "compare_verdict", "verdict", verdict, "", same ? "" : verdict_explain(best, c, hw));
}

void add_plan_notes(const HardwareSpec& hw, const std::vector<TrainEstimate>& fits, Report& r) {
  r.notes.push_back(
      "step model: compute at --compute-efficiency of the peak x (1 + bubble) + TP + PP + EP "
      "(not overlapped) + DP beyond the backward/forward it overlaps; the global batch is fixed, "
      "so more DP means fewer micro-batches per pipeline and a larger bubble.");
  if (fits.empty()) return;
  const TrainOptions& w = fits.front().layout;
  const int gpn = w.gpus_per_node > 0 ? w.gpus_per_node : std::max(8, hw.nvlink_domain);
  r.notes.push_back(fmt::format(
      "why: TP {} stays inside a node of {} GPUs (its all-reduces run every layer over {}); "
      "PP {} and DP {} cross nodes over {}, where traffic is per stage boundary and per step. "
      "Glossary: fits one GPU -> DP; does not -> ZeRO/FSDP; very large -> TP in node + PP + DP.",
      w.tp, gpn, hw.intra_node_link, w.pp, w.dp, w.nic));
}

}  // namespace lmstack::calc
