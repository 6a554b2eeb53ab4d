// The flat layout of data parallelism: units hold whole groups in backward order, buckets
// close at the byte cap, units pad to N equal chunks, and the ranks' chunks cover every
// element of every parameter exactly once.
#include "lmstack/train/flat_params.h"

#include <gtest/gtest.h>

#include "lmstack/model/model_dir.h"
#include "test_util.h"

namespace lmstack::train {
namespace {

struct Tiny {
  model::ModelDir md = model::load_model_dir(test::source_path("tests/data/train/llama/model"));
  ThreadPool pool{1};
  TrainModel model{md.config, md.weights, pool, {}};
};

TEST(FlatLayoutTest, UnitsHoldWholeGroupsInBackwardOrder) {
  Tiny t;
  const int layers = t.md.config.num_layers;
  const FlatLayout one = FlatLayout::build(t.model.params(), layers, 3, 0, false);
  ASSERT_EQ(one.units.size(), static_cast<size_t>(layers + 2));  // a unit per group
  for (size_t u = 0; u < one.units.size(); ++u) {
    const FlatUnit& unit = one.units[u];
    EXPECT_EQ(unit.groups, std::vector<int>{layers + 1 - static_cast<int>(u)});
    EXPECT_EQ(unit.padded % 3, 0);
    EXPECT_LT(unit.padded - unit.numel, 3);
    EXPECT_EQ(unit.chunk * 3, unit.padded);
    int64_t offset = 0;
    for (const FlatParam& p : unit.params) {
      EXPECT_EQ(p.offset, offset);
      EXPECT_EQ(param_group(p.name, layers), unit.groups[0]);
      offset += p.numel;
    }
    EXPECT_EQ(offset, unit.numel);
  }
  // A 25 MB cap holds the whole tiny model in one bucket; with a cap of one layer's bytes a
  // bucket closes as soon as it reaches the cap (the small head joins the last layer).
  EXPECT_EQ(FlatLayout::build(t.model.params(), layers, 2, 25 << 20, false).units.size(), 1u);
  const int64_t cap = one.units[1].numel * 4;
  const FlatLayout capped = FlatLayout::build(t.model.params(), layers, 2, cap, false);
  ASSERT_EQ(capped.units.size(), static_cast<size_t>(layers + 1));
  EXPECT_EQ(capped.units[0].groups, (std::vector<int>{layers + 1, layers}));
  for (size_t u = 0; u + 1 < capped.units.size(); ++u) EXPECT_GE(capped.units[u].numel * 4, cap);
}

TEST(FlatLayoutTest, ChunksOfAllRanksCoverEachParameterOnce) {
  Tiny t;
  for (int world : {1, 2, 3, 4}) {
    const FlatLayout l =
        FlatLayout::build(t.model.params(), t.md.config.num_layers, world, 1 << 12, false);
    std::map<std::string, std::vector<int>> hits;
    for (const ParamRef& p : t.model.params())
      hits[p.name].assign(static_cast<size_t>(p.value->numel()), 0);
    for (const FlatUnit& u : l.units)
      for (int r = 0; r < world; ++r)
        for (const ParamSlice& s : params_in_range(u, r * u.chunk, (r + 1) * u.chunk)) {
          EXPECT_EQ(s.unit_offset, s.param->offset + s.begin);
          for (int64_t i = s.begin; i < s.end; ++i) ++hits[s.param->name][static_cast<size_t>(i)];
        }
    for (const auto& [name, h] : hits)
      for (int count : h) ASSERT_EQ(count, 1) << name << " world " << world;
  }
}

}  // namespace
}  // namespace lmstack::train
