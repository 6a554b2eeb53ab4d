// The step driver end to end on a tiny model: an interrupted run (a checkpoint write that
// fails half-way, as if killed) resumes to the very same loss curve bit for bit; a resume
// with other settings is refused naming the difference; a NaN loss stops the run and keeps
// the last good checkpoint; the log lines are run-metrics records with the byte counts.
#include "lmstack/train/trainer.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/data.h"
#include "lmstack/train/train_log.h"
#include "test_util.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

using test_fixtures::losses_of;
using test_fixtures::make_data;
using test_fixtures::tiny_config;

TEST(TrainerTest, ResumeAfterAKilledCheckpointWriteIsBitExact) {
  const std::string data = make_data("trainer_data");
  ThreadPool pool(2);
  const TrainConfig full = tiny_config(data, test::temp_dir("trainer_full"));
  run_training(full, pool);
  const std::vector<double> expected = losses_of(full.log_path);
  ASSERT_EQ(expected.size(), 6u);
  EXPECT_LT(expected.back(), expected.front());

  TrainConfig broken = tiny_config(data, test::temp_dir("trainer_broken"));
  set_file_fault_hook([](std::string_view op, const std::string& path) -> int64_t {
    const bool hit = op == "write" && path.find("step-00000004") != std::string::npos &&
                     path.find("optimizer.exp_avg_sq") != std::string::npos;
    return hit ? -2 : -1;
  });
  EXPECT_THROW(run_training(broken, pool), IoError);
  set_file_fault_hook(nullptr);
  ASSERT_TRUE(latest_checkpoint(broken.out_dir).has_value());
  EXPECT_NE(latest_checkpoint(broken.out_dir)->find("step-00000002"), std::string::npos);
  broken.resume = true;
  const TrainResult r = run_training(broken, pool);
  EXPECT_EQ(r.first_step, 2);
  EXPECT_EQ(r.last_step, 6);
  EXPECT_EQ(losses_of(broken.log_path), expected);  // bit for bit, log lines 1-2 kept

  for (const Json& line : read_train_log(broken.log_path)) {
    EXPECT_EQ(line["schema"], "lmstack.run.v1");
    EXPECT_EQ(line["kind"], "train");
    const Json& m = line["measured"];  // f32 training: 4 + 4 + 8 bytes per parameter
    EXPECT_EQ(m["gradients_bytes"].get<int64_t>(), m["weights_bytes"].get<int64_t>());
    EXPECT_EQ(m["optimizer_bytes"].get<int64_t>(), 2 * m["weights_bytes"].get<int64_t>());
    EXPECT_GT(m["activations_bytes"].get<int64_t>(), 0);
  }
}

TEST(TrainerTest, ResumeWithOtherSettingsSaysWhatDiffers) {
  const std::string data = make_data("trainer_mismatch_data");
  ThreadPool pool(2);
  TrainConfig c = tiny_config(data, test::temp_dir("trainer_mismatch"));
  c.steps = 2;
  run_training(c, pool);
  c.resume = true;
  c.steps = 4;
  c.batch = 3;
  c.lr.lr = 1e-3f;
  try {
    run_training(c, pool);
    FAIL() << "resume with another batch size was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("batch: checkpoint 2, now 3"), std::string::npos) << what;
    EXPECT_NE(what.find("lr: checkpoint"), std::string::npos) << what;
  }
}

// A trainer_state.json whose world_size is not a number was an "internal error" (nlohmann's
// type_error escaped, issue 13); it is a ConfigError naming the file and the field.
TEST(TrainerTest, ResumeFromAMistypedLayoutFieldNamesIt) {
  const std::string data = make_data("trainer_mistyped_data");
  ThreadPool pool(2);
  TrainConfig c = tiny_config(data, test::temp_dir("trainer_mistyped"));
  c.steps = 2;
  run_training(c, pool);
  const auto latest = latest_checkpoint(c.out_dir);
  ASSERT_TRUE(latest.has_value());
  const std::string state = path_join(*latest, "trainer_state.json");
  Json j = read_json_file(state);
  j["world_size"] = "two";
  write_file_atomic(state, j.dump());
  c.resume = true;  // no step left: the resume compares the checkpoint's layout with this run's
  try {
    run_training(c, pool);
    FAIL() << "a string world_size was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("trainer_state.json"), std::string::npos) << what;
    EXPECT_NE(what.find("'world_size'"), std::string::npos) << what;
  }
}

