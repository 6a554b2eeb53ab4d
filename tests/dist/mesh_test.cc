// The 3-D mesh: Megatron's rank order (the 16-GPU example of Megatron-LM's
// initialize_model_parallel docstring, here 8 ranks: tp 2, pp 2, dp 2) computed by formula,
// and the sub-communicators Mesh splits on an in-process group: each reaches exactly the ranks
// mesh_groups lists (an all-gather of world ranks over each group).
#include "lmstack/dist/mesh.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "lmstack/core/error.h"
#include "lmstack/dist/comm_local.h"

namespace lmstack::dist {
namespace {

using Groups = std::vector<std::vector<int>>;

TEST(Mesh, MegatronOrder) {
  const MeshShape s{2, 2, 2};
  EXPECT_EQ(mesh_groups(s, "tp"), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(mesh_groups(s, "dp"), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(mesh_groups(s, "pp"), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(mesh_rank(s, mesh_coord(s, r)), r);
  const MeshCoord c = mesh_coord(s, 5);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.dp, 0);
  EXPECT_EQ(c.pp, 1);
  EXPECT_NE(describe_mesh(s).find("pp groups: [0 4] [1 5] [2 6] [3 7]"), std::string::npos)
      << describe_mesh(s);
}

// Megatron-LM's initialize_model_parallel docstring: 16 GPUs, tp 2, pp 4 (dp 2).
TEST(Mesh, MegatronDocstringExample) {
  const MeshShape s{2, 4, 2};
  EXPECT_EQ(mesh_groups(s, "pp"),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(mesh_groups(s, "dp")[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(mesh_groups(s, "tp")[7], (std::vector<int>{14, 15}));
}

TEST(Mesh, SubCommunicatorsReachTheListedRanks) {
  const MeshShape s{2, 2, 2};
  std::mutex mu;
  std::map<std::string, std::set<std::vector<int>>> seen;
  run_local(8, [&](Comm& world) {
    Mesh mesh(world, s);
    for (const char* kind : {"tp", "dp", "pp"}) {
      Comm& g = std::string(kind) == "tp"   ? mesh.tp()
                : std::string(kind) == "dp" ? mesh.dp()
                                            : mesh.pp();
      const int32_t me = world.rank();
      std::vector<int32_t> all(static_cast<size_t>(g.size()));
      g.all_gather(&me, all.data(), 1, DType::kI32);
      std::lock_guard lock(mu);
      seen[kind].insert(std::vector<int>(all.begin(), all.end()));
    }
  });
  for (const char* kind : {"tp", "dp", "pp"}) {
    const Groups want = mesh_groups(s, kind);
    EXPECT_EQ(seen[kind], std::set<std::vector<int>>(want.begin(), want.end())) << kind;
  }
}

TEST(Mesh, WrongWorldSizeNamesTheProduct) {
  try {
    run_local(4, [&](Comm& world) { Mesh mesh(world, MeshShape{2, 2, 2}); });
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("= 8 ranks, but the launcher started 4"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lmstack::dist
