// Pipeline schedules against their formulas (Narayanan et al. 2021, §2.2): every micro-batch
// chunk is forwarded and backwarded exactly once per stage, forward before backward; the
// unit-time simulation of all stages' action lists (no deadlock) gives GPipe's and 1F1B's
// bubble (P-1)/m exactly, the interleaved one (P-1)/(v·m) exactly, and 1F1B holds at most P - s
// micro-batches on stage s where GPipe holds m. Also the layer split.
#include "lmstack/train/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <set>

#include "lmstack/core/error.h"
#include "lmstack/train/model_parallel.h"

namespace lmstack::train {
namespace {

void expect_complete(PipelineSchedule kind, int p, int m, int v) {
  for (int s = 0; s < p; ++s) {
    std::set<std::pair<int, int>> fwd, bwd;
    for (const PipelineAction& a : pipeline_actions(kind, p, m, v, s)) {
      const std::pair<int, int> key{a.micro_batch, a.chunk};
      if (a.backward) {
        EXPECT_TRUE(fwd.count(key)) << "backward before forward, stage " << s;
        EXPECT_TRUE(bwd.insert(key).second);
      } else {
        EXPECT_TRUE(fwd.insert(key).second);
      }
    }
    EXPECT_EQ(fwd.size(), static_cast<size_t>(m * v));
    EXPECT_EQ(bwd.size(), static_cast<size_t>(m * v));
  }
}

TEST(PipelineSchedule, BubbleEqualsTheFormula) {
  for (int p : {2, 4})
    for (int m : {4, 8, 16}) {
      for (PipelineSchedule k : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB}) {
        expect_complete(k, p, m, 1);
        const PipelineSimulation sim = simulate_pipeline(k, p, m, 1);
        EXPECT_NEAR(sim.bubble, (p - 1.0) / m, 1e-12) << pipeline_schedule_name(k) << p << m;
      }
      for (int v : {2, 4}) {
        expect_complete(PipelineSchedule::kInterleaved, p, m, v);
        const PipelineSimulation sim = simulate_pipeline(PipelineSchedule::kInterleaved, p, m, v);
        EXPECT_NEAR(sim.bubble, (p - 1.0) / (v * m), 1e-12)
            << "p " << p << " m " << m << " v " << v;
        EXPECT_DOUBLE_EQ(pipeline_bubble_formula(PipelineSchedule::kInterleaved, p, m, v),
                         (p - 1.0) / (v * m));
      }
    }
}

TEST(PipelineSchedule, OneFOneBBoundsTheMicroBatchesHeld) {
  const int p = 4, m = 8;
  const PipelineSimulation f1b = simulate_pipeline(PipelineSchedule::kOneFOneB, p, m, 1);
  const PipelineSimulation gpipe = simulate_pipeline(PipelineSchedule::kGpipe, p, m, 1);
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(f1b.max_in_flight[static_cast<size_t>(s)], p - s) << s;
    EXPECT_EQ(gpipe.max_in_flight[static_cast<size_t>(s)], m) << s;
  }
}

TEST(PipelineSchedule, InterleavedNeedsChunksAndAMultipleOfStages) {
  EXPECT_THROW(pipeline_actions(PipelineSchedule::kInterleaved, 4, 6, 2, 0), ConfigError);
  EXPECT_THROW(pipeline_actions(PipelineSchedule::kInterleaved, 4, 8, 1, 0), ConfigError);
  EXPECT_THROW(parse_pipeline_schedule("zb"), RequestError);
}

TEST(PipelineSchedule, LayerSplit) {
  EXPECT_EQ(pipeline_layer_split(10, 4, {}), (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(pipeline_layer_split(8, 2, {5, 3}), (std::vector<int>{5, 3}));
  EXPECT_THROW(pipeline_layer_split(8, 2, {4, 3}), ConfigError);
  EXPECT_THROW(pipeline_layer_split(8, 2, {8, 0}), ConfigError);
  EXPECT_THROW(pipeline_layer_split(3, 4, {}), ConfigError);
}

}  // namespace
}  // namespace lmstack::train
