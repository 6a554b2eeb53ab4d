// The three schedules and their simulation (see pipeline_schedule.h). The interleaved order is
// Megatron-LM's (schedules.py, forward_backward_pipelining_with_interleaving): the k-th forward
// of a rank runs chunk (k / P) mod v of micro-batch (k / (P·v))·P + k mod P; the k-th backward
// the same with the chunk order reversed; warm-up (P - s - 1)·2 + (v - 1)·P forwards.
#include "lmstack/train/pipeline_schedule.h"

#include <algorithm>
#include <map>

#include "lmstack/core/error.h"

namespace lmstack::train {

PipelineSchedule parse_pipeline_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGpipe;
  if (name == "1f1b") return PipelineSchedule::kOneFOneB;
  if (name == "interleaved") return PipelineSchedule::kInterleaved;
  throw_error<RequestError>("--pp-schedule {}: use gpipe, 1f1b or interleaved", name);
}

const char* pipeline_schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGpipe:
      return "gpipe";
    case PipelineSchedule::kOneFOneB:
      return "1f1b";
    case PipelineSchedule::kInterleaved:
      return "interleaved";
  }
  return "?";
}

namespace {

PipelineAction interleaved_action(int k, bool backward, int p, int v) {
  int chunk = (k / p) % v;
  if (backward) chunk = v - 1 - chunk;
  return {backward, (k / (p * v)) * p + k % p, chunk};
}

}  // namespace

std::vector<PipelineAction> pipeline_actions(PipelineSchedule kind, int p, int m, int v, int s) {
  LMSTACK_CHECK(p >= 1 && m >= 1 && s >= 0 && s < p, "pipeline {} stages, {} micro-batches", p, m);
  std::vector<PipelineAction> out;
  if (kind == PipelineSchedule::kGpipe) {
    for (int i = 0; i < m; ++i) out.push_back({false, i, 0});
    for (int i = 0; i < m; ++i) out.push_back({true, i, 0});
    return out;
  }
  if (kind == PipelineSchedule::kInterleaved && (v < 2 || m % p != 0))
    throw_error<ConfigError>(
        "interleaved pipeline needs --pp-chunks >= 2 (got {}) and micro-batches (--grad-accum) a "
        "multiple of --pp {} (got {})",
        v, p, m);
  if (kind == PipelineSchedule::kOneFOneB) v = 1;
  const int total = m * v;
  const int warmup = kind == PipelineSchedule::kOneFOneB
                         ? std::min(p - s - 1, m)
                         : std::min((p - s - 1) * 2 + (v - 1) * p, total);
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(interleaved_action(f, false, p, v));
  while (f < total) {  // steady state: one forward, one backward
    out.push_back(interleaved_action(f++, false, p, v));
    out.push_back(interleaved_action(b++, true, p, v));
  }
  while (b < total) out.push_back(interleaved_action(b++, true, p, v));
  return out;
}

double pipeline_bubble_formula(PipelineSchedule kind, int p, int m, int v) {
  const double chunks = kind == PipelineSchedule::kInterleaved ? v : 1;
  return (p - 1) / (chunks * m);
}

PipelineSimulation simulate_pipeline(PipelineSchedule kind, int p, int m, int v,
                                     double backward_cost) {
  if (kind != PipelineSchedule::kInterleaved) v = 1;
  std::vector<std::vector<PipelineAction>> acts;
  for (int s = 0; s < p; ++s) acts.push_back(pipeline_actions(kind, p, m, v, s));
  // done[(backward, mb, virtual stage)] = finish time
  std::map<std::tuple<bool, int, int>, double> done;
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<double> clock(static_cast<size_t>(p), 0);
  PipelineSimulation sim;
  sim.max_in_flight.assign(static_cast<size_t>(p), 0);
  std::vector<int> in_flight(static_cast<size_t>(p), 0);
  const int last_vs = p * v - 1;
  const double unit = 1.0 / v;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      auto& i = next[static_cast<size_t>(s)];
      if (i == acts[static_cast<size_t>(s)].size()) continue;
      const PipelineAction a = acts[static_cast<size_t>(s)][i];
      const int vs = a.chunk * p + s;
      // A forward needs the previous virtual stage's forward; a backward its own forward and
      // the next virtual stage's backward.
      double ready = clock[static_cast<size_t>(s)];
      std::vector<std::tuple<bool, int, int>> deps;
      if (!a.backward && vs > 0) deps.emplace_back(false, a.micro_batch, vs - 1);
      if (a.backward) deps.emplace_back(false, a.micro_batch, vs);
      if (a.backward && vs < last_vs) deps.emplace_back(true, a.micro_batch, vs + 1);
      bool ok = true;
      for (const auto& d : deps) {
        auto it = done.find(d);
        if (it == done.end())
          ok = false;
        else
          ready = std::max(ready, it->second);
      }
      if (!ok) continue;
      const double end = ready + unit * (a.backward ? backward_cost : 1.0);
      done[{a.backward, a.micro_batch, vs}] = end;
      clock[static_cast<size_t>(s)] = end;
      int& held = in_flight[static_cast<size_t>(s)];
      held += a.backward ? -1 : 1;
      sim.max_in_flight[static_cast<size_t>(s)] =
          std::max(sim.max_in_flight[static_cast<size_t>(s)], held);
      ++i;
      progress = true;
    }
  }
  for (int s = 0; s < p; ++s)
    LMSTACK_CHECK(next[static_cast<size_t>(s)] == acts[static_cast<size_t>(s)].size(),
                  "pipeline schedule {} deadlocks at stage {}", pipeline_schedule_name(kind), s);
  sim.step_time = *std::max_element(clock.begin(), clock.end());
  sim.ideal_time = m * (1.0 + backward_cost);
  sim.bubble = (sim.step_time - sim.ideal_time) / sim.ideal_time;
  return sim;
}

}  // namespace lmstack::train
