// The 3-D device mesh of model parallelism (issue 15): world = TP × DP × PP ranks in Megatron's
// order (Shoeybi et al. 2019; Narayanan et al. 2021, §3.3): tensor-parallel ranks are
// innermost (consecutive world ranks, one node's fast links), then data parallel, then
// pipeline stages outermost:  world_rank = tp_rank + T · (dp_rank + D · pp_rank).
// A Mesh owns one sub-communicator per group kind, made with Comm::split. Not here: what is
// sent over them (train/model_parallel*); the same grouping computed without a Comm for
// `lmstack calc train` lives in calc/ (calc links core only), checked equal by a test.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lmstack/dist/comm.h"

namespace lmstack::dist {

struct MeshShape {
  int tp = 1, pp = 1, dp = 1;
  int world() const { return tp * pp * dp; }
};

struct MeshCoord {
  int tp = 0, dp = 0, pp = 0;
};

// Coordinates of `world_rank` and back (the formula in the header comment).
MeshCoord mesh_coord(const MeshShape& shape, int world_rank);
int mesh_rank(const MeshShape& shape, const MeshCoord& c);

// Every group of one kind ("tp", "dp", "pp") as lists of world ranks, in group-index order;
// within a group, ranks are listed by their index in it.
std::vector<std::vector<int>> mesh_groups(const MeshShape& shape, const std::string& kind);

// "TP groups [0 1] [2 3] ..., DP groups ..., PP groups ..." : what the run prints at start.
std::string describe_mesh(const MeshShape& shape);

class Mesh {
 public:
  // Splits `world` (size must equal shape.world(): ConfigError otherwise, naming the product).
  // Collective over world. `world` must outlive the mesh.
  Mesh(Comm& world, const MeshShape& shape);

  const MeshShape& shape() const { return shape_; }
  const MeshCoord& coord() const { return coord_; }
  Comm& world() { return world_; }
  Comm& tp() { return *tp_; }  // rank in it = coord().tp
  Comm& dp() { return *dp_; }  // rank in it = coord().dp
  Comm& pp() { return *pp_; }  // rank in it = coord().pp
  bool is_first_stage() const { return coord_.pp == 0; }
  bool is_last_stage() const { return coord_.pp == shape_.pp - 1; }

 private:
  Comm& world_;
  MeshShape shape_;
  MeshCoord coord_;
  std::unique_ptr<Comm> tp_, dp_, pp_;
};

}  // namespace lmstack::dist
