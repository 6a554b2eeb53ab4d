// Reward functions: a completion's text (and the example it answers) in, a number out. Users
// extend lmstack by deriving from Reward in C++ (tests/rl/reward_test.cc shows one), or score
// through any external program with CommandReward (`lmstack rl --reward-cmd`).
// Thread safety: score() is called from one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lmstack/rl/task.h"

namespace lmstack::rl {

class Reward {
 public:
  virtual ~Reward() = default;
  // The reward of `completion` (the decoded response, EOS excluded) for `example`.
  virtual double score(const Example& example, const std::string& completion) = 0;
};

// 1 when extract_answer(completion) equals the answer exactly, else 0.
class ExactMatchReward : public Reward {
 public:
  double score(const Example& example, const std::string& completion) override;
};

// `weight` when the completion is in the task's format (a well-formed answer and a newline
// after it), else 0: the shaping term of DeepSeek-R1's "format reward", scaled small.
class FormatReward : public Reward {
 public:
  FormatReward(const Task& task, double weight) : task_(task), weight_(weight) {}
  double score(const Example& example, const std::string& completion) override;

 private:
  const Task& task_;
  double weight_;
};

// Σ of its parts.
class SumReward : public Reward {
 public:
  void add(std::unique_ptr<Reward> r) { parts_.push_back(std::move(r)); }
  double score(const Example& example, const std::string& completion) override;

 private:
  std::vector<std::unique_ptr<Reward>> parts_;
};

// Runs `command` through /bin/sh once per completion with the JSON object
// {"prompt": ..., "answer": ..., "completion": ...} on stdin and reads one number from its
// stdout. RequestError naming the command for a non-zero exit or output that is not a number.
class CommandReward : public Reward {
 public:
  explicit CommandReward(std::string command) : command_(std::move(command)) {}
  double score(const Example& example, const std::string& completion) override;

 private:
  std::string command_;
};

}  // namespace lmstack::rl
