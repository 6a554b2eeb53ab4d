// Report pieces of `calc plan` (planner.cc): a layout's step-time breakdown, the comparison of
// a given (published) layout with the best one, naming the term and the model assumption that
// separate them, and the notes on why the best layout is shaped as it is.
#pragma once

#include <string>
#include <vector>

#include "lmstack/calc/train_estimate.h"

namespace lmstack::calc {

// "tp 8 pp 16 dp 128 v 8 zero 1 recompute selective".
std::string describe_layout(const TrainEstimate& e);
// Rows "<prefix>_layout", "<prefix>_step_s", "<prefix>_micro_batches", "<prefix>_bubble",
// "<prefix>_{compute,bubble,tp,pp,ep,dp_exposed}_s", "<prefix>_mfu", "<prefix>_hw_flops_per_gpu",
// "<prefix>_memory_bytes", "<prefix>_fits", "<prefix>_{dp,tp,pp}_bytes".
void add_layout_breakdown(Section& s, const std::string& prefix, const TrainEstimate& e);
// Section "compare": the fastest of `compared` (fitting or not), its rank among `fits`
// (sorted fastest first), how much slower than the best it is, and in the explanation of
// "compare_verdict" which term and which assumption make the best layout win.
void add_comparison(const ModelShape& m, const HardwareSpec& hw, const PlanOptions& o,
                    const std::vector<TrainEstimate>& fits,
                    const std::vector<TrainEstimate>& compared, Report& r);
void add_plan_notes(const HardwareSpec& hw, const std::vector<TrainEstimate>& fits, Report& r);

}  // namespace lmstack::calc
