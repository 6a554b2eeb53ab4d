// Shared set-up of the trainer tests (trainer_test.cc, data_parallel_test.cc): a tiny data
// directory with a learnable token pattern and a tiny training configuration.
#pragma once

#include <string>
#include <vector>

#include "lmstack/core/file.h"
#include "lmstack/train/data.h"
#include "lmstack/train/train_log.h"
#include "lmstack/train/trainer.h"
#include "test_util.h"

namespace lmstack::train::test_fixtures {

// A data dir of a repeating, learnable token pattern over the parity models' 64-token vocab.
inline std::string make_data(const std::string& name) {
  const std::string dir = test::temp_dir(name);
  std::vector<int32_t> tokens(3000);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 7 + i / 13) % 64);
  write_shard(path_join(dir, "train-00000.bin"), tokens, 64);
  write_shard(path_join(dir, "val-00000.bin"), {tokens.begin(), tokens.begin() + 200}, 64);
  DataManifest m;
  m.vocab_size = 64;
  m.train_shards = {"train-00000.bin"};
  m.val_shards = {"val-00000.bin"};
  m.train_tokens = 3000;
  m.val_tokens = 200;
  write_data_manifest(dir, m);
  return dir;
}

// `arch`: "llama" or "gpt2" (tests/data/train/<arch>/model).
inline TrainConfig tiny_config(const std::string& data, const std::string& out,
                               const std::string& arch = "llama") {
  TrainConfig c;
  c.model_dir = test::source_path("tests/data/train/" + arch + "/model");
  c.data_dir = data;
  c.out_dir = out;
  c.steps = 6;
  c.batch = 2;
  c.seq = 16;
  c.grad_accum = 2;
  c.lr.lr = 3e-3f;
  c.lr.warmup = 2;
  c.save_every = 2;
  c.eval_every = 3;
  c.eval_batches = 2;
  c.seed = 5;
  c.log_path = path_join(out, "log.jsonl");
  c.progress = false;
  return c;
}

inline std::vector<double> losses_of(const std::string& log) {
  std::vector<double> out;
  for (const Json& j : read_train_log(log)) out.push_back(j["measured"]["loss"].get<double>());
  return out;
}

// An 8-layer tiny llama config for the pipeline layouts (random init; the vocabulary holds
// init-model's 259-token byte-level tokenizer and divides by 2 and 4, and pp 4 x 2 chunks has
// a layer per chunk). Written once per process; returns its path.
inline const std::string& deep_llama_config() {
  static const std::string path = [] {
    const std::string p = path_join(test::temp_dir("mp_config"), "config.json");
    write_file_atomic(p, R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "vocab_size": 320, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 8,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
      "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu",
      "tie_word_embeddings": false, "torch_dtype": "float32"})");
    return p;
  }();
  return path;
}

}  // namespace lmstack::train::test_fixtures
