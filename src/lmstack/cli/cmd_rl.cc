// `lmstack rl --algo grpo|ppo|dpo --model DIR --task NAME|--prompts FILE.jsonl --out DIR`:
// RL post-training in one process, the serving engine doing the rollouts and the trainer the
// updates, weights synced in memory after each step (rl/driver.h has the loop, docs/rl.md the
// guide). `mpirun -np 1+R lmstack rl ... --rollout-ranks R`: rank 0 trains, ranks 1..R roll
// out, weights broadcast over the world Comm (rl/remote.h). `--write-sft FILE` writes supervised
// examples of the task's format instead, for `prepare-data --split-on %` and `train`.
#include <cstdio>
#include <optional>

#include "lmstack/cli/command.h"
#include "lmstack/cli/model_session.h"
#include "lmstack/core/error.h"
#include "lmstack/dist/comm.h"
#include "lmstack/rl/driver.h"
#include "lmstack/rl/remote.h"

namespace lmstack::cli {
namespace {

struct RlCliOptions {
  rl::RunOptions run;
  rl::SessionOptions session;
  std::string model, agg = "token", write_sft;
  int64_t sft_examples = 20000;
  int threads = 0;
  int rollout_ranks = 0;                   // 0: one process; R: mpirun -np 1+R, ranks 1..R roll out
  std::optional<float> clip_eps, kl_coef;  // shared by GRPO and PPO, whose defaults differ
  std::optional<int> epochs, minibatches;
};

void apply_shared(RlCliOptions& o) {
  rl::RunOptions& r = o.run;
  if (o.clip_eps) r.grpo.loss.clip_eps = r.ppo.clip_eps = *o.clip_eps;
  if (o.kl_coef) r.grpo.loss.kl_coef = r.ppo.kl_coef = *o.kl_coef;
  if (o.epochs) r.grpo.epochs = r.ppo.epochs = *o.epochs;
  if (o.minibatches) r.grpo.minibatches = r.ppo.minibatches = *o.minibatches;
  r.grpo.agg = o.agg == "token" ? rl::LossAgg::kTokenMean : rl::LossAgg::kSeqMean;
  r.grpo.loss.temperature = r.ppo.temperature = r.sampling.temperature;
}

// The world Comm, checked against --rollout-ranks: 1 + R ranks, or 1 for a one-process run.
dist::Comm& check_world(const RlCliOptions& o) {
  dist::Comm& world = dist::world();
  const int n = world.size();
  if (o.rollout_ranks > 0 && n == 1)
    throw_error<RequestError>(
        "--rollout-ranks {}: this is a world of 1 process; run under mpirun -np {} (rank 0 "
        "trains, ranks 1..{} roll out)",
        o.rollout_ranks, o.rollout_ranks + 1, o.rollout_ranks);
  if (n > 1 && n != o.rollout_ranks + 1)
    throw_error<RequestError>(
        "--rollout-ranks {}: the world has {} ranks, expected {} (1 trainer + the rollout "
        "ranks; give --rollout-ranks {})",
        o.rollout_ranks, n, o.rollout_ranks + 1, n - 1);
  if (o.rollout_ranks > 0 && o.run.algo == "dpo")
    throw_error<RequestError>("--rollout-ranks: dpo trains on fixed pairs and has no rollouts");
  return world;
}

// Rank 0 trains with RemoteRollouts; ranks 1..R serve rollouts from an EngineReplica each.
int run_distributed(RlCliOptions& o, dist::Comm& world) {
  ModelSession ms = load_session(o.model);
  ThreadPool pool(o.threads);
  o.session.eos_ids = ms.eos_ids;
  if (world.rank() > 0) {
    rl::EngineReplica replica(ms.model.config, ms.model.weights, pool, o.session);
    ms.model.weights = {};  // the replica holds its own f32 copy
    rl::serve_rollouts(world, replica);
    return 0;
  }
  o.session.local_engine = false;
  rl::RlSession s(ms.model.config, ms.model.weights, ms.model.weights, pool, o.session);
  rl::RemoteRollouts engines(world, ms.model.config, s.policy().master());
  const int rc = rl::run_rl(o.run, s, engines, ms.model, ms.tokenizer);
  engines.stop();
  return rc;
}

int run(RlCliOptions& o) {
  if (o.run.algo != "grpo" && o.run.algo != "ppo" && o.run.algo != "dpo")
    throw_error<RequestError>("--algo {}: expected grpo, ppo or dpo", o.run.algo);
  if (o.agg != "token" && o.agg != "seq")
    throw_error<RequestError>("--loss-agg {}: expected token or seq", o.agg);
  if (!o.write_sft.empty()) {
    rl::write_sft_examples(*rl::make_task(o.run.task), o.run.seed, o.sft_examples, o.write_sft);
    std::printf("%lld examples of %s -> %s\n", static_cast<long long>(o.sft_examples),
                o.run.task.c_str(), o.write_sft.c_str());
    return 0;
  }
  if (o.run.out_dir.empty()) throw_error<RequestError>("rl: --out DIR is required");
  if (!(o.run.sampling.temperature > 0))  // the policy is softmax(logits / T): T = 0 has none
    throw_error<RequestError>("--temperature {}: RL samples from the policy, so T must be > 0",
                              o.run.sampling.temperature);
  apply_shared(o);
  dist::Comm& world = check_world(o);
  if (o.rollout_ranks > 0) {
    try {  // a failing rank ends the job: the others would wait in their next transfer
      return run_distributed(o, world);
    } catch (const std::exception& e) {
      dist::abort_all(e.what());
    }
  }
  const ModelSession ms = load_session(o.model);
  ThreadPool pool(o.threads);
  o.session.eos_ids = ms.eos_ids;
  rl::RlSession s(ms.model.config, ms.model.weights, ms.model.weights, pool, o.session);
  rl::LocalRollouts engines(s);
  return rl::run_rl(o.run, s, engines, ms.model, ms.tokenizer);
}

void add_algo_options(CLI::App& app, RlCliOptions& o) {
  rl::RunOptions& r = o.run;
  app.add_option("--clip-eps", o.clip_eps, "ratio clip ε (GRPO and PPO; 0.2)");
  app.add_option("--kl-coef", o.kl_coef,
                 "β: GRPO's k3 KL term (0.04) / PPO's per-token KL penalty (0.05)");
  app.add_option("--loss-agg", o.agg, "token (token-mean) | seq (sequence-mean, GRPO paper)");
  app.add_option("--epochs", o.epochs, "passes over each rollout batch (GRPO 1, PPO 4)");
  app.add_option("--minibatches", o.minibatches, "optimizer steps per epoch (GRPO 1, PPO 2)");
  app.add_option("--gamma", r.ppo.gamma, "PPO: GAE discount γ");
  app.add_option("--lambda", r.ppo.lambda, "PPO: GAE λ");
  app.add_option("--value-clip", r.ppo.value_clip, "PPO: value clip range");
  app.add_option("--value-lr", r.ppo.value_lr, "PPO: value head learning rate");
  app.add_option("--beta", r.dpo.beta, "DPO: β");
  app.add_option("--pairs-per-step", r.dpo_pairs_per_step, "DPO: preference pairs per step");
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<RlCliOptions>();
  rl::RunOptions& r = o->run;
  r.sampling.max_tokens = 16;
  app.option_defaults()->always_capture_default();  // --help shows every default
  add_model_option(app, o->model);
  app.add_option("--algo", r.algo, "grpo | ppo | dpo");
  app.add_option("--task", r.task, "add[:D] | mul[:D] | reverse[:N] | sort[:N]");
  app.add_option("--prompts", r.prompts_file,
                 "JSONL: {prompt, answer} (grpo/ppo) or {prompt, chosen, rejected} (dpo)");
  app.add_option("--reward-cmd", r.reward_cmd, "score with a program: JSON on stdin, a number out");
  app.add_option("--format-reward", r.format_reward, "reward for a well-formed answer");
  app.add_option("--out", r.out_dir, "output directory (log.jsonl, model/)");
  app.add_option("--steps", r.steps, "RL steps (0: only measure the held-out accuracy)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--prompts-per-step", r.prompts_per_step)->check(CLI::PositiveNumber);
  app.add_option("--group-size,-n", r.group_size, "samples per prompt (GRPO's G)")
      ->check(CLI::Range(1, 16));
  app.add_option("--temperature", r.sampling.temperature, "rollout temperature");
  app.add_option("--top-p", r.sampling.top_p, "rollout top-p");
  app.add_option("--max-tokens", r.sampling.max_tokens, "response tokens at most");
  app.add_option("--lr", o->session.lr, "learning rate (AdamW, constant)");
  app.add_option("--grad-clip", o->session.grad_clip, "max global gradient norm (0: off)");
  app.add_option("--kv-tokens", o->session.kv_tokens, "the engine's KV pool in tokens");
  app.add_option("--seed", r.seed, "seed of the task examples and the sampling");
  app.add_option("--eval-every", r.eval_every, "held-out accuracy every N steps (and at the end)");
  app.add_option("--eval-examples", r.eval_examples, "held-out examples per evaluation");
  app.add_option("--write-sft", o->write_sft, "write SFT examples of --task to FILE and exit");
  app.add_option("--sft-examples", o->sft_examples, "examples --write-sft writes");
  add_algo_options(app, *o);
  app.add_option("--rollout-ranks", o->rollout_ranks,
                 "ranks 1..R roll out, rank 0 trains (mpirun -np 1+R; 0: one process)")
      ->check(CLI::NonNegativeNumber);
  add_threads_option(app, o->threads);
  return [o] {
    o->run.sampling.seed = o->run.seed;
    return run(*o);
  };
}

const RegisterCommand kRegister{
    {"rl", "RL post-training (GRPO, PPO, DPO) with the serving engine doing the rollouts",
     "  lmstack rl --algo grpo -m DIR --task add:2 --out runs/grpo --steps 50\n"
     "  lmstack rl --algo ppo -m DIR --task reverse:4 --out runs/ppo --epochs 4 --minibatches 2\n"
     "  lmstack rl --algo dpo -m DIR --prompts pairs.jsonl --out runs/dpo --beta 0.1\n"
     "  lmstack rl --task add:2 --write-sft sft.txt --sft-examples 20000\n"
     "  lmstack plot runs/grpo/log.jsonl --metric reward --out reward.png",
     setup}};

}  // namespace
}  // namespace lmstack::cli
