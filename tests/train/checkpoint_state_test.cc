// trainer_state.json parsing (train/checkpoint_state.h): a real file round-trips, and bad ones
// fail naming the file and field. A list nested 100,000 deep crashed --resume (issue 13).
#include "lmstack/train/checkpoint_state.h"

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/train/checkpoint.h"
#include "test_util.h"

namespace lmstack::train {
namespace {

// What save_checkpoint writes (checkpoint.cc), with `settings` as given.
std::string state_json(const std::string& settings, const std::string& step = "4") {
  return R"({"format": "lmstack.checkpoint.v1", "step": )" + step +
         R"(, "windows_served": 12, "seed": 7, "optimizer_steps": 4, "settings": )" + settings +
         "}";
}

template <class E>
void expect_error(const std::string& text, const std::string& needle) {
  try {
    parse_trainer_state(text, "ck/trainer_state.json");
    ADD_FAILURE() << "accepted: " << text.substr(0, 80);
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CheckpointState, ParsesWhatSaveWrites) {
  const TrainerState s = parse_trainer_state(state_json(R"({"batch": 2, "lr": 0.001})"), "x");
  EXPECT_EQ(s.step, 4);
  EXPECT_EQ(s.windows_served, 12u);
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.settings["batch"], 2);
}

TEST(CheckpointState, RefusesBadFiles) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "[";
  for (int i = 0; i < 100000; ++i) deep += "]";
  expect_error<FormatError>(state_json(deep), "ck/trainer_state.json: JSON nests deeper than 256");
  expect_error<FormatError>(state_json("{}", "-3"), "ck/trainer_state.json: 'step' is negative");
  expect_error<FormatError>(state_json("[1]"), "'settings' must be an object");
  expect_error<ConfigError>(state_json("{}", "\"4\""), "field 'step' has the wrong type");
  expect_error<FormatError>("[]", "expected a JSON object");
}

TEST(CheckpointState, ResumeReadNamesTheCheckpoint) {
  const std::string dir = test::temp_dir("ckpt_state") + "/step-00000004";
  make_directories(dir);
  write_file_atomic(dir + "/trainer_state.json", state_json("{}").substr(0, 30));
  try {
    read_trainer_state(dir);
    ADD_FAILURE() << "accepted a truncated trainer_state.json";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/trainer_state.json: invalid JSON"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lmstack::train
