// The training commands end to end through the `lmstack` binary: prepare-data shards a text
// file, train runs, stops, resumes to the same loss curve as an uninterrupted run, plot draws
// it, and a corrupt shard is refused naming the file.
#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/train/train_log.h"
#include "test_util.h"

namespace lmstack::train {
namespace {

std::vector<double> losses(const std::string& log) {
  std::vector<double> out;
  for (const Json& j : read_train_log(log)) out.push_back(j["measured"]["loss"].get<double>());
  return out;
}

TEST(TrainCliTest, PrepareTrainResumePlot) {
  const std::string dir = test::temp_dir("train_cli");
  const std::string bin = test::lmstack_binary();
  std::string out;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "The quick brown fox " + std::to_string(i) + " jumps.\n%\n";
  write_file_atomic(path_join(dir, "corpus.txt"), text);
  auto run = [&](const std::string& args) {
    const int rc = test::run_command(bin + " " + args, &out);
    EXPECT_EQ(rc, 0) << args << "\n" << out;
    return rc;
  };
  ASSERT_EQ(run("init-model --preset tiny-llama --dtype f32 --seed 3 --out " + dir + "/init"), 0);
  ASSERT_EQ(run("prepare-data --tokenizer " + dir + "/init --input " + dir +
                "/corpus.txt --split-on % --val-fraction 0.1 --out " + dir + "/data -t 1"),
            0);
  const std::string common = " --model " + dir + "/init --data " + dir +
                             "/data --seq 16 --warmup 1 --lr 0.003 --save-every 2 -t 2";
  ASSERT_EQ(
      run("train" + common + " --batch 2 --steps 5 --out " + dir + "/a --log " + dir + "/a.jsonl"),
      0);
  ASSERT_EQ(
      run("train" + common + " --batch 2 --steps 2 --out " + dir + "/b --log " + dir + "/b.jsonl"),
      0);
  // Resuming with another batch size is refused and says so.
  EXPECT_NE(
      test::run_command(
          bin + " train" + common + " --batch 3 --steps 5 --resume --out " + dir + "/b", &out),
      0);
  EXPECT_NE(out.find("batch: checkpoint 2, now 3"), std::string::npos) << out;
  ASSERT_EQ(run("train" + common + " --batch 2 --steps 5 --resume --out " + dir + "/b --log " +
                dir + "/b.jsonl"),
            0);
  EXPECT_EQ(losses(dir + "/b.jsonl"), losses(dir + "/a.jsonl"));
  ASSERT_EQ(run("plot " + dir + "/a.jsonl --out " + dir + "/loss.svg"), 0);
  EXPECT_NE(read_file(dir + "/loss.svg").find("<polyline"), std::string::npos);
  // A truncated shard is refused with its name.
  const std::string shard = dir + "/data/train-00000.bin";
  write_file_atomic(shard, read_file(shard).substr(0, 40));
  EXPECT_NE(
      test::run_command(bin + " train" + common + " --batch 2 --steps 1 --out " + dir + "/c", &out),
      0);
  EXPECT_NE(out.find("train-00000.bin"), std::string::npos) << out;
}

}  // namespace
}  // namespace lmstack::train
