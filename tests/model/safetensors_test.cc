// Safetensors reader and writer: round trips over every storable dtype, empty and scalar
// tensors, shard sets, every class of corrupt header (each error must name the file and the
// tensor or field), and a file written by Python's safetensors package
// (tools/ref/gen_safetensors.py) read to the exact values.
#include "lmstack/model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "lmstack/core/file.h"
#include "lmstack/core/half.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

Tensor ramp(const Shape& shape, DType dtype, float scale = 0.25f) {
  Tensor t = Tensor::zeros(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f32(i, static_cast<float>(i % 97 - 40) * scale);
  return t;
}

// A raw file: 8-byte little-endian length, the header text, then `data_bytes` zero bytes.
std::string raw_file(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return s + header + std::string(data_bytes, '\0');
}

// Expects SafetensorsFile(path) to throw FormatError whose message holds every needle.
void expect_format_error(const std::string& path, const std::vector<std::string>& needles) {
  try {
    SafetensorsFile f(path);
    FAIL() << "no error for " << path;
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
}

TEST(Safetensors, RoundTripsEveryDtypeAndShape) {
  const std::string dir = test::temp_dir("st_rt");
  const std::string path = path_join(dir, "a.safetensors");
  std::vector<std::pair<std::string, Tensor>> in = {
      {"w.f32", ramp(Shape{3, 5}, DType::kF32)},
      {"w.bf16", ramp(Shape{7, 3}, DType::kBF16)},
      {"w.f16", ramp(Shape{2, 3, 4}, DType::kF16)},
      {"w.i8", ramp(Shape{9}, DType::kI8, 1.0f)},
      {"w.i32", ramp(Shape{2, 2}, DType::kI32, 3.0f)},
      {"empty", Tensor::zeros(Shape{0, 4}, DType::kF32)},
      {"scalar", ramp(Shape{}, DType::kF32)},
      {"odd.bf16", ramp(Shape{3}, DType::kBF16)},
  };
  write_safetensors(path, in, Json{{"format", "pt"}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata()["format"], "pt");
  ASSERT_EQ(f.entries().size(), in.size());
  for (const auto& [name, t] : in) {
    const Tensor r = f.tensor(name);
    EXPECT_EQ(r.dtype(), t.dtype()) << name;
    EXPECT_EQ(r.shape(), t.shape()) << name;
    EXPECT_EQ(r.to_f32_vector(), t.to_f32_vector()) << name;
    if (r.numel() > 0) {
      EXPECT_TRUE(r.is_mapped()) << name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(r.raw_data()) % dtype_info(r.dtype()).block_bytes, 0u)
          << name;
    }
  }
  // Data starts at a multiple of 8 (header padded with spaces).
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes[8 + n - 1] == ' ' || bytes[8 + n - 1] == '}', true);
}

TEST(Safetensors, ManyTensorsKeepTheirOwnBytes) {
  const std::string path = path_join(test::temp_dir("st_many"), "m.safetensors");
  std::vector<std::pair<std::string, Tensor>> in;
  for (int i = 0; i < 300; ++i)
    in.emplace_back("t" + std::to_string(i), Tensor::from_f32(Shape{2}, {float(i), -float(i)}));
  write_safetensors(path, in);
  SafetensorsFile f(path);
  EXPECT_TRUE(f.metadata().empty());
  for (int i = 0; i < 300; ++i) {
    const Tensor t = f.tensor("t" + std::to_string(i));
    EXPECT_EQ(t.at({0}), float(i));
    EXPECT_EQ(t.at({1}), -float(i));
  }
}

TEST(Safetensors, WriterRejectsDuplicateNames) {
  const std::string path = path_join(test::temp_dir("st_dup"), "d.safetensors");
  const Tensor t = Tensor::from_f32(Shape{1}, {1});
  EXPECT_THROW(write_safetensors(path, {{"a", t}, {"a", t}}), FormatError);
  EXPECT_THROW(write_safetensors(path, {{"__metadata__", t}}), FormatError);
}

TEST(Safetensors, UnsupportedButValidDtypeFailsOnlyWhenRead) {
  const std::string path = path_join(test::temp_dir("st_i64"), "i.safetensors");
  write_file_atomic(path,
                    raw_file(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16));
  SafetensorsFile f(path);
  EXPECT_EQ(f.entry("ids").dtype_name, "I64");
  try {
    f.tensor("ids");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'ids'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("I64"), std::string::npos);
  }
  EXPECT_THROW(f.tensor("absent"), FormatError);
}

struct CorruptCase {
  const char* label;
  std::string contents;
  std::vector<std::string> needles;
};

