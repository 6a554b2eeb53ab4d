// What the serve tests share: the init-model tiny-llama (seed 1) they run on, and a fixture
// holding that model, its tokenizer, an Engine and the OpenAiApi over them (no sockets).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "lmstack/core/thread_pool.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/serve/engine.h"
#include "lmstack/serve/openai_api.h"
#include "lmstack/tokenizer/tokenizer.h"
#include "test_util.h"

namespace lmstack::serve::test {

// Writes the tiny-llama into `dir` with the lmstack binary; "" on success, else why not.
inline std::string write_tiny_llama(const std::string& dir) {
  std::string out;
  if (lmstack::test::run_command(
          lmstack::test::lmstack_binary() + " init-model --preset tiny-llama --seed 1 --out " + dir,
          &out) != 0)
    return "init-model failed: " + out;
  return "";
}

// One tiny-llama directory per test suite; each test gets a fresh engine and API on it.
class ApiFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(lmstack::test::temp_dir("serve_api") + "/model");
    const std::string error = write_tiny_llama(*dir_);
    ASSERT_TRUE(error.empty()) << error;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // A 64-block engine (prefix cache as given) and the API named "tiny" over it.
  void make_api(bool prefix_cache) {
    model_ = std::make_unique<model::ModelDir>(model::load_model_dir(*dir_));
    tok_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::load(*dir_));
    EngineOptions o;
    o.num_blocks = 64;
    o.prefix_cache = prefix_cache;
    o.make_detokenizer = OpenAiApi::detokenizer_factory(*tok_);
    engine_ = std::make_unique<Engine>(model_->config, model_->weights, pool_, o);
    api_ = std::make_unique<OpenAiApi>(*engine_, *tok_, "tiny");
  }

  static inline std::string* dir_ = nullptr;
  ThreadPool pool_{1};
  std::unique_ptr<model::ModelDir> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<OpenAiApi> api_;
};

}  // namespace lmstack::serve::test
