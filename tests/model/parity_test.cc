// Model parity with the PyTorch float64 reference (tools/ref/gen_model_logits.py, goldens in
// tests/data/model/parity/, regenerate: tools/ref/gen_model_parity.sh): logits of every
// position within 1e-4 of the logits' scale, 32 greedy tokens identical; and the one-forward-
// path properties: a batch of sequences equals each alone, and prefill of N tokens equals N
// single-token decode steps.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "lmstack/core/npy.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/generate.h"
#include "lmstack/model/init_model.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/presets.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

// The token list gen_model_logits.py uses by default.
const std::vector<int32_t> kTokens = {1, 5, 9, 200, 17, 3, 44, 101, 7, 250, 99, 12, 8, 64, 33, 2};

std::string make_model(const std::string& preset, const std::string& dtype) {
  const std::string dir = test::temp_dir("parity_" + preset + "_" + dtype);
  const ModelPreset p = find_model_preset(preset, "");
  Json cfg = p.config;
  cfg["torch_dtype"] = dtype == "bf16" ? "bfloat16" : "float32";
  InitModelOptions o;
  o.config = ModelConfig::from_json(cfg, preset);
  o.out_dir = dir;
  o.seed = 1;
  init_model(o);
  return dir;
}

std::vector<float> all_logits(Decoder& dec, KvCache& cache, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> blocks(static_cast<size_t>(cache.num_blocks()));
  std::iota(blocks.begin(), blocks.end(), 0);
  ForwardBatch b;
  b.add_sequence(tokens, 0, blocks, cache.block_size(), true, true);
  std::vector<float> logits;
  dec.forward(b, cache, logits);
  return logits;
}

using test::max_abs;

class Parity : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Parity, LogitsAndGreedyMatchPyTorch) {
  const auto& [preset, dtype] = GetParam();
  const std::string name = preset + "-" + dtype;
  const std::string golden = test::source_path("tests/data/model/parity/" + name);
  const NpyArray want = read_npy(golden + ".logits.npy");
  const NpyArray want_greedy = read_npy(golden + ".greedy.npy");
  const ModelDir m = load_model_dir(make_model(preset, dtype));
  ThreadPool pool(2);
  Decoder dec(m.config, m.weights, pool);
  KvCache cache(m.config, 8, 16);
  const std::vector<float> got = all_logits(dec, cache, kTokens);
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.shape[0] * want.shape[1]);
  const double scale = max_abs(want.f32);
  EXPECT_TRUE(test::all_close(got, want.f32, 0, 1e-4 * scale))
      << name << " (regenerate: tools/ref/gen_model_parity.sh)";

  Generator gen(m.config, m.weights, pool, static_cast<int>(kTokens.size()) + 32);
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 32;
  const GenerateResult r = gen.generate(kTokens, greedy, {}, {});
  EXPECT_EQ(r.tokens, want_greedy.i32) << name << ": greedy continuation";
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, Parity,
                         ::testing::Combine(::testing::Values("tiny-llama", "tiny-mistral",
                                                              "tiny-qwen2", "tiny-qwen3",
                                                              "tiny-gpt2"),
                                            ::testing::Values("f32", "bf16")),
                         [](const auto& param_info) {
                           std::string n =
                               std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

class OneForwardPath : public ::testing::TestWithParam<std::string> {};

// Sequences of different lengths in one batch give the same logits as each run alone, and
// prefill of N tokens equals N single-token decode steps.
TEST_P(OneForwardPath, BatchedEqualsAloneAndPrefillEqualsDecodeSteps) {
  const ModelDir m = load_model_dir(make_model(GetParam(), "f32"));
  ThreadPool pool(2);
  Decoder dec(m.config, m.weights, pool);
  const int bs = 4;  // small blocks: sequences span several, partially filled
  const std::vector<std::vector<int32_t>> seqs = {
      {3, 8, 1, 77}, {9, 200, 5, 6, 7, 8, 30, 31, 32, 33, 34}, {42}, {10, 11, 12, 13, 14, 15, 16}};
  KvCache shared(m.config, 32, bs);
  ForwardBatch batch;
  int next_block = 31;  // hand out blocks from the top, interleaved, to exercise block tables
  std::vector<std::vector<int32_t>> owned(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (size_t i = 0; i * bs < seqs[s].size(); ++i) owned[s].push_back(next_block--);
    batch.add_sequence(seqs[s], 0, owned[s], bs, true, true);
  }
  std::vector<float> batched;
  dec.forward(batch, shared, batched);
  const size_t v = static_cast<size_t>(m.config.vocab_size);
  size_t row = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    KvCache alone_cache(m.config, 4, bs);
    const std::vector<float> alone = all_logits(dec, alone_cache, seqs[s]);
    const std::vector<float> part(
        batched.begin() + static_cast<std::ptrdiff_t>(row * v),
        batched.begin() + static_cast<std::ptrdiff_t>((row + seqs[s].size()) * v));
    EXPECT_TRUE(test::all_close(part, alone, 1e-5, 1e-5)) << "sequence " << s;
    row += seqs[s].size();
  }
  // Prefill vs decode steps on the longest sequence.
  const std::vector<int32_t>& seq = seqs[1];
  KvCache step_cache(m.config, 4, bs);
  std::vector<int32_t> blocks = {2, 0, 3, 1};
  std::vector<float> stepped;
  for (size_t i = 0; i < seq.size(); ++i) {
    ForwardBatch b;
    b.add_sequence({seq[i]}, static_cast<int>(i), blocks, bs, true);
    std::vector<float> l;
    dec.forward(b, step_cache, l);
    stepped.insert(stepped.end(), l.begin(), l.end());
  }
  KvCache prefill_cache(m.config, 4, bs);
  EXPECT_TRUE(test::all_close(stepped, all_logits(dec, prefill_cache, seq), 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Architectures, OneForwardPath,
                         ::testing::Values("tiny-llama", "tiny-qwen3", "tiny-gpt2"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace lmstack::model
