// File I/O: atomic writes, clear errors, and injected faults.
#include "lmstack/core/file.h"

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "test_util.h"

namespace lmstack {
namespace {

TEST(File, WriteThenReadRoundTrips) {
  const std::string dir = test::temp_dir("file_rt");
  const std::string p = path_join(dir, "a/b/c.txt");
  make_directories(path_join(dir, "a/b"));
  write_file_atomic(p, std::string("hello\0world", 11));
  EXPECT_EQ(read_file(p), std::string("hello\0world", 11));
  EXPECT_FALSE(file_exists(p + ".tmp"));
  EXPECT_TRUE(is_directory(path_join(dir, "a")));
}

TEST(File, MissingFileErrorNamesPath) {
  try {
    read_file("/nonexistent/lmstack/file.json");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/lmstack/file.json"), std::string::npos);
  }
}

TEST(File, InjectedFaults) {
  const std::string dir = test::temp_dir("file_fault");
  const std::string p = path_join(dir, "x.json");
  write_file_atomic(p, R"({"a": 1})");
  set_file_fault_hook([&](std::string_view op, const std::string& path) -> int64_t {
    if (path != p) return -1;
    return op == "read" ? 4 : -2;
  });
  EXPECT_EQ(read_file(p), R"({"a")");
  EXPECT_THROW(read_json_file(p), FormatError) << "a truncated JSON file is refused";
  EXPECT_THROW(write_file_atomic(p, "new"), IoError);
  set_file_fault_hook(nullptr);
  EXPECT_EQ(read_file(p), R"({"a": 1})") << "a failed write left the old file intact";
}

TEST(Json, RequireNamesSourceAndField) {
  const Json j = parse_json(R"({"n": 3, "s": "x"})", "cfg.json");
  EXPECT_EQ(require<int>(j, "n", "cfg.json"), 3);
  EXPECT_EQ(optional<int>(j, "missing", 7, "cfg.json"), 7);
  try {
    require<int>(j, "hidden_size", "cfg.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "cfg.json: missing required field 'hidden_size'");
  }
  EXPECT_THROW(require<int>(j, "s", "cfg.json"), ConfigError);
  EXPECT_THROW(parse_json("{bad", "x.json"), FormatError);
}

}  // namespace
}  // namespace lmstack
