// Tasks with verifiable rewards, generated on the fly from a seed: multi-digit addition and
// multiplication, string reversal, sorting a short list. One fixed format for all of them:
// the prompt "Q: <question>\nA:" and the completion " <answer>\n" (then EOS), so a model
// fine-tuned on sft_text() examples answers in it and the reward can check it exactly.
// Not here: scoring (reward.h), tokens (rollout.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lmstack::rl {

struct Example {
  std::string prompt;  // "Q: 12+34\nA:"
  std::string answer;  // "46": what the completion's first line must be (leading space trimmed)
};

// Held-out examples are those whose question hashes into the held-out tenth, so training and
// evaluation never share a question even on small tasks (2-digit addition has 8100).
enum class Split { kTrain, kHeldOut };

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  // Example `index` of the `split` stream seeded by `seed`: the same arguments give the same
  // example on every machine (splitmix64, no std:: distributions).
  Example make(uint64_t seed, int64_t index, Split split) const;
  // Whether `answer` has the task's answer format (digits; letters; a comma list of digits).
  virtual bool is_well_formed(std::string_view answer) const = 0;

 protected:
  // One candidate example drawn from the random stream `rng` (advanced by the callee).
  virtual Example draw(uint64_t& rng) const = 0;
};

// "add", "add:3" (digits per operand, default 2), "mul:2", "reverse:5" (letters), "sort:4"
// (list length). Throws RequestError naming the spec and listing the tasks.
std::unique_ptr<Task> make_task(const std::string& spec);

// The completion's answer: its first line with one leading space removed.
std::string extract_answer(std::string_view completion);
// The supervised text of an example: prompt + " " + answer + "\n" (prepare-data adds EOS).
std::string sft_text(const Example& e);

// splitmix64 (Steele et al. 2014): advances `state` and returns the next 64 random bits.
uint64_t splitmix64(uint64_t& state);

}  // namespace lmstack::rl
