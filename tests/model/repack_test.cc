// repack_for_decode (model/repack.h) on the Qwen2 Q4_0 GGUF golden (bias on q/k/v, tied
// embeddings): the q4_0 matrices become q4_0x16, a q4_0 embedding with them (still tied, so the
// lookup reads the repacked rows); prefill (M > 16: the
// GEMM reads the repacked rows through a plain copy) gives bit-identical logits; decode one
// token at a time and three sequences at once (the q4_0x16 GEMV) gives the same logits up to
// float summation order, hence the same greedy tokens.
#include "lmstack/model/repack.h"

#include <gtest/gtest.h>

#include <numeric>
#include <utility>

#include "gguf_test_util.h"
#include "lmstack/model/gguf_model.h"

namespace lmstack::model {
namespace {

using gguf_test::golden;
using gguf_test::logits_of;
using gguf_test::sample_tokens;
using test_logits::rel_rms;

// Logits of each step when `seqs` copies of `tokens` (the i-th shifted by i) are decoded one
// token per sequence per forward: M = seqs rows every step.
std::vector<float> decode_logits(const ModelConfig& c, const ModelWeights& w,
                                 const std::vector<int32_t>& tokens, int seqs) {
  ThreadPool pool(2);
  Decoder dec(c, w, pool);
  const int bs = 16, per_seq = (static_cast<int>(tokens.size()) + bs - 1) / bs;
  KvCache cache(c, per_seq * seqs, bs);
  std::vector<float> all, logits;
  for (size_t t = 0; t < tokens.size(); ++t) {
    ForwardBatch batch;
    for (int s = 0; s < seqs; ++s) {
      std::vector<int32_t> blocks(static_cast<size_t>(per_seq));
      std::iota(blocks.begin(), blocks.end(), s * per_seq);
      const int32_t id = (tokens[t] + s) % c.vocab_size;
      batch.add_sequence({id}, static_cast<int>(t), blocks, bs, true);
    }
    dec.forward(batch, cache, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

std::vector<size_t> argmax_rows(const std::vector<float>& logits, size_t vocab) {
  std::vector<size_t> out;
  for (size_t at = 0; at < logits.size(); at += vocab)
    out.push_back(static_cast<size_t>(
        std::max_element(logits.begin() + at, logits.begin() + at + vocab) - logits.begin() - at));
  return out;
}

TEST(Repack, Q4_0ModelGivesTheSameLogitsRepacked) {
  const ModelDir plain = load_model_dir(golden("qwen2_q4_0.gguf"));
  ModelWeights packed = plain.weights;
  ThreadPool pool(2);
  const RepackStats st = repack_for_decode(packed, pool);
  const LayerWeights& l = packed.layers[0];
  const bool q4_embed = plain.weights.embed.dtype() == DType::kQ4_0;
  EXPECT_EQ(st.tensors, 7 + q4_embed);  // q, k, v, o, gate, up, down (+ the tied embedding)
  for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
    EXPECT_EQ(t->dtype(), DType::kQ4_0x16);
  EXPECT_EQ(packed.embed.dtype(), q4_embed ? DType::kQ4_0x16 : plain.weights.embed.dtype());
  EXPECT_EQ(std::as_const(packed).lm_head.raw_data(), std::as_const(packed).embed.raw_data());
  EXPECT_EQ(packed.bytes(), plain.weights.bytes());

  const ModelConfig& c = plain.config;
  EXPECT_EQ(logits_of(c, packed, sample_tokens()), logits_of(c, plain.weights, sample_tokens()));
  for (int seqs : {1, 3}) {
    SCOPED_TRACE(seqs);
    const std::vector<float> want = decode_logits(c, plain.weights, sample_tokens(), seqs);
    const std::vector<float> got = decode_logits(c, packed, sample_tokens(), seqs);
    EXPECT_LT(rel_rms(got, want), 1e-5);
    EXPECT_EQ(argmax_rows(got, static_cast<size_t>(c.vocab_size)),
              argmax_rows(want, static_cast<size_t>(c.vocab_size)));
  }
}

}  // namespace
}  // namespace lmstack::model
