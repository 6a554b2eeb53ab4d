// Mesh: Megatron's rank order and the three splits (see mesh.h).
#include "lmstack/dist/mesh.h"

#include "lmstack/core/error.h"

namespace lmstack::dist {

MeshCoord mesh_coord(const MeshShape& s, int r) {
  return MeshCoord{r % s.tp, (r / s.tp) % s.dp, r / (s.tp * s.dp)};
}

int mesh_rank(const MeshShape& s, const MeshCoord& c) { return c.tp + s.tp * (c.dp + s.dp * c.pp); }

std::vector<std::vector<int>> mesh_groups(const MeshShape& s, const std::string& kind) {
  LMSTACK_CHECK(kind == "tp" || kind == "dp" || kind == "pp", "mesh group kind {}", kind);
  const int size = kind == "tp" ? s.tp : kind == "dp" ? s.dp : s.pp;
  std::vector<std::vector<int>> groups(static_cast<size_t>(s.world() / size));
  // A group is identified by the two coordinates it does not vary, enumerated in world order
  // of its first member.
  for (int r = 0; r < s.world(); ++r) {
    const MeshCoord c = mesh_coord(s, r);
    const int index = kind == "tp"   ? c.dp + s.dp * c.pp
                      : kind == "dp" ? c.tp + s.tp * c.pp
                                     : c.tp + s.tp * c.dp;
    groups[static_cast<size_t>(index)].push_back(r);
  }
  return groups;
}

std::string describe_mesh(const MeshShape& s) {
  std::string out = fmt::format(
      "mesh tp {} x dp {} x pp {} = {} ranks (Megatron order: tp "
      "innermost, then dp, then pp)",
      s.tp, s.dp, s.pp, s.world());
  for (const char* kind : {"tp", "dp", "pp"}) {
    out += fmt::format("\n  {} groups:", kind);
    for (const std::vector<int>& g : mesh_groups(s, kind)) {
      out += " [";
      for (size_t i = 0; i < g.size(); ++i) out += (i ? " " : "") + std::to_string(g[i]);
      out += "]";
    }
  }
  return out;
}

Mesh::Mesh(Comm& world, const MeshShape& shape)
    : world_(world), shape_(shape), coord_(mesh_coord(shape, world.rank())) {
  if (shape.tp < 1 || shape.pp < 1 || shape.dp < 1 || shape.world() != world.size())
    throw_error<ConfigError>(
        "--tp {} x --pp {} x --dp {} = {} ranks, but the launcher started {} (mpirun -np)",
        shape.tp, shape.pp, shape.dp, shape.world(), world.size());
  const MeshCoord& c = coord_;
  // Colors: the coordinates a group does not vary; keys: the one it does (its rank in it).
  tp_ = world.split(c.dp + shape.dp * c.pp, c.tp);
  dp_ = world.split(c.tp + shape.tp * c.pp, c.dp);
  pp_ = world.split(c.tp + shape.tp * c.dp, c.pp);
}

}  // namespace lmstack::dist
