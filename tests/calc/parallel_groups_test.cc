// calc's rank grouping against Megatron-LM's documented example (initialize_model_parallel:
// 16 GPUs, tp 2, pp 4, dp 2: TP groups [g0 g1] [g2 g3] ..., PP groups [g0 g4 g8 g12] ...,
// DP groups [g0 g2] [g1 g3] ...), the same example tests/dist/mesh_test.cc checks Mesh on.
#include "lmstack/calc/parallel_groups.h"

#include <gtest/gtest.h>

namespace lmstack::calc {
namespace {

using Groups = std::vector<std::vector<int>>;

TEST(ParallelGroups, MegatronExample) {
  EXPECT_EQ(format_groups(parallel_groups(2, 4, 2, "tp")),
            "[0 1] [2 3] [4 5] [6 7] [8 9] [10 11] [12 13] [14 15]");
  EXPECT_EQ(format_groups(parallel_groups(2, 4, 2, "dp")),
            "[0 2] [1 3] [4 6] [5 7] [8 10] [9 11] [12 14] [13 15]");
  EXPECT_EQ(parallel_groups(2, 4, 2, "pp"),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(format_groups(parallel_groups(1, 1, 16, "tp"), 2), "[0] [1] ... (16 groups)");
}

}  // namespace
}  // namespace lmstack::calc
