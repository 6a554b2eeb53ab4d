// Pre-tokenizer split semantics, derived by hand from `tokenizers`' NormalizedString::split
// (tokenizers/src/tokenizer/normalizer.rs): each behavior folds the (match | gap) list once, so
// MergedWithNext/MergedWithPrevious glue a single delimiter, empty regex matches are split
// points, and Metaspace(split=true) splits before every "▁". The goldens in
// hf_pipelines_test.cc check the same against `tokenizers` on whole files.
#include "lmstack/tokenizer/pipeline.h"

#include <gtest/gtest.h>

namespace lmstack::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

Pieces run(std::vector<PreTokenizerStep> steps, const std::string& text, bool first = true) {
  Pieces out;
  TextPipeline(std::vector<NormalizerStep>{}, std::move(steps)).split(text, first, out);
  return out;
}

PreTokenizerStep literal(const std::string& s, SplitBehavior b, bool invert = false) {
  PreTokenizerStep step;
  step.literal = s;
  step.behavior = b;
  step.invert = invert;
  return step;
}

TEST(Pipeline, MergedBehaviorsGlueOneDelimiter) {
  EXPECT_EQ(run({literal("!", SplitBehavior::kMergedWithPrevious)}, "a!!b"),
            (Pieces{"a!", "!", "b"}));
  EXPECT_EQ(run({literal("-", SplitBehavior::kMergedWithNext)}, "a--b-"),
            (Pieces{"a", "-", "-b", "-"}));
  EXPECT_EQ(run({literal("!", SplitBehavior::kContiguous)}, "a!!b!"),
            (Pieces{"a", "!!", "b", "!"}));
  EXPECT_EQ(run({literal("!", SplitBehavior::kRemoved)}, "!a!!b"), (Pieces{"a", "b"}));
  EXPECT_EQ(run({literal("!", SplitBehavior::kIsolated)}, "a!!b"), (Pieces{"a", "!", "!", "b"}));
  // Inverted: the gaps are the delimiters; MergedWithPrevious glues "!" to the "a" before it.
  EXPECT_EQ(run({literal("a", SplitBehavior::kMergedWithPrevious, true)}, "a!a!!"),
            (Pieces{"a!", "a!!"}));
}

TEST(Pipeline, ZeroWidthMatchesAreSplitPoints) {
  EXPECT_EQ(run({make_regex_step("(?=[A-Z])", SplitBehavior::kIsolated)}, "HelloWorldX"),
            (Pieces{"Hello", "World", "X"}));
  EXPECT_EQ(run({make_regex_step(R"(\b)", SplitBehavior::kIsolated)}, "ab, cd"),
            (Pieces{"ab", ", ", "cd"}));
}

TEST(Pipeline, FastPathSplitsAtZeroWidthMatchesToo) {
  const TextPipeline p({}, {make_split_step("(?=[A-Z])")});
  ASSERT_TRUE(p.has_fast_path());
  std::vector<uint32_t> ends;
  p.split_fast("HelloWorld", ends);
  EXPECT_EQ(ends, (std::vector<uint32_t>{5, 10}));
}

TEST(Pipeline, MetaspaceSplitsBeforeEveryReplacement) {
  PreTokenizerStep m;
  m.kind = PreTokenizerStep::Kind::kMetaspace;
  m.prepend = PreTokenizerStep::Prepend::kAlways;
  const std::string u = "\xE2\x96\x81";
  EXPECT_EQ(run({m}, "a  b"), (Pieces{u + "a", u, u + "b"}));
  EXPECT_EQ(run({m}, "  x"), (Pieces{u, u + "x"}));  // " " already starts it: no prepend
  m.prepend = PreTokenizerStep::Prepend::kFirst;
  EXPECT_EQ(run({m}, "x y", /*first=*/false), (Pieces{"x", u + "y"}));
  m.split = false;
  EXPECT_EQ(run({m}, "x  y"), (Pieces{u + "x" + u + u + "y"}));
}

}  // namespace
}  // namespace lmstack::tokenizer
