// The Chrome trace: the hidden share of communication is the overlap with backward spans
// computed by hand, and write_trace gathers every rank's events into one valid JSON file
// (pid = rank) that a training run's --trace produces with forward, backward and comm spans.
#include "lmstack/train/trace.h"

#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/dist/comm_local.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

using std::chrono::milliseconds;

TEST(TraceTest, HiddenFractionIsTheOverlapWithTheBackward) {
  TraceRecorder t(0);
  const auto t0 = TraceRecorder::now();
  t.span("backward layer 1", "backward", TraceRecorder::kComputeTrack, t0, t0 + milliseconds(10));
  t.span("backward layer 0", "backward", TraceRecorder::kComputeTrack, t0 + milliseconds(10),
         t0 + milliseconds(20));
  t.span("forward layer 0", "forward", TraceRecorder::kComputeTrack, t0 + milliseconds(30),
         t0 + milliseconds(40));
  // 10 ms of comm from 15 to 25: 5 ms under the backward; 10 ms from 26 to 36: none hidden
  // by the backward (the forward does not count).
  t.span("all-reduce", "comm", TraceRecorder::kCommTrack, t0 + milliseconds(15),
         t0 + milliseconds(25));
  t.span("all-reduce", "comm", TraceRecorder::kCommTrack, t0 + milliseconds(26),
         t0 + milliseconds(36));
  EXPECT_NEAR(t.hidden_fraction("backward"), 5.0 / 20.0, 1e-3);
  EXPECT_NEAR(t.hidden_fraction("forward"), 6.0 / 20.0, 1e-3);
  // Two buckets in flight together count once: a third span inside the first changes nothing.
  t.span("all-reduce", "comm", TraceRecorder::kCommTrack, t0 + milliseconds(16),
         t0 + milliseconds(24));
  EXPECT_NEAR(t.hidden_fraction("backward"), 5.0 / 20.0, 1e-3);
}

TEST(TraceTest, TrainingTraceHoldsEveryRanksSpans) {
  const std::string data = test_fixtures::make_data("trace_data");
  TrainConfig c = test_fixtures::tiny_config(data, test::temp_dir("trace_run"));
  c.steps = 2;
  c.batch = 4;
  c.trace_path = path_join(c.out_dir, "trace.json");
  dist::run_local(2, [&](dist::Comm& comm) {
    TrainConfig mine = c;
    mine.comm = &comm;
    mine.bucket_bytes = 1;  // one bucket per layer
    ThreadPool pool(1);
    const TrainResult r = run_training(mine, pool);
    EXPECT_GE(r.comm_hidden_fraction, 0.0);
    EXPECT_LE(r.comm_hidden_fraction, 1.0);
  });
  const Json trace = read_json_file(c.trace_path);
  int forward[2] = {0, 0}, backward[2] = {0, 0}, comm[2] = {0, 0};
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int pid = e["pid"].get<int>();
    ASSERT_TRUE(pid == 0 || pid == 1);
    const std::string cat = e["cat"];
    (cat == "forward" ? forward : cat == "backward" ? backward : comm)[pid]++;
    EXPECT_GE(e["dur"].get<int64_t>(), 0);
  }
  for (int r = 0; r < 2; ++r) {
    // 2 steps x 2 micro-batches x 4 groups (embed, 2 layers, head), plus the evaluation's forward
    EXPECT_GE(forward[r], 16) << r;
    EXPECT_EQ(backward[r], 16) << r;
    EXPECT_GE(comm[r], 2 * 4) << r;  // a bucket per group, last micro-batch of each step
  }
}

}  // namespace
}  // namespace lmstack::train