TEST(TrainerTest, NanLossStopsAndKeepsTheLastCheckpoint) {
  const std::string data = make_data("trainer_nan_data");
  ThreadPool pool(2);
  TrainConfig c = tiny_config(data, test::temp_dir("trainer_nan"));
  c.lr.lr = 1e30f;  // the first update overflows the weights; the next loss is not finite
  c.lr.warmup = 0;
  c.grad_clip = 0;
  c.save_every = 1;
  try {
    run_training(c, pool);
    FAIL() << "a non-finite loss did not stop the run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the loss is"), std::string::npos) << e.what();
  }
  const auto latest = latest_checkpoint(c.out_dir);
  ASSERT_TRUE(latest.has_value());
  const int64_t saved = read_trainer_state(*latest).step;
  EXPECT_GE(saved, 1);
  for (double l : losses_of(c.log_path)) EXPECT_TRUE(std::isfinite(l));
}

// The checkpoint `latest` names is whole: its weights, optimizer state and trainer state load.
void expect_loadable(const std::string& checkpoint, int64_t step, ThreadPool& pool) {
  const model::ModelDir md = model::load_model_dir(checkpoint);
  EXPECT_GT(md.weights.embed.numel(), 0);
  EXPECT_EQ(read_trainer_state(checkpoint).step, step);
  TrainModel model(md.config, md.weights, pool, TrainModelOptions{});
  AdamW opt(model.params(), AdamWConfig{});
  EXPECT_NO_THROW(load_optimizer_state(checkpoint, model, opt));
  EXPECT_EQ(opt.steps_taken(), step);
}

// A full disk: the write of step 4's weights stops after 1000 bytes (the file is left short,
// as ENOSPC leaves it) and fails; the run stops naming the file, and the previous checkpoint
// is still the one `latest` names, complete.
TEST(TrainerTest, FullDiskFailsTheSaveAndKeepsThePreviousCheckpoint) {
  const std::string data = make_data("trainer_disk_data");
  ThreadPool pool(2);
  const TrainConfig c = tiny_config(data, test::temp_dir("trainer_disk"));
  set_file_fault_hook([](std::string_view op, const std::string& path) -> int64_t {
    const bool hit =
        op == "write" && path.find("step-00000004/model.safetensors") != std::string::npos;
    return hit ? 1000 : -1;
  });
  try {
    run_training(c, pool);
    ADD_FAILURE() << "the save on a full disk did not fail";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("step-00000004/model.safetensors: write truncated"),
              std::string::npos)
        << e.what();
  }
  set_file_fault_hook(nullptr);
  const auto latest = latest_checkpoint(c.out_dir);
  ASSERT_TRUE(latest.has_value());
  EXPECT_NE(latest->find("step-00000002"), std::string::npos) << *latest;
  expect_loadable(*latest, 2, pool);
}

// An output directory the run cannot write into (a file stands where step 4's directory goes;
// root ignores permission bits, so chmod would not do): a clear error naming the path, and
// step 2 stays the loadable latest checkpoint.
TEST(TrainerTest, UnwritableOutputDirectoryFailsTheSaveClearly) {
  const std::string data = make_data("trainer_ro_data");
  ThreadPool pool(2);
  const TrainConfig c = tiny_config(data, test::temp_dir("trainer_ro"));
  make_directories(path_join(c.out_dir, "checkpoints"));
  write_file_atomic(path_join(c.out_dir, "checkpoints/step-00000004"), "not a directory\n");
  try {
    run_training(c, pool);
    ADD_FAILURE() << "a save into an unwritable directory did not fail";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoints/step-00000004"), std::string::npos)
        << e.what();
  }
  const auto latest = latest_checkpoint(c.out_dir);
  ASSERT_TRUE(latest.has_value());
  EXPECT_NE(latest->find("step-00000002"), std::string::npos) << *latest;
  expect_loadable(*latest, 2, pool);

  // No output directory at all can be made (its parent is a file): the first save fails.
  TrainConfig blocked = c;
  blocked.out_dir = path_join(c.out_dir, "checkpoints/step-00000004/out");
  blocked.log_path.clear();
  EXPECT_THROW(run_training(blocked, pool), IoError);
}

}  // namespace
}  // namespace lmstack::train
