// The JSON nesting limit (core/json_depth.h) that every JSON read goes through: a body nested
// 100,000 deep crashed serve and a trainer_state.json as deep crashed --resume (issue 13).
// The limit counts [ and { outside strings only, and names the source and the depth.
#include "lmstack/core/json.h"

#include <gtest/gtest.h>

#include <string>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json_depth.h"
#include "test_util.h"

namespace lmstack {
namespace {

std::string nested(int depth, const std::string& open = "[", const std::string& close = "]") {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += "1";
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

void expect_too_deep(const std::string& text, const std::string& source) {
  try {
    parse_json(text, source);
    ADD_FAILURE() << "accepted";
  } catch (const FormatError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(source + ": JSON nests deeper than 256 levels"), std::string::npos) << what;
  }
}

TEST(JsonDepth, TheLimitIsExact) {
  EXPECT_EQ(parse_json(nested(kMaxJsonDepth), "a").size(), 1u);
  expect_too_deep(nested(kMaxJsonDepth + 1), "b");
}

TEST(JsonDepth, RefusesTheDepthsThatCrashed) {
  expect_too_deep(nested(100000), "request body");
  // An extra field of a message, as the serve crash had it; objects count like arrays.
  expect_too_deep(R"({"messages": [{"role": "user", "x": )" + nested(100000) + "}]}", "req");
  expect_too_deep(nested(50000, R"({"a":)", "}"), "obj");
}

TEST(JsonDepth, BracketsInStringsDoNotCount) {
  const std::string brackets(5000, '[');
  const Json j = parse_json(R"({"s": ")" + brackets + R"(\"[{", "t": "\\"})", "s");
  EXPECT_EQ(j["s"].get<std::string>(), brackets + "\"[{");
  EXPECT_EQ(j["t"].get<std::string>(), "\\");
}

// Found by fuzz/checkpoint_state_fuzz.cc: a number past double's range threw nlohmann's
// out_of_range (an "internal error"), not a FormatError naming the file.
TEST(JsonDepth, NumberOverflowIsAFormatError) {
  try {
    parse_json(R"({"step": 4444444444444444E44444444444})", "trainer_state.json");
    ADD_FAILURE() << "accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("trainer_state.json: invalid JSON"), std::string::npos)
        << e.what();
  }
}

TEST(JsonDepth, FileReadsNameThePath) {
  const std::string path = test::temp_dir("json_depth") + "/trainer_state.json";
  write_file_atomic(path, R"({"step": 1, "settings": )" + nested(100000) + "}");
  try {
    read_json_file(path);
    ADD_FAILURE() << "accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": JSON nests deeper than"), std::string::npos)
        << e.what();
  }
}

// The config fuzzer's finding: nlohmann casts an out-of-range number to an integer (1.3e31 as
// int is undefined behaviour, 2^40 wraps). require<T> refuses it naming the field.
TEST(JsonRequire, IntegersOutsideTheTypeAreConfigErrors) {
  const Json j =
      parse_json(R"({"big": 1.3e31, "wrap": 1099511627776, "neg": -1, "ok": 2147483647, "f": 7.0})",
                 "config.json");
  for (const char* key : {"big", "wrap"}) {
    try {
      require<int>(j, key, "config.json");
      ADD_FAILURE() << key << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("config.json: field '") + key + "'"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(require<uint32_t>(j, "neg", "config.json"), ConfigError);
  EXPECT_EQ(require<int>(j, "ok", "config.json"), 2147483647);
  EXPECT_EQ(require<int64_t>(j, "wrap", "config.json"), int64_t(1) << 40);
  EXPECT_EQ(require<int>(j, "neg", "config.json"), -1);
  EXPECT_EQ(require<int>(j, "f", "config.json"), 7);
  EXPECT_EQ(require<double>(j, "big", "config.json"), 1.3e31);
}

}  // namespace
}  // namespace lmstack
