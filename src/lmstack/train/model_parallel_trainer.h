// The step loop of a tensor/pipeline-parallel run (`lmstack train --tp T --pp P [--dp D]`):
// run_training (trainer.h) loads the model and data, then hands over here when T·P > 1. Each
// step: every rank reads the global micro-batches (the same order as one process), DP rank d
// takes its batch/D sequences of each, and ModelParallel runs them through the pipeline; the
// log has the single-process fields plus the mesh, the measured bubble beside the formula and
// the activation bytes each stage held.
#pragma once

#include <optional>
#include <string>

#include "lmstack/model/model_dir.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/data.h"
#include "lmstack/train/trainer.h"

namespace lmstack::train {

TrainResult run_model_parallel_training(const TrainConfig& tc, const model::ModelDir& md,
                                        const DataManifest& data, const TrainerState& state,
                                        const std::optional<std::string>& checkpoint,
                                        dist::Comm& world, ThreadPool& pool);

}  // namespace lmstack::train
