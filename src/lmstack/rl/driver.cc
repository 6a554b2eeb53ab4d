// The `lmstack rl` loop (driver.h).
#include "lmstack/rl/driver.h"

#include <algorithm>
#include <cstdio>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/train/train_log.h"

namespace lmstack::rl {
namespace {

std::vector<int32_t> encode(const tokenizer::Tokenizer& tok, const std::string& text, bool bos) {
  std::vector<int32_t> ids;
  if (bos && tok.add_bos_token())
    if (auto b = tok.bos_id()) ids.push_back(*b);
  const auto body = tok.encode(text, tokenizer::SpecialMode::kAllow);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

// The response's text without a final EOS token. Ids past the tokenizer's vocabulary (a
// model's padded embedding rows, as Qwen's 151936 beside 151665 tokens) have no text.
std::string response_text(const tokenizer::Tokenizer& tok, const Rollout& r) {
  std::vector<int32_t> ids;
  const size_t n = r.response.size() - (r.finish_reason == "stop" && !r.response.empty());
  for (size_t i = 0; i < n; ++i)
    if (r.response[i] < tok.vocab_size()) ids.push_back(r.response[i]);
  return tok.decode_text(ids);
}

// Where a step's prompts come from: the task's train stream, or the file's lines in turn.
class PromptSource {
 public:
  explicit PromptSource(const RunOptions& o) : o_(o) {
    if (!o.task.empty()) task_ = make_task(o.task);
    if (!o.prompts_file.empty()) {
      const auto lines = train::read_train_log(o.prompts_file);
      for (size_t i = 0; i < lines.size(); ++i) {
        const std::string where = fmt::format("{} line {}", o.prompts_file, i + 1);
        file_.push_back({require<std::string>(lines[i], "prompt", where),
                         optional<std::string>(lines[i], "answer", "", where)});
      }
      if (file_.empty()) throw_error<FormatError>("{}: no prompts", o.prompts_file);
    }
    if (!task_ && file_.empty()) throw_error<RequestError>("rl: give --task or --prompts");
  }
  Example next() {
    const int64_t i = next_++;
    if (!file_.empty()) return file_[static_cast<size_t>(i) % file_.size()];
    return task_->make(o_.seed, i, Split::kTrain);
  }
  const Task* task() const { return task_.get(); }

 private:
  const RunOptions& o_;
  std::unique_ptr<Task> task_;
  std::vector<Example> file_;
  int64_t next_ = 0;
};

std::unique_ptr<Reward> make_reward(const RunOptions& o, const Task* task) {
  if (!o.reward_cmd.empty()) return std::make_unique<CommandReward>(o.reward_cmd);
  auto sum = std::make_unique<SumReward>();
  sum->add(std::make_unique<ExactMatchReward>());
  if (task && o.format_reward != 0)
    sum->add(std::make_unique<FormatReward>(*task, o.format_reward));
  return sum;
}

struct StepLine {
  Json measured = Json::object();
  void set(const char* key, double v) { measured[key] = v; }
};

void print_progress(int step, int steps, const Json& m) {
  std::printf(
      "step %d/%d  reward %.3f  acc %.3f  kl %.4f  len %.1f  rollout %.2fs train %.2fs sync "
      "%.3fs  logp gap max %.2e mean %.2e\n",
      step, steps, m.value("reward", 0.0), m.value("accuracy", 0.0), m.value("kl", 0.0),
      m.value("response_len", 0.0), m.value("rollout_s", 0.0), m.value("train_s", 0.0),
      m.value("sync_s", 0.0), m.value("logprob_gap_max", 0.0), m.value("logprob_gap_mean", 0.0));
  std::fflush(stdout);
}

// One GRPO/PPO step: rollout, reward, mismatch check, update, sync.
Json policy_step(const RunOptions& o, RlSession& s, RolloutBackend& engines,
                 const tokenizer::Tokenizer& tok, PromptSource& src, Reward& reward,
                 ValueHead* value) {
  StepLine line;
  std::vector<Example> ex;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < o.prompts_per_step; ++i) {
    ex.push_back(src.next());
    prompts.push_back(encode(tok, ex.back().prompt, true));
  }
  double t0 = seconds_now();
  std::vector<Rollout> rollouts = engines.generate(prompts, o.group_size, o.sampling);
  const double rollout_s = seconds_now() - t0;
  double correct = 0, total_reward = 0, length = 0;
  ExactMatchReward exact;
  for (Rollout& r : rollouts) {
    const std::string text = response_text(tok, r);
    const Example& e = ex[static_cast<size_t>(r.group)];
    r.reward = reward.score(e, text);
    total_reward += r.reward;
    correct += e.answer.empty() ? 0 : exact.score(e, text);
    length += static_cast<double>(r.response.size());
  }
  const double n = static_cast<double>(rollouts.size());
  t0 = seconds_now();
  double kl = 0, entropy = 0, loss = 0, grad_norm = 0, clip = 0;
  std::vector<std::vector<float>> trainer_lp;
  if (value) {
    const PpoStats st = ppo_update(s, *value, rollouts, o.ppo);
    kl = st.kl, entropy = st.entropy, loss = st.losses.front(), grad_norm = st.grad_norms.back();
    clip = st.clip_fracs.back();
    line.set("value_loss", st.value_losses.back());
    line.set("value_mean", st.value_mean);
  } else {
    const UpdateStats st = grpo_update(s, rollouts, o.group_size, o.grpo);
    kl = st.kl, entropy = st.entropy, loss = st.losses.front(), grad_norm = st.grad_norms.back();
    clip = st.clip_fracs.back();
    trainer_lp = st.old_logprobs;
  }
  const double train_s = seconds_now() - t0;
  if (trainer_lp.empty()) {  // PPO: recompute is inside the update; take it here for the check
    const PackedBatch b = pack_rollouts(rollouts, 0, rollouts.size());
    std::vector<float> flat;
    model_logprobs(s.policy(), b, o.sampling.temperature, &flat, nullptr);
    trainer_lp = split_rows(b, flat);
  }
  const SyncStats sync = engines.sync(s.policy().master());
  const MismatchStats gap = mismatch_stats(rollouts, trainer_lp);
  line.set("reward", total_reward / n);
  line.set("accuracy", correct / n);
  line.set("kl", kl);
  line.set("entropy", entropy);
  line.set("response_len", length / n);
  line.set("loss", loss);
  line.set("grad_norm", grad_norm);
  line.set("clip_frac", clip);
  line.set("rollout_s", rollout_s);
  line.set("train_s", train_s);
  line.set("sync_s", sync.seconds);
  line.set("sync_bytes", static_cast<double>(sync.bytes));
  line.set("logprob_gap_max", gap.max_gap);
  line.set("logprob_gap_mean", gap.mean_gap);
  return line.measured;
}

}  // namespace

double heldout_accuracy(RolloutBackend& engines, const tokenizer::Tokenizer& tok, const Task& task,
                        uint64_t seed, int count, int max_tokens) {
  std::vector<Example> ex;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; ++i) {
    ex.push_back(task.make(seed, i, Split::kHeldOut));
    prompts.push_back(encode(tok, ex.back().prompt, true));
  }
  model::SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = max_tokens;
  const std::vector<Rollout> rollouts = engines.generate(prompts, 1, greedy);
  ExactMatchReward exact;
  double correct = 0;
  for (const Rollout& r : rollouts)
    correct += exact.score(ex[static_cast<size_t>(r.group)], response_text(tok, r));
  return count ? correct / count : 0;
}

