// Tests of the lmstack.run.v1 reader/writer (docs/formats/run_metrics.md): round trip, defaults,
// and errors that name the field at fault.
#include "lmstack/calc/run_metrics.h"

#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "test_util.h"

namespace lmstack::calc {
namespace {

Json example() {
  return parse_json(R"({"schema":"lmstack.run.v1","kind":"bench_decode","model":"llama-3-8b",
    "setup":{"dtype":"bf16","kv_dtype":"f32","batch":2,"prompt_tokens":128,
             "generated_tokens":64,"threads":2},
    "measured":{"weights_bytes":16060522496,"decode_tok_s":1.5,"wall_s":3.0}})",
                    "example");
}

TEST(RunMetrics, ParsesDocExampleAndRoundTrips) {
  const RunMetrics m = run_metrics_from_json(example(), "example");
  EXPECT_EQ(m.kind, "bench_decode");
  EXPECT_EQ(m.model, "llama-3-8b");
  EXPECT_EQ(m.setup.batch, 2);
  EXPECT_EQ(m.setup.kv_dtype, "f32");
  EXPECT_EQ(m.setup.tp, 1);  // default
  ASSERT_TRUE(m.measured.weights_bytes.has_value());
  EXPECT_DOUBLE_EQ(*m.measured.weights_bytes, 16060522496.0);
  EXPECT_FALSE(m.measured.kv_cache_bytes.has_value());
  const RunMetrics back = run_metrics_from_json(run_metrics_to_json(m), "roundtrip");
  EXPECT_EQ(run_metrics_to_json(back), run_metrics_to_json(m));
}

TEST(RunMetrics, ReadsFromFile) {
  const std::string path = path_join(test::temp_dir("run_metrics"), "run.json");
  write_file_atomic(path, example().dump());
  EXPECT_EQ(read_run_metrics(path).setup.prompt_tokens, 128);
}

TEST(RunMetrics, ReadsPrettyJsonAndTheLastRecordOfAJsonlLog) {
  const std::string dir = test::temp_dir("run_metrics_jsonl");
  const std::string pretty = path_join(dir, "pretty.json");
  write_file_atomic(pretty, example().dump(2));
  EXPECT_EQ(read_run_metrics(pretty).setup.prompt_tokens, 128);
  Json first = example(), last = example();
  first["setup"]["prompt_tokens"] = 7;
  last["setup"]["prompt_tokens"] = 9;
  const std::string log = path_join(dir, "train.jsonl");
  write_file_atomic(log, first.dump() + "\n" + last.dump() + "\n");
  EXPECT_EQ(read_run_metrics(log).setup.prompt_tokens, 9);
  write_file_atomic(log, first.dump() + "\n{\"schema\": \n");
  try {
    read_run_metrics(log);
    ADD_FAILURE() << "a truncated last record was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("(last line)"), std::string::npos) << e.what();
  }
}

TEST(RunMetrics, ErrorsNameTheField) {
  auto expect_error = [](Json j, const std::string& needle) {
    try {
      run_metrics_from_json(j, "run.json");
      ADD_FAILURE() << "no error for " << needle;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Json j = example();
  j["schema"] = "lmstack.run.v0";
  expect_error(j, "schema");
  j = example();
  j["kind"] = "inference";
  expect_error(j, "inference");
  j = example();
  j.erase("measured");
  expect_error(j, "measured");
  j = example();
  j["setup"]["batch"] = 0;
  expect_error(j, "batch");
  j = example();
  j["measured"]["decode_tok_s"] = "fast";
  expect_error(j, "decode_tok_s");
  j = example();
  j["setup"]["zero"] = 4;
  expect_error(j, "zero");
}

}  // namespace
}  // namespace lmstack::calc
