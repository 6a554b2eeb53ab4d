// Parameter counts of the presets against the counts Hugging Face reports for the checkpoints
// (the "Model size" / safetensors total on each model page, or the paper where stated), and
// parts against hand arithmetic. Also config.json parsing and its errors.
#include "lmstack/calc/params.h"

#include <gtest/gtest.h>

#include "lmstack/calc/model_shape.h"

namespace lmstack::calc {
namespace {

struct CountCase {
  const char* preset;
  int64_t total;
  const char* source;
};

TEST(Params, PresetTotalsMatchHuggingFace) {
  const CountCase cases[] = {
      {"gpt2", 124439808, "HF openai-community/gpt2 (issue 5: 124,439,808)"},
      {"gpt2-350m", 354823168, "HF openai-community/gpt2-medium"},
      {"gpt2-774m", 774030080, "HF openai-community/gpt2-large"},
      {"gpt2-1.5b", 1557611200, "HF openai-community/gpt2-xl"},
      {"llama-3-8b", 8030261248, "HF meta-llama/Meta-Llama-3-8B (issue 5: 8,030,261,248)"},
      {"llama-2-7b", 6738415616, "HF meta-llama/Llama-2-7b-hf"},
      {"llama-3-70b", 70553706496, "HF meta-llama/Meta-Llama-3-70B"},
      {"mistral-7b", 7241732096, "HF mistralai/Mistral-7B-v0.1"},
      {"mixtral-8x7b", 46702792704, "HF mistralai/Mixtral-8x7B-v0.1"},
      {"qwen2.5-7b", 7615616512, "HF Qwen/Qwen2.5-7B"},
      {"smollm-135m", 134515008, "HF HuggingFaceTB/SmolLM-135M"},
      {"tinyllama-1.1b", 1100048384, "HF TinyLlama/TinyLlama-1.1B"},
  };
  for (const CountCase& c : cases)
    EXPECT_EQ(count_parameters(model_preset(c.preset)).total(), c.total)
        << c.preset << " (source: " << c.source << ")";
}
