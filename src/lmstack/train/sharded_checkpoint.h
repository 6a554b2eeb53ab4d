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
#include <utility>
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
  // Copies rows [row_begin, row_end) x columns [col_begin, col_end) of `name` viewed as
  // [rows, cols] (a 1-D tensor has one column) into out, row-major: a TP slice. Opens only the
  // shards holding a part of it.
  void read_block(StateKind kind, const std::string& name, int64_t row_begin, int64_t row_end,
                  int64_t col_begin, int64_t col_end, float* out) const;
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

// A tensor stored whole in one rank's shard beside the flat units: under expert parallelism
// the experts, which the data-parallel units leave out (expert_data_parallel.h). Every rank
// lists every entry (rank 0 indexes them as one slice [0, numel) each); only `rank`, the
// writer, reads value, exp_avg and exp_avg_sq (numel floats each).
struct WholeShardTensor {
  std::string name;
  Shape shape;
  int rank = 0;
  const float* value = nullptr;
  const float* exp_avg = nullptr;
  const float* exp_avg_sq = nullptr;
};

// Writes this rank's shard and (rank 0) index.json, config.json, the tokenizer files and
// trainer_state.json, then `latest`; collective. Returns the checkpoint directory (a fresh
// step-NNNNNNNN, suffixed when a checkpoint of that step already exists). Keeps `keep`.
// `whole`: tensors outside dp's units, written whole by their rank; `ep` is recorded in
// trainer_state.json (the expert-parallel size of the run).
std::string save_sharded_checkpoint(const std::string& out_dir, const TrainModel& model,
                                    DataParallel& dp, dist::Comm& comm, const TrainerState& state,
                                    const model::ModelDirFiles& files, int keep,
                                    const std::vector<WholeShardTensor>& whole = {}, int ep = 1);

// Pieces shared with the TP/PP writer (model_parallel_checkpoint.cc). The shard of `rank`:
// "shard-RRRRR-of-NNNNN.safetensors".
std::string shard_file_name(int rank, int world);
// {name relative to out_dir, full path} of a fresh checkpoint directory of `step`, created:
// checkpoints/step-N, + `suffix` when a complete one of that step exists. Collective on comm.
std::pair<std::string, std::string> new_sharded_checkpoint_dir(const std::string& out_dir,
                                                               int64_t step, dist::Comm& comm,
                                                               const std::string& suffix);
// Rank 0, once every shard is on disk: config and tokenizer files, index.json,
// trainer_state.json (state plus the fields of `layout`: optimizer_steps, world_size, ...),
// then `latest` (the commit: a crash before it leaves the previous checkpoint latest); prunes.
void commit_sharded_checkpoint(const std::string& out_dir, const std::string& name,
                               const model::ModelConfig& config, const model::ModelDirFiles& files,
                               const Json& index, const TrainerState& state, const Json& layout,
                               int keep);

// Loads this rank's owned ranges of weights, m and v (any checkpoint layout) into `dp`, sets
// its step count and gathers the weights (stages 1, 2).
void load_sharded_state(const CheckpointReader& reader, const std::string& dir, DataParallel& dp);

// The model of a checkpoint of any layout: load_model_dir of a whole one; for a sharded one,
// its config, its weights assembled from the shards (allocated, f32) and its tokenizer and
// generation files.
// With weights = false, everything but the weights (a TP/PP resume reads its slices itself).
model::ModelDir load_checkpoint_model(const std::string& dir, bool weights = true);

// Writes a plain Hugging Face directory (config, model.safetensors, tokenizer files) of the
// checkpoint's weights: what `lmstack checkpoint export` does.
void export_checkpoint(const std::string& checkpoint_dir, const std::string& out_dir);

}  // namespace lmstack::train
