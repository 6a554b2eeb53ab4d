// GGUF container: writer -> reader round trip of every value kind and tensor type, and the
// reader's refusal of malformed files (each corruption is a byte patch of a valid file, so
// the error can only come from the patched field). Byte-level agreement with gguf-py is checked
// in tests/model/gguf_model_test.cc on files gguf-py wrote.
#include "lmstack/core/gguf.h"

#include <cstring>

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "test_util.h"

namespace lmstack {
namespace {

Tensor filled(const Shape& shape, DType dtype, uint8_t seed) {
  Tensor t = Tensor::zeros(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
  return t;
}

GgufWriter sample_writer(uint32_t alignment = 32) {
  GgufWriter w(alignment);
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("a.u32", GgufValue::u32(4000000000u));
  w.set("a.i32", GgufValue::i32(-5));
  w.set("a.f32", GgufValue::f32(0.25f));
  w.set("a.bool", GgufValue::boolean(true));
  w.set("a.strings", GgufValue::string_array({"x", "", "\xE2\x96\x81y"}));
  w.set("a.floats", GgufValue::f32_array({1.5, -2}));
  w.set("a.ints", GgufValue::i32_array({3, -4, 5}));
  w.add_tensor("t.f32", filled(Shape{3, 4}, DType::kF32, 1));
  w.add_tensor("t.f16", filled(Shape{2, 32}, DType::kF16, 2));
  w.add_tensor("t.q8_0", filled(Shape{2, 64}, DType::kQ8_0, 3));
  return w;
}

std::string write_bytes(const std::string& name, const std::string& bytes) {
  const std::string path = test::temp_dir("gguf") + "/" + name + ".gguf";
  write_file_atomic(path, bytes);
  return path;
}

template <class T>
void patch(std::string& bytes, size_t pos, T v) {
  ASSERT_LE(pos + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + pos, &v, sizeof(T));
}

// Offset of the u32 ggml type of tensor `name` (n_dims dims) in the header.
size_t type_pos(const std::string& bytes, const std::string& name, int n_dims) {
  const size_t at = bytes.find(name);
  return at + name.size() + 4 + 8 * static_cast<size_t>(n_dims);
}

void expect_refused(const std::string& bytes, const std::string& name, const std::string& what) {
  const std::string path = write_bytes(name, bytes);
  try {
    GgufFile f(path);
    ADD_FAILURE() << name << ": accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Gguf, RoundTripsEveryValueAndTensor) {
  const std::string path = write_bytes("round", sample_writer().serialize());
  const GgufFile f(path);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("a.u32"), 4000000000);
  EXPECT_EQ(f.get_int("a.i32"), -5);
  EXPECT_EQ(f.get_float("a.f32"), 0.25);
  EXPECT_TRUE(f.get_bool("a.bool"));
  EXPECT_EQ(f.get_strings("a.strings"), (std::vector<std::string>{"x", "", "\xE2\x96\x81y"}));
  EXPECT_EQ(f.get_floats("a.floats"), (std::vector<double>{1.5, -2}));
  EXPECT_EQ(f.get_ints("a.ints"), (std::vector<int64_t>{3, -4, 5}));
  EXPECT_EQ(f.get_int("absent", 9), 9);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  const GgufTensorInfo& q = f.tensor_info("t.q8_0");
  EXPECT_EQ(q.ne, (std::vector<int64_t>{64, 2}));  // innermost first
  EXPECT_EQ(q.offset % 32, 0u);
  for (const auto& [name, dtype, shape, seed] : {std::tuple{"t.f32", DType::kF32, Shape{3, 4}, 1},
                                                 {"t.f16", DType::kF16, Shape{2, 32}, 2},
                                                 {"t.q8_0", DType::kQ8_0, Shape{2, 64}, 3}}) {
    const Tensor t = f.tensor(name);
    EXPECT_EQ(t.dtype(), dtype) << name;
    EXPECT_EQ(t.shape(), shape) << name;
    EXPECT_TRUE(t.is_mapped());
    const Tensor want = filled(shape, dtype, static_cast<uint8_t>(seed));
    EXPECT_EQ(std::memcmp(t.raw_data(), want.raw_data(), static_cast<size_t>(t.nbytes())), 0);
  }
}

TEST(Gguf, HonoursGeneralAlignment) {
  const GgufFile f(write_bytes("align64", sample_writer(64).serialize()));
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
}

TEST(Gguf, TypedGettersNameTheKey) {
  const GgufFile f(write_bytes("typed", sample_writer().serialize()));
  EXPECT_THROW(
      {
        try {
          (void)f.get_string("a.u32");
        } catch (const FormatError& e) {
          EXPECT_NE(std::string(e.what()).find("'a.u32' is u32, expected string"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      FormatError);
  EXPECT_THROW((void)f.get_int("missing.key"), FormatError);
  EXPECT_THROW((void)f.tensor("no.such.tensor"), FormatError);
}

TEST(Gguf, RefusesTruncatedFiles) {
  const std::string good = sample_writer().serialize();
  const GgufFile f(write_bytes("full", good));
  const GgufTensorInfo& last = f.tensor_info("t.q8_0");
  const auto last_data_byte = static_cast<size_t>(f.data_offset() + last.offset + last.bytes - 1);
  // Cuts inside the header, and one inside the last tensor's data (not just its padding).
  for (size_t cut : {size_t{0}, size_t{3}, size_t{7}, size_t{20}, size_t{40}, size_t{100},
                     static_cast<size_t>(f.data_offset()) - 1, last_data_byte}) {
    SCOPED_TRACE(cut);
    const std::string path = write_bytes("cut" + std::to_string(cut), good.substr(0, cut));
    EXPECT_THROW(GgufFile{path}, FormatError);
  }
}

TEST(Gguf, RefusesMalformedHeaders) {
  const std::string good = sample_writer().serialize();
  std::string b = good;
  patch<uint32_t>(b, 0, 0x46554748);
  expect_refused(b, "magic", "bad magic");
  b = good;
  patch<uint32_t>(b, 4, 2);
  expect_refused(b, "version", "version 2 is not supported");
  b = good;
  patch<uint64_t>(b, 8, uint64_t{1} << 40);
  expect_refused(b, "count", "tensor count");
  b = good;
  const size_t key = b.find("a.i32");
  patch<uint32_t>(b, key + 5, 77);
  expect_refused(b, "valuetype", "unknown value type 77");
  b = good;
  patch<uint64_t>(b, b.find("general.architecture") + 20 + 4, uint64_t{1} << 50);
  expect_refused(b, "strlen", "truncated");
}

TEST(Gguf, RefusesBadTensorInfos) {
  const std::string good = sample_writer().serialize();
  std::string b = good;
  patch<uint32_t>(b, type_pos(b, "t.f16", 2), 99);
  expect_refused(b, "ggmltype", "unknown ggml type 99");
  b = good;
  patch<uint64_t>(b, type_pos(b, "t.f16", 2) + 4, 40);  // offset 40: not a multiple of 32
  expect_refused(b, "misaligned", "not a multiple of the alignment 32");
  b = good;
  patch<uint64_t>(b, type_pos(b, "t.q8_0", 2) + 4, 1 << 20);
  expect_refused(b, "pastend", "runs past the end");
  b = good;
  patch<uint64_t>(b, type_pos(b, "t.q8_0", 2) - 16, 48);  // ne[0] = 48: not whole Q8_0 blocks
  expect_refused(b, "blocks", "not a multiple of its block of 32");
  b = good;
  patch<uint64_t>(b, type_pos(b, "t.f16", 2) + 4, 0);  // t.f16 on top of t.f32
  expect_refused(b, "overlap", "overlap");
  b = good;
  b.replace(b.find("t.f16"), 5, "t.f32");
  expect_refused(b, "dupname", "duplicate tensor 't.f32'");
}

TEST(Gguf, RefusesAlignmentThatIsNotAPowerOfTwo) {
  std::string b = sample_writer(64).serialize();
  const size_t at = b.find("general.alignment") + std::string("general.alignment").size();
  patch<uint32_t>(b, at + 4, 48);
  expect_refused(b, "align48", "power-of-two");
}

TEST(Gguf, TypeTables) {
  EXPECT_EQ(dtype_of_ggml(12), DType::kQ4_K);
  EXPECT_EQ(ggml_type_of(DType::kBF16), 30u);
  EXPECT_FALSE(dtype_of_ggml(13).has_value());  // Q5_K: known to the reader, not computable
  ASSERT_NE(ggml_type_info(13), nullptr);
  EXPECT_EQ(ggml_type_info(13)->block_bytes, 176);
  EXPECT_EQ(ggml_type_info(5), nullptr);  // removed from ggml (old Q4_2)
  for (DType d : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    const GgmlTypeInfo* g = ggml_type_info(ggml_type_of(d));
    EXPECT_EQ(g->block_size, dtype_info(d).block_size) << g->name;
    EXPECT_EQ(g->block_bytes, dtype_info(d).block_bytes) << g->name;
  }
}

}  // namespace
}  // namespace lmstack

namespace lmstack {
namespace {

// One key whose value is an array of arrays `depth` deep (the innermost an empty u8 array).
std::string nested_array_file(int depth) {
  std::string b;
  auto put = [&b](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint32_t{0x46554747});
  put(uint32_t{3});
  put(uint64_t{0});  // tensors
  put(uint64_t{1});  // keys
  put(uint64_t{1});
  b += "k";
  put(uint32_t{9});  // array
  for (int i = 1; i < depth; ++i) {
    put(uint32_t{9});
    put(uint64_t{1});
  }
  put(uint32_t{0});  // u8
  put(uint64_t{0});
  return b;
}

// A value nested 400,000 deep overflowed the stack (issue 13); 16 levels are read.
TEST(Gguf, RefusesArraysNestedTooDeep) {
  EXPECT_NO_THROW(GgufFile(write_bytes("nest16", nested_array_file(16))));
  expect_refused(nested_array_file(17), "nest17", "metadata key 'k': arrays nest deeper than 16");
  expect_refused(nested_array_file(400000), "nest400k", "arrays nest deeper than 16");
}

}  // namespace
}  // namespace lmstack