void write_sft_examples(const Task& task, uint64_t seed, int64_t count, const std::string& path) {
  std::string text;
  for (int64_t i = 0; i < count; ++i) text += sft_text(task.make(seed, i, Split::kTrain)) + "%\n";
  write_file_atomic(path, text);
}

namespace {

Json dpo_line(const RunOptions& o, RlSession& s, RolloutBackend& engines,
              const tokenizer::Tokenizer& tok, const std::vector<PreferencePair>& pairs, int step) {
  std::vector<TokenPair> batch;
  const std::vector<int32_t> eos = s.options().eos_ids.empty()
                                       ? std::vector<int32_t>{}
                                       : std::vector<int32_t>{s.options().eos_ids[0]};
  for (int i = 0; i < o.dpo_pairs_per_step; ++i) {
    const PreferencePair& p =
        pairs[static_cast<size_t>(step * o.dpo_pairs_per_step + i) % pairs.size()];
    TokenPair t{encode(tok, p.prompt, true), encode(tok, p.chosen, false),
                encode(tok, p.rejected, false)};
    t.chosen.insert(t.chosen.end(), eos.begin(), eos.end());
    t.rejected.insert(t.rejected.end(), eos.begin(), eos.end());
    batch.push_back(std::move(t));
  }
  const double t0 = seconds_now();
  const DpoStats st = dpo_step(s, batch, o.dpo);
  const double train_s = seconds_now() - t0;
  Json m = {{"loss", st.loss},
            {"reward_accuracy", st.accuracy},
            {"margin", st.margin},
            {"chosen_reward", st.chosen_reward},
            {"rejected_reward", st.rejected_reward},
            {"grad_norm", st.grad_norm},
            {"train_s", train_s}};
  const SyncStats sync = engines.sync(s.policy().master());
  m["sync_s"] = sync.seconds;
  m["sync_bytes"] = sync.bytes;
  return m;
}

void save_policy(RlSession& s, const model::ModelDir& md, const std::string& dir) {
  model::ModelDirFiles files;
  if (!md.tokenizer_path.empty()) files.tokenizer_json = read_file(md.tokenizer_path);
  files.tokenizer_config = md.tokenizer_config;
  files.generation_config = md.generation_config;
  model::write_model_dir(dir, s.config(), model::to_hf_tensors(s.config(), s.policy().master()),
                         files);
}

}  // namespace

