// The kernels against PyTorch: goldens written by tools/ref/gen_kernels.py (Hugging Face's f32
// formulas for RMSNorm, LayerNorm, RoPE with llama3 scaling and GPT-J pairs, SiLU·up,
// gelu_new, softmax and eager GQA causal attention), forward outputs and autograd gradients.
// Legend: B sequences, T tokens, H query heads, Hkv kv heads, D head dim.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/core/npy.h"
#include "lmstack/kernels/ops.h"
#include "test_util.h"

namespace lmstack::kernels {
namespace {

const NpyArray& golden(const std::string& name) {
  static std::map<std::string, NpyArray> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    const std::string path = test::source_path("tests/data/kernels/" + name + ".npy");
    try {
      it = cache.emplace(name, read_npy(path)).first;
    } catch (const Error& e) {
      ADD_FAILURE() << e.what() << " (regenerate: python3 tools/ref/gen_kernels.py)";
      it = cache.emplace(name, NpyArray{}).first;
    }
  }
  return it->second;
}

std::vector<float> f32(const std::string& name) {
  const auto& values = golden(name).f32;
  EXPECT_FALSE(values.empty()) << name << " holds no f32 data";
  return values;
}

constexpr double kRtol = 1e-5, kAtol = 1e-6;

TEST(PytorchParity, Rmsnorm) {
  const auto x = f32("rmsnorm_x"), w = f32("rmsnorm_w"), dy = f32("rmsnorm_dy");
  std::vector<float> y(x.size()), dx(x.size()), dw(w.size());
  rmsnorm(y.data(), x.data(), w.data(), 5, 67, 1e-6f);
  EXPECT_TRUE(test::all_close(y, f32("rmsnorm_y"), kRtol, kAtol));
  rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), 5, 67, 1e-6f);
  EXPECT_TRUE(test::all_close(dx, f32("rmsnorm_dx"), 1e-4, 1e-5));
  EXPECT_TRUE(test::all_close(dw, f32("rmsnorm_dw"), 1e-4, 1e-5));
}

TEST(PytorchParity, Layernorm) {
  const auto x = f32("layernorm_x"), g = f32("layernorm_g"), b = f32("layernorm_b");
  const auto dy = f32("layernorm_dy");
  std::vector<float> y(x.size()), dx(x.size()), dg(g.size()), db(b.size());
  layernorm(y.data(), x.data(), g.data(), b.data(), 5, 67, 1e-5f);
  EXPECT_TRUE(test::all_close(y, f32("layernorm_y"), kRtol, kAtol));
  layernorm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), g.data(), 5, 67, 1e-5f);
  EXPECT_TRUE(test::all_close(dx, f32("layernorm_dx"), 1e-4, 1e-5));
  EXPECT_TRUE(test::all_close(dg, f32("layernorm_dg"), 1e-4, 1e-5));
  EXPECT_TRUE(test::all_close(db, f32("layernorm_db"), 1e-4, 1e-5));
}

TEST(PytorchParity, RopeLlama3AndGptj) {
  const auto& pos = golden("rope_positions").i32;
  ASSERT_EQ(pos.size(), 6u);
  // Our frequencies are correctly rounded; PyTorch's f32 pow is within an ulp or two.
  std::vector<float> inv(32);
  rope_inv_freq(inv.data(), 64, 500000.0f, "llama3", 8, 1, 4, 8192);
  EXPECT_TRUE(test::all_close(inv, f32("rope_llama3_inv_freq"), 3e-7, 0));
  // The rotation itself, from PyTorch's frequencies (positions up to 70000).
  auto x = f32("rope_llama3_x");
  rope(x.data(), pos.data(), 6, 3, 64, 64, f32("rope_llama3_inv_freq").data(),
       RopeStyle::kRotateHalf);
  EXPECT_TRUE(test::all_close(x, f32("rope_llama3_y"), kRtol, 2e-6));
  x = f32("rope_gptj_x");
  rope(x.data(), pos.data(), 6, 3, 64, 32, f32("rope_gptj_inv_freq").data(),
       RopeStyle::kInterleaved);
  EXPECT_TRUE(test::all_close(x, f32("rope_gptj_y"), kRtol, 2e-6));
}

TEST(PytorchParity, Activations) {
  const auto gate = f32("silu_mul_gate"), up = f32("silu_mul_up"), dy = f32("silu_mul_dy");
  std::vector<float> out(gate.size()), dgate(gate.size()), dup(up.size());
  silu_mul(out.data(), gate.data(), up.data(), 301);
  EXPECT_TRUE(test::all_close(out, f32("silu_mul_y"), kRtol, kAtol));
  silu_mul_backward(dgate.data(), dup.data(), dy.data(), gate.data(), up.data(), 301);
  EXPECT_TRUE(test::all_close(dgate, f32("silu_mul_dgate"), 1e-5, 1e-6));
  EXPECT_TRUE(test::all_close(dup, f32("silu_mul_dup"), 1e-5, 1e-6));

  const auto x = f32("gelu_x"), gdy = f32("gelu_dy");
  std::vector<float> y(x.size()), dx(x.size());
  gelu_tanh(y.data(), x.data(), 301);
  // PyTorch's 1 + tanh(u) cancels for u << 0, so small outputs get an absolute tolerance.
  EXPECT_TRUE(test::all_close(y, f32("gelu_y"), kRtol, 1e-6));
  gelu_tanh_backward(dx.data(), gdy.data(), x.data(), 301);
  EXPECT_TRUE(test::all_close(dx, f32("gelu_dx"), 1e-5, 1e-6));

  auto s = f32("softmax_x");
  softmax_rows(s.data(), 4, 67);
  EXPECT_TRUE(test::all_close(s, f32("softmax_y"), kRtol, 1e-8));
  std::vector<float> ds(s.size());
  softmax_rows_backward(ds.data(), f32("softmax_dy").data(), s.data(), 4, 67);
  EXPECT_TRUE(test::all_close(ds, f32("softmax_dx"), 1e-4, 1e-7));
}

TEST(PytorchParity, CausalAttentionGqa) {
  const int64_t b = 2, t = 9;
  const int h = 4, hkv = 2, d = 16;
  const auto q = f32("attention_q"), k = f32("attention_k"), v = f32("attention_v");
  std::vector<float> out(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
  ThreadPool pool(2);
  causal_attention(pool, out.data(), q.data(), k.data(), v.data(), b, t, h, hkv, d, 0.25f);
  EXPECT_TRUE(test::all_close(out, f32("attention_y"), kRtol, 2e-6));
  causal_attention_backward(pool, dq.data(), dk.data(), dv.data(), f32("attention_dy").data(),
                            q.data(), k.data(), v.data(), out.data(), b, t, h, hkv, d, 0.25f);
  EXPECT_TRUE(test::all_close(dq, f32("attention_dq"), 1e-4, 1e-5));
  EXPECT_TRUE(test::all_close(dk, f32("attention_dk"), 1e-4, 1e-5));
  EXPECT_TRUE(test::all_close(dv, f32("attention_dv"), 1e-4, 1e-5));
}

}  // namespace
}  // namespace lmstack::kernels
