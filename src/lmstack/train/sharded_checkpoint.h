// Sharded training checkpoints (docs/formats/checkpoint.md, "Sharded checkpoints"): each rank
// of a data-parallel run writes the chunk it owns of every flat unit (weights, Adam m and v)
// to its own shard-RRRRR-of-NNNNN.safetensors, and rank 0 writes index.json, which says which
// element range of which tensor lives where, so nothing is ever gathered on one rank. A
// CheckpointReader reads any element range of any tensor from such a checkpoint or from a
// whole-tensor (single-process, Hugging Face) checkpoint alike, which is all resharding needs:
// a rank of the new layout reads exactly the ranges it owns.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lmstack/dist/comm.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/data_parallel.h"

namespace lmstack::train {

enum class StateKind : uint8_t { kWeights = 0, kExpAvg = 1, kExpAvgSq = 2 };

class CheckpointReader {
 public:
  // A directory with index.json (sharded) or model.safetensors + optimizer.*.safetensors.
  // FormatError/IoError naming the file on a malformed or missing part.
  explicit CheckpointReader(const std::string& dir);
  ~CheckpointReader();

  const model::ModelConfig& config() const { return config_; }
  bool sharded() const { return sharded_; }
  int world_size() const { return world_size_; }  // 1 for a whole-tensor checkpoint
  int zero() const { return zero_; }
  // lmstack names ("layers.0.wq") and shapes of every trainable tensor.
  const std::map<std::string, Shape>& shapes() const { return shapes_; }
  // Copies elements [begin, end) of the flattened tensor `name` into out. FormatError naming
  // the index when a range is not covered.
  void read(StateKind kind, const std::string& name, int64_t begin, int64_t end, float* out) const;
  // All tensors of one kind as ModelWeights (allocated, f32; a tied lm_head shares embed).
  model::ModelWeights full_weights(StateKind kind) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  model::ModelConfig config_;
  bool sharded_ = false;
  int world_size_ = 1, zero_ = 0;
  std::map<std::string, Shape> shapes_;
};

// Writes this rank's shard and (rank 0) index.json, config.json, the tokenizer files and
// trainer_state.json, then `latest`; collective. Returns the checkpoint directory (a fresh
// step-NNNNNNNN, suffixed when a checkpoint of that step already exists). Keeps `keep`.
std::string save_sharded_checkpoint(const std::string& out_dir, const TrainModel& model,
                                    DataParallel& dp, dist::Comm& comm, const TrainerState& state,
                                    const model::ModelDirFiles& files, int keep);

// Loads this rank's owned ranges of weights, m and v (any checkpoint layout) into `dp`, sets
// its step count and gathers the weights (stages 1, 2).
void load_sharded_state(const CheckpointReader& reader, const std::string& dir, DataParallel& dp);

// The model of a checkpoint of any layout: load_model_dir of a whole one; for a sharded one,
// its config, its weights assembled from the shards (allocated, f32) and its tokenizer and
// generation files.
model::ModelDir load_checkpoint_model(const std::string& dir);

// Writes a plain Hugging Face directory (config, model.safetensors, tokenizer files) of the
// checkpoint's weights: what `lmstack checkpoint export` does.
void export_checkpoint(const std::string& checkpoint_dir, const std::string& out_dir);

}  // namespace lmstack::train
