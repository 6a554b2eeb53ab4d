// Checkpoints of a tensor/pipeline-parallel run (issue 15 item 4). Saving assembles every
// tensor whole (weights, Adam m and v) on world rank 0, which writes an ordinary whole-tensor
// checkpoint (checkpoint.h): so a run saved at (tp 2, pp 2) resumes at any other layout, at
// (dp 4) or in one process, since every layout reads whole tensors and takes its slices.
// The assembly is one all-reduce per tensor over the world of a buffer where each owner
// placed its slice and every other rank zeros (exact: x + 0 = x): simple, and O(world ·
// model) bytes moved, fine for the CPU-sized models this trains, not for a 70B model (that
// wants the sharded format of sharded_checkpoint.h extended with TP slices; not done).
#pragma once

#include <optional>
#include <string>

#include "lmstack/model/model_dir.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/model_parallel.h"

namespace lmstack::train {

// Collective over the mesh's world. `like` gives the whole model's tensor names and shapes.
// Rank 0 writes the checkpoint and returns its directory; other ranks return "".
std::string save_model_parallel_checkpoint(const std::string& out_dir, ModelParallel& mp,
                                           const model::ModelConfig& config,
                                           const model::ModelWeights& like,
                                           const TrainerState& state,
                                           const model::ModelDirFiles& files, int keep,
                                           ThreadPool& pool);

// Loads Adam's m and v (and the step count) of a checkpoint of any layout into mp's slices
// (the weights come with the checkpoint's model, sliced by ModelParallel's constructor).
void load_model_parallel_optimizer(const std::string& checkpoint_dir, ModelParallel& mp,
                                   const model::ModelWeights& like);

}  // namespace lmstack::train
