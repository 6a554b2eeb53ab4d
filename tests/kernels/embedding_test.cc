// embedding_lookup: rows copied for f32, widened exactly for bf16/f16, and an out-of-range id
// rejected with a RequestError that names it.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {
namespace {

Tensor make_table(DType dtype, int64_t vocab, int64_t width) {
  Tensor t = Tensor::zeros({vocab, width}, dtype);
  for (int64_t i = 0; i < vocab * width; ++i) t.set_f32(i, static_cast<float>(i % 97) * 0.25f - 3);
  return t;
}

TEST(Embedding, LooksUpRowsForEachDtype) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const int64_t vocab = 11, width = 37;
    const Tensor table = make_table(dtype, vocab, width);
    const std::vector<int32_t> ids = {3, 0, 10, 3};
    std::vector<float> out(ids.size() * width);
    embedding_lookup(out.data(), table, ids.data(), static_cast<int64_t>(ids.size()));
    for (size_t t = 0; t < ids.size(); ++t)
      for (int64_t c = 0; c < width; ++c)
        ASSERT_EQ(out[t * width + static_cast<size_t>(c)], table.get_f32(ids[t] * width + c))
            << dtype_name(dtype) << " token " << t << " column " << c;
  }
}

TEST(Embedding, RejectsOutOfRangeIdNamingIt) {
  const Tensor table = make_table(DType::kF32, 5, 4);
  std::vector<float> out(8);
  for (int32_t bad : {5, -1, 123456}) {
    const std::vector<int32_t> ids = {1, bad};
    try {
      embedding_lookup(out.data(), table, ids.data(), 2);
      FAIL() << "no error for id " << bad;
    } catch (const RequestError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lmstack::kernels
