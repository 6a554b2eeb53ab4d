// Checkpoints of a tensor/pipeline-parallel run (issue 15 item 4; docs/formats/checkpoint.md,
// "Sharded checkpoints", format v2). Saving gathers nothing: each rank writes the TP slices it
// owns of its stages' tensors (weights, Adam m and v) to its own shard-RRRRR-of-NNNNN
// .safetensors, one stored tensor per slice, and rank 0 writes index.json naming, per tensor,
// each slice's file and its block (row range x column range) in the whole tensor; a column
// slice (Wo, Wdown) is such a block though not one element range. Owner rule (one writer per
// element, ModelParallel::owns): DP rank 0 only; a replicated norm by TP rank 0; a replicated
// KV head by the first of its replicas. So the shards hold exactly one copy of the model and
// its optimizer state, and a rank writes O(model / (T·P)) bytes.
// Loading reads through CheckpointReader (sharded_checkpoint.h), which takes any checkpoint
// (this one, a data-parallel one of element ranges, a whole one): each rank reads only the
// blocks of its own slices, so a run saved at (tp 2, pp 2) resumes at (tp 1, pp 4), (dp 4),
// (tp 2 x dp 2) or in one process, and the data-parallel and single-process paths read it
// as they read any sharded checkpoint.
#pragma once

#include <string>

#include "lmstack/model/model_dir.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/model_parallel.h"
#include "lmstack/train/sharded_checkpoint.h"

namespace lmstack::train {

// Collective over the mesh's world: every owner writes its shard, then (after a barrier) rank 0
// the index, config, tokenizer files, trainer_state.json and `latest`, as save_sharded_checkpoint
// does (a crash before `latest` leaves the previous checkpoint the latest). Returns the
// checkpoint directory on every rank. Keeps the newest `keep` (0: all).
std::string save_model_parallel_checkpoint(const std::string& out_dir, ModelParallel& mp,
                                           const model::ModelConfig& config,
                                           const TrainerState& state,
                                           const model::ModelDirFiles& files, int keep);

// The weights of mesh rank `coord`'s stages (stage_plans), each tensor only as its TP slice
// (f32, allocated), read from a checkpoint of any layout; the other tensors are undefined. Give
// them to ModelParallel with options.sliced_weights = true.
model::ModelWeights read_model_parallel_weights(const CheckpointReader& reader,
                                                const dist::MeshShape& shape,
                                                const dist::MeshCoord& coord,
                                                const ModelParallelOptions& options);

// Loads Adam's m and v of mp's slices and the step count from a checkpoint of any layout.
// FormatError naming the checkpoint when a tensor is missing or its slice is mis-shaped.
void load_model_parallel_optimizer(const CheckpointReader& reader, const std::string& dir,
                                   ModelParallel& mp);

}  // namespace lmstack::train
