// The `lmstack rl` run loop: for each step, take prompts (a built-in task or a JSONL file),
// roll them out on the session's engine, score them, compare the trainer's log-probs of the
// sampled tokens with the engine's, update the policy (GRPO or PPO; DPO steps over preference
// pairs instead), sync the weights into the engine, and log one JSONL line with the step's
// reward, KL, entropy, response length, time split and log-prob gap. Held-out accuracy
// (greedy, exact match) is measured before the first step, every eval_every steps and at the
// end. The log is what `lmstack plot --metric reward|kl|entropy|response_len` draws. Rollouts
// and weight syncs go through a RolloutBackend: the session's own engine (LocalRollouts) or
// rollout ranks (remote.h), with the same loop, so both layouts compute the same run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lmstack/model/model_dir.h"
#include "lmstack/rl/dpo.h"
#include "lmstack/rl/grpo.h"
#include "lmstack/rl/ppo.h"
#include "lmstack/rl/reward.h"
#include "lmstack/rl/rollout_backend.h"
#include "lmstack/rl/session.h"
#include "lmstack/rl/task.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::rl {

struct RunOptions {
  std::string algo = "grpo";  // grpo | ppo | dpo
  std::string task;           // a task spec (task.h), or "" with prompts_file
  std::string prompts_file;   // JSONL: {"prompt", "answer"} (grpo/ppo) or pairs (dpo)
  std::string reward_cmd;     // external scorer (reward.h CommandReward); "" = built-in
  double format_reward = 0.1;
  uint64_t seed = 0;
  int steps = 20;
  int prompts_per_step = 8;
  int group_size = 8;  // samples per prompt (GRPO's G; PPO's n)
  model::SamplingParams sampling;
  int eval_every = 10;
  int eval_examples = 200;
  int dpo_pairs_per_step = 8;
  GrpoConfig grpo;
  PpoConfig ppo;
  DpoConfig dpo;
  std::string out_dir;  // log.jsonl and model/ (the final policy) go here
};

// Runs the whole loop (steps == 0: only the held-out accuracy, nothing saved); returns 0. `md` is
// the loaded model the session was built from; `engines` does the rollouts (LocalRollouts(s)
// in one process) and receives the weights after each update.
int run_rl(const RunOptions& o, RlSession& s, RolloutBackend& engines, const model::ModelDir& md,
           const tokenizer::Tokenizer& tok);

// Greedy exact-match accuracy on the first `count` held-out examples of `task`.
double heldout_accuracy(RolloutBackend& engines, const tokenizer::Tokenizer& tok, const Task& task,
                        uint64_t seed, int count, int max_tokens);

// Writes `count` training examples of `task` as sft_text, separated by lines "%" (for
// `prepare-data --split-on %`).
void write_sft_examples(const Task& task, uint64_t seed, int64_t count, const std::string& path);

}  // namespace lmstack::rl
