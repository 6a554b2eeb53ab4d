// Pipeline-parallel schedules (issue 15 item 3): the order in which one pipeline stage runs the
// forward and backward passes of m micro-batches. Pure functions, no communication.
//   GPipe (Huang et al. 2019): all m forwards, then all m backwards; holds m micro-batches of
//     activations; bubble (P-1)/m of the ideal time.
//   1F1B (Narayanan et al. 2021, §2.2, PipeDream-Flush): stage s runs P-s-1 warm-up forwards,
//     then alternates one forward and one backward, then drains; the same bubble (P-1)/m, but
//     stage s holds at most P-s micro-batches of activations (stage 0: P).
//   interleaved 1F1B (§2.2.2): each rank holds v model chunks (virtual stages c·P + s); the
//     bubble shrinks to (P-1)/(v·m). As Megatron, m must be a multiple of P.
// simulate_pipeline() runs the action lists of all stages with unit-time passes (a backward
// costs `backward_cost` forwards) and reports the bubble and the activations held, which tests
// compare with the formulas and the trainer prints beside the measured ones.
#pragma once

#include <string>
#include <vector>

namespace lmstack::train {

enum class PipelineSchedule { kGpipe, kOneFOneB, kInterleaved };
PipelineSchedule parse_pipeline_schedule(const std::string& name);  // RequestError listing names
const char* pipeline_schedule_name(PipelineSchedule s);

struct PipelineAction {
  bool backward = false;
  int micro_batch = 0;
  int chunk = 0;  // model chunk on this rank (0 unless interleaved); virtual stage chunk·P + s
};

// The actions of stage `stage` of `stages` for `micro_batches` micro-batches and `chunks` model
// chunks per rank (1 unless kInterleaved). ConfigError for an interleaved schedule with
// chunks < 2 or micro_batches not a multiple of stages.
std::vector<PipelineAction> pipeline_actions(PipelineSchedule kind, int stages, int micro_batches,
                                             int chunks, int stage);

// The bubble of the formulas: (P-1)/m, interleaved (P-1)/(v·m) (Narayanan et al. eq. 1-2).
double pipeline_bubble_formula(PipelineSchedule kind, int stages, int micro_batches, int chunks);

struct PipelineSimulation {
  double step_time = 0;            // time of the whole step, in forward-pass units
  double ideal_time = 0;           // m · v · (1 + backward_cost) per stage: the work of one stage
  double bubble = 0;               // (step_time - ideal_time) / ideal_time
  std::vector<int> max_in_flight;  // per stage: most micro-batch chunks forwarded, not backwarded
};
// Dependency-driven simulation of all stages' action lists (each pass of a chunk costs 1/v
// forward units, backward `backward_cost` times that; transfers are free). LMSTACK_CHECK fails
// on a deadlocking schedule.
PipelineSimulation simulate_pipeline(PipelineSchedule kind, int stages, int micro_batches,
                                     int chunks, double backward_cost = 2.0);

}  // namespace lmstack::train
