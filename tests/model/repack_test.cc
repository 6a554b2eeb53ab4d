// repack_for_decode (model/repack.h) on the Qwen2 Q4_0 GGUF golden (bias on q/k/v, tied
// embeddings): the q4_0 matrices become q4_0x16, a q4_0 embedding with them (still tied, so the
// lookup reads the repacked rows); and on a Llama model quantized to Q4_K and to Q6_K (lm_head
// its own matrix of that type): they become q4_Kx16 / q6_Kx16. Prefill (M > 16: the int8 GEMM
// packs its panels from the groups) gives bit-identical logits; decode one token at a time and
// three sequences at once (the interleaved GEMVs) gives the same logits up to float summation
// order (and for the Q4_0 golden the same greedy tokens; see the K-quant test for its bound).
#include "lmstack/model/repack.h"

#include <gtest/gtest.h>

#include <numeric>
#include <utility>

#include "gguf_test_util.h"
#include "lmstack/kernels/quant_repack.h"
#include "lmstack/model/gguf_model.h"
#include "lmstack/model/quantize.h"

namespace lmstack::model {
namespace {

using gguf_test::golden;
using gguf_test::logits_of;
using gguf_test::make_reference;
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

// Prefill logits bit for bit; decode logits (1 and 3 sequences) within decode_tol (rel_rms)
// and, if asked, with the same greedy tokens.
void expect_same_logits(const ModelConfig& c, const ModelWeights& plain, const ModelWeights& packed,
                        double decode_tol, bool same_argmax) {
  EXPECT_EQ(logits_of(c, packed, sample_tokens()), logits_of(c, plain, sample_tokens()));
  for (int seqs : {1, 3}) {
    SCOPED_TRACE(seqs);
    const std::vector<float> want = decode_logits(c, plain, sample_tokens(), seqs);
    const std::vector<float> got = decode_logits(c, packed, sample_tokens(), seqs);
    EXPECT_LT(rel_rms(got, want), decode_tol);
    if (same_argmax) {
      EXPECT_EQ(argmax_rows(got, static_cast<size_t>(c.vocab_size)),
                argmax_rows(want, static_cast<size_t>(c.vocab_size)));
    }
  }
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
  expect_same_logits(plain.config, plain.weights, packed, 1e-5, true);
}

TEST(Repack, KQuantModelsGiveTheSameLogitsRepacked) {
  // K = 256 and 512 (one and two super-blocks); vocab 520: the lm_head's 32 groups and 8
  // plain rows.
  const Json config = Json::parse(R"({"architectures": ["LlamaForCausalLM"],
      "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
      "num_hidden_layers": 2, "vocab_size": 520, "max_position_embeddings": 256,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false})");
  const ModelDir ref = make_reference(config, DType::kF32, "repack_k_quants");
  ThreadPool pool(2);
  for (const auto& [type, x16] :
       {std::pair{DType::kQ4_K, DType::kQ4_Kx16}, std::pair{DType::kQ6_K, DType::kQ6_Kx16}}) {
    SCOPED_TRACE(dtype_name(type));
    QuantizeOptions o;
    o.weight_type = o.output_type = type;
    const ModelWeights plain = quantize_weights(pool, ref.config, ref.weights, o, nullptr);
    ModelWeights packed = plain;
    const RepackStats st = repack_for_decode(packed, pool);
    if (!kernels::x16_pays_off(type)) {  // q6_K without AVX-512: the row GEMV is faster
      EXPECT_EQ(st.tensors, 0);
      continue;
    }
    EXPECT_EQ(st.tensors, 2 * 7 + 1);  // per layer q, k, v, o, gate, up, down; the lm_head
    for (const LayerWeights& l : packed.layers)
      for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
        EXPECT_EQ(t->dtype(), x16);
    EXPECT_EQ(packed.lm_head.dtype(), x16);
    EXPECT_EQ(packed.bytes(), plain.bytes());
    // Decode: the two GEMVs agree to ~2e-7 (quant_repack_test), which holds for this model's
    // first three tokens; from the fourth on, such a difference lands on a rounding boundary of
    // the next layer's int8 activation quantization now and then, one code moves by one step
    // (~1e-3 of the logits), and the random-init model carries it on through the KV cache
    // (5e-3 after 20 tokens; plain GEMV against plain prefill GEMM: 2.5e-4). A layout error moves
    // every logit (one sub-block scale for both of a chunk: rel_rms 0.8), so 2e-2 separates them.
    expect_same_logits(ref.config, plain, packed, 2e-2, false);
  }
}

}  // namespace
}  // namespace lmstack::model
