// Shared by the GGUF model tests: seeded reference models made by init_model from a config
// JSON, and full-sequence logits (logits_util.h).
#pragma once

#include <string>
#include <vector>

#include "lmstack/core/file.h"
#include "lmstack/model/init_model.h"
#include "lmstack/model/model_dir.h"
#include "logits_util.h"
#include "test_util.h"

namespace lmstack::model::gguf_test {

// The seed tools/ref/gen_gguf_golden.py passes to init-model.
inline constexpr uint64_t kGoldenSeed = 7;

inline std::string golden(const std::string& name) {
  return test::source_path("tests/data/model/gguf/" + name);
}

// A model directory from `config` (HF config.json fields) with weights stored as `dtype`.
inline ModelDir make_reference(Json config, DType dtype, const std::string& dir_name,
                               const std::string& tokenizer_json = "") {
  config["torch_dtype"] = dtype == DType::kF32   ? "float32"
                          : dtype == DType::kF16 ? "float16"
                                                 : "bfloat16";
  InitModelOptions o;
  o.config = ModelConfig::from_json(config, dir_name);
  o.out_dir = test::temp_dir(dir_name);
  o.seed = kGoldenSeed;
  o.tokenizer_path = tokenizer_json;
  o.num_threads = 2;
  init_model(o);
  return load_model_dir(o.out_dir);
}

using test_logits::logits_of;

inline const std::vector<int32_t>& sample_tokens() {
  static const std::vector<int32_t> t = {1,  5,  9, 200, 17, 3, 44,  101, 7, 250,
                                         99, 12, 8, 64,  33, 2, 400, 511, 0, 300};
  return t;
}

using test::max_abs;

}  // namespace lmstack::model::gguf_test
