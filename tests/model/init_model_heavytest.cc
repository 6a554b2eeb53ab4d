// init-model at real size: the gpt2 (124M) and smollm-135m presets written in bf16 through
// the CLI and loaded back (a few hundred MB each, so this lives in the heavy suite).
#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/model/model_dir.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

TEST(InitModelHeavy, RealPresetsLoadWithPublishedParameterCounts) {
  const std::vector<std::pair<std::string, int64_t>> presets = {{"gpt2", 124439808},
                                                                {"smollm-135m", 134515008}};
  for (const auto& [preset, params] : presets) {
    SCOPED_TRACE(preset);
    const std::string dir = test::temp_dir("heavy_" + preset);
    std::string out;
    ASSERT_EQ(
        test::run_command(
            test::lmstack_binary() + " init-model --preset " + preset + " --out " + dir, &out),
        0)
        << out;
    const ModelDir m = load_model_dir(dir);
    EXPECT_EQ(m.config.num_parameters(), params);
    EXPECT_EQ(m.config.dtype, DType::kBF16);
    // Matrices stay bf16 (2 bytes); norm weights and biases are held as f32 (4 bytes). GPT-2:
    // per layer 4C of LayerNorm and 9C of biases, plus ln_f; SmolLM: two RMSNorms per layer.
    const int64_t small = m.config.arch == Arch::kGpt2 ? (13 * 12 + 2) * 768 : (2 * 30 + 1) * 576;
    EXPECT_EQ(m.weights.bytes(), params * 2 + small * 2);
    EXPECT_EQ(m.weights.layers.back().wq.dtype(), DType::kBF16);
    EXPECT_EQ(m.weights.lm_head.raw_data(), m.weights.embed.raw_data());
  }
}

}  // namespace
}  // namespace lmstack::model
