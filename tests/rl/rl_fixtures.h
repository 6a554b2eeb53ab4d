// Shared set-up of the RL tests: the tiny llama of the training parity tests (64-token
// vocabulary, tests/data/train/llama/model) as policy, the seeded perturbed reference of
// tools/ref/gen_rl_golden.py, and a session over them with the golden's optimizer settings.
#pragma once

#include <memory>
#include <string>

#include "lmstack/model/model_dir.h"
#include "lmstack/rl/session.h"
#include "test_util.h"

namespace lmstack::rl::test_fixtures {

inline const model::ModelDir& policy_dir() {
  static const model::ModelDir d =
      model::load_model_dir(test::source_path("tests/data/train/llama/model"));
  return d;
}

inline const model::ModelDir& ref_dir() {
  static const model::ModelDir d = model::load_model_dir(test::source_path("tests/data/rl/ref"));
  return d;
}

// lr, betas, eps and clipping as GRPO in gen_rl_golden.py; EOS id 0 (the config's).
inline SessionOptions golden_options() {
  SessionOptions o;
  o.kv_tokens = 4096;
  o.max_batch_tokens = 256;
  o.lr = 3e-3f;
  o.grad_clip = 1.0f;
  o.adam = {0.9f, 0.999f, 1e-8f, 0.0f};
  o.eos_ids = {0};
  return o;
}

inline std::unique_ptr<RlSession> make_session(ThreadPool& pool, bool perturbed_ref = true) {
  return std::make_unique<RlSession>(policy_dir().config, policy_dir().weights,
                                     perturbed_ref ? ref_dir().weights : policy_dir().weights, pool,
                                     golden_options());
}

}  // namespace lmstack::rl::test_fixtures
