// Training under faults (issue 13 item 4), through the `lmstack train` binary: runs SIGKILLed
// at random moments (and once in the middle of a checkpoint write) and then resumed, again
// and again until one finishes, end with the same weights and optimizer state, byte for byte,
// as one uninterrupted run. About 15 s on 2 cores.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "lmstack/core/file.h"
#include "test_util.h"
#include "train/train_fixtures.h"

extern char** environ;

namespace lmstack::train {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSteps = 9;  // one digit: final_state() names step-0000000N

std::vector<std::string> train_args(const std::string& data, const std::string& out, bool resume) {
  std::vector<std::string> a = {test::lmstack_binary(),
                                "train",
                                "--model",
                                test::source_path("tests/data/train/llama/model"),
                                "--data",
                                data,
                                "--out",
                                out,
                                "--steps",
                                std::to_string(kSteps),
                                "--batch",
                                "2",
                                "--seq",
                                "16",
                                "--lr",
                                "0.003",
                                "--warmup",
                                "2",
                                "--seed",
                                "5",
                                "--save-every",
                                "1",
                                "--eval-every",
                                "0",
                                "-t",
                                "1"};
  if (resume) a.push_back("--resume");
  return a;
}

// Starts `args` with stdout and stderr to `log`.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Waits for pid; its exit code, or -signal.
int wait_for(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// True while a step directory exists without its trainer_state.json (the last file written).
bool checkpoint_write_in_progress(const std::string& out) {
  const std::string root = out + "/checkpoints";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root, ec))
    if (!std::filesystem::exists(e.path() / "trainer_state.json")) return true;
  return false;
}

std::string final_state(const std::string& out) {
  const std::string dir = out + "/checkpoints/step-0000000" + std::to_string(kSteps);
  return read_file(dir + "/model.safetensors") + read_file(dir + "/optimizer.exp_avg.safetensors") +
         read_file(dir + "/optimizer.exp_avg_sq.safetensors") +
         read_file(dir + "/trainer_state.json");
}

TEST(KillResume, SigkillAtRandomStepsThenResumeIsBitExact) {
  const std::string data = test_fixtures::make_data("kill_resume_data");
  const std::string root = test::temp_dir("kill_resume");
  const std::string log = root + "/runs.log";
  const auto t0 = Clock::now();
  ASSERT_EQ(wait_for(spawn(train_args(data, root + "/ref", false), log)), 0) << read_file(log);
  const auto full_run = Clock::now() - t0;
  const std::string expected = final_state(root + "/ref");

  std::mt19937 rng(13);
  int kills = 0, mid_write_kills = 0;
  constexpr int kTrials = 4;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string out = root + "/run" + std::to_string(trial);
    bool done = false;
    int trial_kills = 0;
    for (int attempt = 0; attempt < 60 && !done; ++attempt) {
      const pid_t pid = spawn(train_args(data, out, trial_kills > 0), log);
      // Each trial kills its first three runs: trial 0 as soon as a checkpoint is half
      // written, the others at a random moment (process start and model load included). A run
      // that was not killed must have finished cleanly.
      const bool may_kill = trial_kills < 3;
      const bool kill_mid_write = trial == 0 && may_kill;
      const auto deadline =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(
                             full_run * std::uniform_real_distribution<double>(0.05, 0.7)(rng));
      int status = 0;
      bool killed = false;
      while (waitpid(pid, &status, WNOHANG) == 0) {
        const bool mid_write = kill_mid_write && checkpoint_write_in_progress(out);
        if (may_kill && !killed && (mid_write || (!kill_mid_write && Clock::now() >= deadline))) {
          kill(pid, SIGKILL);
          killed = true;
          ++kills;
          ++trial_kills;
          mid_write_kills += mid_write;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      if (WIFSIGNALED(status)) {
        EXPECT_TRUE(killed && WTERMSIG(status) == SIGKILL) << read_file(log);
      } else {
        ASSERT_EQ(WEXITSTATUS(status), 0) << read_file(log);
        done = trial_kills > 0;  // a run that beat its kill time is redone from scratch
        if (!done) std::filesystem::remove_all(out);
      }
    }
    ASSERT_TRUE(done) << out << " never finished\n" << read_file(log);
    EXPECT_TRUE(final_state(out) == expected) << out
                                              << ": final weights differ from the "
                                                 "uninterrupted run";
  }
  EXPECT_GE(kills, kTrials);
  EXPECT_GE(mid_write_kills, 3) << "kills inside a checkpoint write";
  std::printf("%d SIGKILLs (%d inside a checkpoint write), every trial bit-exact\n", kills,
              mid_write_kills);
}

}  // namespace
}  // namespace lmstack::train