TEST(Safetensors, CorruptFilesNameFileAndField) {
  const std::string dir = test::temp_dir("st_corrupt");
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  std::string huge_len(8, '\xff');
  const std::vector<CorruptCase> cases = {
      {"empty", "", {"too short"}},
      {"short", "abc", {"too short"}},
      {"len_past_end", huge_len + "{}", {"header length"}},
      {"truncated_data", raw_file(ok, 8), {"'w'", "past the data section"}},
      {"not_json", raw_file("{\"w\": [", 0), {"invalid JSON"}},
      {"not_object", raw_file("[1,2]", 0), {"not a JSON object"}},
      {"entry_not_object", raw_file(R"({"w": 3})", 0), {"'w'", "not an object"}},
      {"no_dtype", raw_file(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4), {"'w'", "'dtype'"}},
      {"no_shape",
       raw_file(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4),
       {"'w'", "'shape'"}},
      {"no_offsets",
       raw_file(R"({"w":{"dtype":"F32","shape":[1]}})", 4),
       {"'w'", "'data_offsets'"}},
      {"bad_dtype",
       raw_file(R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4),
       {"'w'", "unknown dtype 'F33'"}},
      {"dtype_not_string",
       raw_file(R"({"w":{"dtype":1,"shape":[1],"data_offsets":[0,4]}})", 4),
       {"'w'", "'dtype'"}},
      {"negative_dim",
       raw_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
       {"'w'", "shape"}},
      {"offsets_one",
       raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
       {"'w'", "data_offsets"}},
      {"offsets_reversed",
       raw_file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 4),
       {"'w'", "end before"}},
      {"size_mismatch",
       raw_file(R"({"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,16]}})", 16),
       {"'w'", "needs 8 bytes"}},
      {"overlap",
       raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                12),
       {"'b'", "overlaps", "'a'"}},
      {"bad_metadata", raw_file(R"({"__metadata__":{"x":1}})", 0), {"__metadata__", "'x'"}},
      {"overflow",
       raw_file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4),
       {"'w'", "overflows"}},
  };
  for (const CorruptCase& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string path = path_join(dir, std::string(c.label) + ".safetensors");
    write_file_atomic(path, c.contents);
    expect_format_error(path, c.needles);
  }
}

TEST(Safetensors, MissingFileIsAnIoError) {
  EXPECT_THROW(SafetensorsFile("/nonexistent/lmstack/x.safetensors"), IoError);
}

TEST(Safetensors, ShardSetFollowsTheIndex) {
  const std::string dir = test::temp_dir("st_shards");
  write_safetensors(path_join(dir, "s1.safetensors"), {{"a", ramp(Shape{4}, DType::kF32)}});
  write_safetensors(path_join(dir, "s2.safetensors"), {{"b", ramp(Shape{2, 2}, DType::kBF16)},
                                                       {"extra", ramp(Shape{1}, DType::kF32)}});
  write_file_atomic(path_join(dir, "index.json"),
                    R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  const SafetensorsSet set = SafetensorsSet::open_index(path_join(dir, "index.json"));
  EXPECT_EQ(set.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(set.tensor("b").dtype(), DType::kBF16);
  EXPECT_EQ(set.tensor("a").to_f32_vector(), ramp(Shape{4}, DType::kF32).to_f32_vector());
  EXPECT_EQ(set.file_of("b").path(), path_join(dir, "s2.safetensors"));
  try {
    set.tensor("c");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("index.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'c'"), std::string::npos);
  }
}

TEST(Safetensors, BadIndexesAreRejected) {
  const std::string dir = test::temp_dir("st_bad_index");
  write_safetensors(path_join(dir, "s1.safetensors"), {{"a", ramp(Shape{4}, DType::kF32)}});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"metadata":{}})", "weight_map"},
      {R"({"weight_map":{"a":"missing.safetensors"}})", "does not exist"},
      {R"({"weight_map":{"z":"s1.safetensors"}})", "'z'"},
      {R"({"weight_map":{"a":"../s1.safetensors"}})", "not a file in this directory"},
      {R"({"weight_map":{"a":7}})", "'a'"},
  };
  for (const auto& [text, needle] : cases) {
    SCOPED_TRACE(text);
    const std::string index = path_join(dir, "index.json");
    write_file_atomic(index, text);
    try {
      SafetensorsSet::open_index(index);
      FAIL();
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("index.json"), std::string::npos) << e.what();
    }
  }
}

// tests/data/model/reference.safetensors comes from Python's safetensors package
// (regenerate: python3 tools/ref/gen_safetensors.py); values are closed-form in the index.
TEST(Safetensors, ReadsTheReferenceFileFromPython) {
  const std::string path = test::source_path("tests/data/model/reference.safetensors");
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata()["generator"], "tools/ref/gen_safetensors.py");
  const Tensor a = f.tensor("a.f32");
  ASSERT_EQ(a.shape(), (Shape{3, 4}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(a.get_f32(i), static_cast<float>(i) * 0.5f - 2.0f);
  const Tensor b = f.tensor("b.bf16");
  ASSERT_EQ(b.shape(), (Shape{2, 3}));
  ASSERT_EQ(b.dtype(), DType::kBF16);
  const float b_want[] = {1.0f, -2.5f, 3.140625f, 0.0f, 65280.0f, -0.0078125f};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(b.get_f32(i), b_want[i]) << i;
  const Tensor h = f.tensor("c.f16");
  ASSERT_EQ(h.dtype(), DType::kF16);
  ASSERT_EQ(h.shape(), (Shape{5}));
  const float h_want[] = {1.0f, -0.5f, 65504.0f, 5.9604645e-08f, 0.333251953125f};
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(h.get_f32(i), h_want[i]) << i;
  const Tensor d = f.tensor("d.i32");
  ASSERT_EQ(d.shape(), (Shape{2, 2}));
  EXPECT_EQ(d.to_f32_vector(), (std::vector<float>{-7, 0, 7, 1000}));
  const Tensor e = f.tensor("e.i8");
  EXPECT_EQ(e.to_f32_vector(), (std::vector<float>{-128, -1, 0, 127}));
  EXPECT_EQ(f.entry("f.i64").dtype_name, "I64");
  EXPECT_EQ(f.tensor("g.empty").numel(), 0);
}

}  // namespace
}  // namespace lmstack::model
