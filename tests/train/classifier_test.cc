// The fused classifier (train/backward/classifier.cc) against its unfused steps: linear(),
// the scalar cross_entropy_forward_backward (itself checked against finite differences in
// backward_test.cc) and linear_backward, on odd shapes whose rows do not divide into chunks;
// and the vectorized cross_entropy_softmax_rows against the scalar one, including a row whose
// target probability underflows a float.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/grad_check.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/train/backward/backward.h"
#include "test_util.h"

namespace lmstack::train {
namespace {

std::vector<int32_t> random_targets(int64_t rows, int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> t(static_cast<size_t>(rows));
  for (int32_t& x : t) x = static_cast<int32_t>(gen() % static_cast<uint32_t>(vocab));
  return t;
}

TEST(CrossEntropySoftmaxRows, MatchesScalarReference) {
  ThreadPool pool(2);
  for (const int64_t vocab : {1, 7, 16, 131, 8193}) {
    const int64_t rows = 9;
    auto logits = test::random_floats(static_cast<size_t>(rows * vocab), 1, -8.0f, 8.0f);
    const auto targets = random_targets(rows, vocab, 2);
    if (vocab > 1) {  // row 0: the target 200 below the max, p_y = e^-200 underflows a float
      logits[static_cast<size_t>(targets[0] == 0 ? 1 : 0)] = 150.0f;
      logits[static_cast<size_t>(targets[0])] = -50.0f;
    }
    auto want = logits, got = logits;
    std::vector<float> want_loss(static_cast<size_t>(rows)), got_loss(want_loss.size());
    const double want_total = cross_entropy_forward_backward(want.data(), want_loss.data(),
                                                             targets.data(), rows, vocab, 0.25f);
    const double got_total = cross_entropy_softmax_rows(pool, got.data(), got_loss.data(),
                                                        targets.data(), rows, vocab, 0.25f);
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    EXPECT_NEAR(got_total, want_total, 1e-5 * std::abs(want_total) + 1e-5);
    EXPECT_TRUE(test::all_close(got_loss, want_loss, 1e-5, 1e-5));
    EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-6));
  }
  std::vector<float> z(4), loss(1);
  const std::vector<int32_t> bad = {4};
  EXPECT_THROW(cross_entropy_softmax_rows(pool, z.data(), loss.data(), bad.data(), 1, 4, 1.0f),
               RequestError);
}

// The unfused head: logits (linear_forward: bf16 mixed precision for a bf16 w, as the fused
// head), scalar cross-entropy scaled by grad_scale, linear_backward.
double unfused(ThreadPool& pool, std::vector<float>& dx, std::vector<float>& dw,
               std::vector<float>& losses, const std::vector<float>& x, const Tensor& w,
               const std::vector<int32_t>& targets, int64_t rows, float grad_scale) {
  const int64_t vocab = w.dim(0);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  linear_forward(pool, logits.data(), x.data(), w, rows);
  const double total = cross_entropy_forward_backward(logits.data(), losses.data(), targets.data(),
                                                      rows, vocab, grad_scale);
  linear_backward(pool, dx.data(), dw.data(), nullptr, logits.data(), x.data(), w, rows);
  return total;
}

TEST(Classifier, FusedChunksMatchUnfusedHead) {
  ThreadPool pool(2);
  const int64_t rows = 37, dim = 19, vocab = 131;
  const auto x = test::random_floats(static_cast<size_t>(rows * dim), 3);
  const auto w32 = test::random_floats(static_cast<size_t>(vocab * dim), 4);
  const auto targets = random_targets(rows, vocab, 5);
  for (const DType dt : {DType::kF32, DType::kBF16}) {
    Tensor w = Tensor::zeros({vocab, dim}, dt);
    std::vector<float> w_f32 = w32;
    if (dt == DType::kF32) {
      std::copy(w32.begin(), w32.end(), w.data<float>());
    } else {  // the f32 copy holds the bf16-rounded values, as TrainModel passes them
      convert_f32_to_bf16(w32.data(), w.data<uint16_t>(), w.numel());
      convert_bf16_to_f32(w.data<uint16_t>(), w_f32.data(), w.numel());
    }
    for (const int64_t chunk_rows : {int64_t{8}, int64_t{37}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " chunk " + std::to_string(chunk_rows));
      const auto dx0 = test::random_floats(static_cast<size_t>(rows * dim), 6);  // accumulated onto
      const auto dw0 = test::random_floats(static_cast<size_t>(vocab * dim), 7);
      auto want_dx = dx0, want_dw = dw0, got_dx = dx0, got_dw = dw0;
      std::vector<float> want_loss(static_cast<size_t>(rows)), got_loss(want_loss.size());
      std::vector<float> chunk(static_cast<size_t>(chunk_rows * vocab));
      const double want =
          unfused(pool, want_dx, want_dw, want_loss, x, w, targets, rows, 1.0f / rows);
      ClassifierArgs args;
      args.x = x.data(), args.w = w, args.w_f32 = w_f32.data(), args.targets = targets.data();
      args.rows = rows, args.grad_scale = 1.0f / rows, args.chunk = chunk.data();
      args.chunk_rows = chunk_rows;
      const double got =
          classifier_forward_backward(pool, got_dx.data(), got_dw.data(), got_loss.data(), args);
      EXPECT_NEAR(got, want, 1e-5 * std::abs(want));
      EXPECT_TRUE(test::all_close(got_loss, want_loss, 1e-5, 1e-5));
      EXPECT_TRUE(test::all_close(got_dx, want_dx, 1e-5, 1e-6));
      EXPECT_TRUE(test::all_close(got_dw, want_dw, 1e-5, 1e-6));
    }
  }
}

}  // namespace
}  // namespace lmstack::train
