// .npy round trip and malformed-file errors. The byte layout is checked against a header
// numpy itself writes for np.save(np.zeros((2, 3), np.float32)).
#include "lmstack/core/npy.h"

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "test_util.h"

namespace lmstack {
namespace {

TEST(Npy, RoundTripFloatAndInt) {
  const std::string dir = test::temp_dir("npy");
  write_npy(dir + "/a.npy", {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6.5f});
  NpyArray a = read_npy(dir + "/a.npy");
  EXPECT_EQ(a.dtype, "<f4");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.f32[5], 6.5f);
  write_npy(dir + "/b.npy", {4}, std::vector<int32_t>{7, -1, 3, 2});
  NpyArray b = read_npy(dir + "/b.npy");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(b.i32, (std::vector<int32_t>{7, -1, 3, 2}));
}

TEST(Npy, HeaderMatchesNumpyLayout) {
  const std::string dir = test::temp_dir("npy_layout");
  write_npy(dir + "/z.npy", {2, 3}, std::vector<float>(6, 0.0f));
  const std::string bytes = read_file(dir + "/z.npy");
  // numpy 1.24: np.save of a (2, 3) float32 array; header padded so data starts at 128.
  const std::string want = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(bytes.substr(10, want.size()), want);
  EXPECT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(bytes[127], '\n');
}

TEST(Npy, MalformedFilesAreRefused) {
  const std::string dir = test::temp_dir("npy_bad");
  write_file_atomic(dir + "/bad.npy", "not numpy at all");
  EXPECT_THROW(read_npy(dir + "/bad.npy"), FormatError);
  write_npy(dir + "/t.npy", {3}, std::vector<float>{1, 2, 3});
  std::string bytes = read_file(dir + "/t.npy");
  write_file_atomic(dir + "/t.npy", bytes.substr(0, bytes.size() - 2));
  try {
    read_npy(dir + "/t.npy");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("t.npy"), std::string::npos);
  }
}

// Headers the fuzzer (fuzz/npy_fuzz.cc) turned up: each read past the header string or threw
// std::invalid_argument from stoll before; all are FormatErrors naming the file now.
TEST(Npy, MalformedHeadersFoundByFuzzing) {
  const std::string dir = test::temp_dir("npy_fuzzed");
  auto npy = [](const std::string& dict) {
    std::string h = "\x93NUMPY";
    h.push_back(1);
    h.push_back(0);
    h.push_back(static_cast<char>(dict.size() & 0xff));
    h.push_back(static_cast<char>(dict.size() >> 8));
    return h + dict;
  };
  const std::pair<std::string, std::string> cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape':", "'shape' has no value"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, ", "is not closed"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (3,), }", "npy dtype '<f4, ' unsupported"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (x1,), }", "is not a tuple of sizes"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
       "is not a tuple of sizes"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
       "is not a tuple of sizes"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "is not a tuple of sizes"},
  };
  for (const auto& [dict, what] : cases) {
    write_file_atomic(dir + "/f.npy", npy(dict));
    try {
      read_npy(dir + "/f.npy");
      ADD_FAILURE() << "accepted " << dict;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << dict << ": " << e.what();
    }
  }
  // The fuzzer's own input: a second header glued into the first one's 'descr' key.
  write_file_atomic(dir + "/f.npy", npy("{'d$es_r': '<f4', 'fortran_ord)er': False, 's    "));
  EXPECT_THROW(read_npy(dir + "/f.npy"), FormatError);
  // Shapes NumPy writes still parse: (), (3,), (2, 3).
  write_file_atomic(dir + "/s.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }") +
                                        std::string(4, '\0'));
  EXPECT_TRUE(read_npy(dir + "/s.npy").shape.empty());
  // A zero dim (the long fuzz run's finding: memcpy into an empty vector's null pointer).
  write_file_atomic(dir + "/z.npy",
                    npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 0), }"));
  const NpyArray z = read_npy(dir + "/z.npy");
  EXPECT_EQ(z.shape, (std::vector<int64_t>{2, 0}));
  EXPECT_TRUE(z.i32.empty());
}

}  // namespace
}  // namespace lmstack