int run_rl(const RunOptions& o, RlSession& s, RolloutBackend& engines, const model::ModelDir& md,
           const tokenizer::Tokenizer& tok) {
  make_directories(o.out_dir);
  train::TrainLog log(path_join(o.out_dir, "log.jsonl"), -1);
  const bool dpo = o.algo == "dpo";
  std::unique_ptr<PromptSource> src;
  std::vector<PreferencePair> pairs;
  if (dpo) {
    if (o.prompts_file.empty())
      throw_error<RequestError>("rl --algo dpo: give --prompts PAIRS.jsonl");
    pairs = read_preference_pairs(o.prompts_file);
  } else {
    src = std::make_unique<PromptSource>(o);
  }
  const Task* task = src ? src->task() : nullptr;
  std::unique_ptr<Reward> reward = make_reward(o, task);
  std::unique_ptr<ValueHead> value;
  if (o.algo == "ppo")
    value = std::make_unique<ValueHead>(s.config().hidden_size, s.options().adam);
  auto eval = [&](int step) {
    if (!task || o.eval_examples <= 0) return;
    const double acc =
        heldout_accuracy(engines, tok, *task, o.seed, o.eval_examples, o.sampling.max_tokens);
    std::printf("step %d  held-out accuracy %.3f (%d examples, greedy)\n", step, acc,
                o.eval_examples);
    log.append({{"kind", "rl_eval"}, {"measured", {{"step", step}, {"eval_accuracy", acc}}}});
    log.flush();
  };
  eval(0);
  if (o.steps == 0) return 0;  // evaluation only
  for (int step = 1; step <= o.steps; ++step) {
    Json m = dpo ? dpo_line(o, s, engines, tok, pairs, step - 1)
                 : policy_step(o, s, engines, tok, *src, *reward, value.get());
    m["step"] = step;
    if (dpo)
      std::printf("step %d/%d  loss %.4f  reward acc %.3f  margin %.3f  train %.2fs\n", step,
                  o.steps, m["loss"].get<double>(), m["reward_accuracy"].get<double>(),
                  m["margin"].get<double>(), m["train_s"].get<double>());
    else
      print_progress(step, o.steps, m);
    log.append({{"kind", "rl"}, {"algo", o.algo}, {"measured", m}});
    log.flush();
    if (o.eval_every > 0 && step % o.eval_every == 0 && step != o.steps) eval(step);
  }
  eval(o.steps);
  save_policy(s, md, path_join(o.out_dir, "model"));
  std::printf("log -> %s, policy -> %s\n", path_join(o.out_dir, "log.jsonl").c_str(),
              path_join(o.out_dir, "model").c_str());
  return 0;
}

}  // namespace lmstack::rl
