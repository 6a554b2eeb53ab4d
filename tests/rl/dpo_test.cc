// DPO against tools/ref/gen_rl_golden.py: the loss and every parameter's gradient of three
// preference pairs under the tiny llama (reference: the perturbed copy), β = 0.1; the JSONL
// reader's errors. About 0.5 s.
#include "lmstack/rl/dpo.h"

#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/model/safetensors.h"
#include "rl_fixtures.h"

namespace lmstack::rl {
namespace {

TEST(DpoGolden, LossAndGradientsMatchPyTorch) {
  const Json j = read_json_file(test::source_path("tests/data/rl/dpo.json"));
  std::vector<TokenPair> pairs;
  for (const Json& p : j["pairs"])
    pairs.push_back({p["prompt"].get<std::vector<int32_t>>(),
                     p["chosen"].get<std::vector<int32_t>>(),
                     p["rejected"].get<std::vector<int32_t>>()});
  ThreadPool pool(2);
  auto s = test_fixtures::make_session(pool);
  const DpoConfig c{j["hparams"]["beta"].get<float>()};
  const DpoStats st = dpo_loss_backward(*s, pairs, ref_sequence_logprobs(*s, pairs), c);
  EXPECT_NEAR(st.loss, j["loss"].get<double>(), 1e-5) << "regenerate: tools/ref/gen_rl_golden.py";
  double margin = 0;
  for (const Json& m : j["margins"]) margin += m.get<double>() / c.beta / 3.0;
  EXPECT_NEAR(st.margin, margin, 1e-4);
  const model::SafetensorsFile want(test::source_path("tests/data/rl/dpo_grads.safetensors"));
  for (auto& [name, t] : model::to_hf_tensors(s->config(), s->policy().grads())) {
    const std::vector<float> w = want.tensor(name).to_f32_vector();
    EXPECT_TRUE(test::all_close(t.to_f32_vector(), w, 1e-4, 1e-6 + 1e-4 * test::max_abs(w)))
        << name;
  }
}

TEST(Dpo, PairsFileErrorsNameLineAndField) {
  const std::string dir = test::temp_dir("dpo_pairs");
  const std::string good = path_join(dir, "good.jsonl"), bad = path_join(dir, "bad.jsonl");
  write_file_atomic(good, R"({"prompt": "Q", "chosen": "a", "rejected": "b"})"
                          "\n");
  EXPECT_EQ(read_preference_pairs(good).size(), 1u);
  write_file_atomic(bad, R"({"prompt": "Q", "chosen": "a", "rejected": "b"})"
                         "\n"
                         R"({"prompt": "Q", "chosen": "a"})"
                         "\n");
  try {
    read_preference_pairs(bad);
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rejected"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lmstack::rl
