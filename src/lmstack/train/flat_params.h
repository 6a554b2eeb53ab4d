// The flat layout data parallelism and ZeRO put the parameters in (the "flat parameter" of
// PyTorch FSDP, the contiguous gradient buckets of PyTorch DDP). Parameters are laid out in
// the order the backward produces their gradients (head, layers L-1..0, embeddings) and cut
// into units of whole parameter groups (model_train.h: embeddings, one layer, head):
//   - ZeRO 0-2: a unit is a gradient bucket, closed once it holds >= bucket_bytes (PyTorch
//     DDP's bucket_cap_mb, 25 MB), so its all-reduce starts as soon as its last layer's
//     backward is done;
//   - ZeRO 3: a unit is one group (FSDP wraps each transformer block), gathered whole.
// Each unit is padded to a multiple of the world size N and split into N equal chunks; rank r
// owns chunk r of every unit (its optimizer state, its reduce-scattered gradient, its ZeRO-3
// weights, its part of a sharded checkpoint).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lmstack/core/tensor.h"
#include "lmstack/train/model_train.h"

namespace lmstack::train {

struct FlatParam {
  size_t index = 0;  // into TrainModel::params()
  std::string name;
  Shape shape;
  int group = 0;
  int64_t offset = 0;  // first element within its unit
  int64_t numel = 0;
  bool decay = false;
};

struct FlatUnit {
  std::vector<FlatParam> params;  // in layout order
  std::vector<int> groups;        // groups whose parameters it holds, in backward order
  int64_t numel = 0;              // elements of its parameters
  int64_t padded = 0;             // numel rounded up to a multiple of the world size
  int64_t chunk = 0;              // padded / world: what one rank owns
};

struct FlatLayout {
  std::vector<FlatUnit> units;     // in backward order
  std::vector<int> unit_of_group;  // group -> unit
  int num_groups = 0;
  int world = 1;

  // Layout of `params` (TrainModel::params()) over `world` ranks. bucket_bytes <= 0 or
  // one_group_per_unit: a unit per group. Parameters whose name `exclude` accepts are left out.
  static FlatLayout build(const std::vector<ParamRef>& params, int num_layers, int world,
                          int64_t bucket_bytes, bool one_group_per_unit,
                          const std::function<bool(const std::string&)>& exclude = {});
  int64_t total_padded() const;
};

// The part [begin, end) of a unit's elements that parameter `p` covers, clipped to the
// element range [lo, hi) of the unit; empty (begin >= end) when they do not meet.
struct ParamSlice {
  const FlatParam* param = nullptr;
  int64_t begin = 0, end = 0;  // element offsets within the parameter's flattened tensor
  int64_t unit_offset = 0;     // where `begin` sits within the unit
};
std::vector<ParamSlice> params_in_range(const FlatUnit& unit, int64_t lo, int64_t hi);

}  // namespace lmstack::train
