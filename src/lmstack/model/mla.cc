// MLA forward (see mla.h), following transformers' DeepseekV2Attention / DeepseekV3Attention:
// q = q_proj(h) (or q_b(RMSNorm(q_a(h)))), [c_KV, k_R] = kv_a_proj_with_mqa(h), c_KV through
// kv_a_layernorm (eps 1e-6, the module's default in both), RoPE on q_R and k_R only, scale
// 1/sqrt(d_nope + d_R). Dimension letters: T tokens, H heads, r = d_c (kv_lora_rank),
// dn = d_nope, dr = d_R, dv = d_v, qk = dn + dr, cw = r + dr (one cache row).
#include "lmstack/model/mla.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/quant.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/rope_scaling.h"
#include "lmstack/model/weights_internal.h"

namespace lmstack::model {

// Copies the dr dims out so kernels::rope sees contiguous heads, rotates, scales and copies
// back (rotation and scale commute, so the inverse scales too).
void mla_rope_tail(float* x, const int32_t* positions, int64_t tokens, int64_t heads,
                   int64_t stride, int64_t offset, int64_t dr, const float* inv_freq,
                   bool interleave, float magnitude, std::vector<float>& tmp, bool inverse) {
  tmp.resize(static_cast<size_t>(tokens * heads * dr));
  for (int64_t i = 0; i < tokens * heads; ++i)
    std::memcpy(&tmp[static_cast<size_t>(i * dr)], x + i * stride + offset,
                static_cast<size_t>(dr) * sizeof(float));
  const auto style =
      interleave ? kernels::RopeStyle::kInterleaved : kernels::RopeStyle::kRotateHalf;
  if (inverse)
    kernels::rope_backward(tmp.data(), positions, tokens, static_cast<int>(heads),
                           static_cast<int>(dr), static_cast<int>(dr), inv_freq, style);
  else
    kernels::rope(tmp.data(), positions, tokens, static_cast<int>(heads), static_cast<int>(dr),
                  static_cast<int>(dr), inv_freq, style);
  for (int64_t i = 0; i < tokens * heads; ++i)
    for (int64_t j = 0; j < dr; ++j)
      x[i * stride + offset + j] = tmp[static_cast<size_t>(i * dr + j)] * magnitude;
}

namespace {

struct Dims {
  int64_t T, H, r, dn, dr, dv, qk, cw;
};

Dims dims_of(const ModelConfig& c, int64_t tokens) {
  const MlaConfig& m = c.mla;
  return {tokens,       c.num_heads,     m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim,
          m.v_head_dim, m.qk_head_dim(), m.cache_width()};
}

const float* kv_b_f32(MlaState& st, int layer, const Tensor& kv_b) {
  if (st.kv_b_f32.size() <= static_cast<size_t>(layer))
    st.kv_b_f32.resize(static_cast<size_t>(layer) + 1);
  Tensor& t = st.kv_b_f32[static_cast<size_t>(layer)];
  if (!t.defined() && is_quantized(kv_b.dtype())) {  // a quantized model: dequantized once
    t = Tensor::zeros(kv_b.shape(), DType::kF32, MemoryCategory::kBuffers);
    kernels::dequantize_rows(kv_b, 0, kv_b.dim(0), t.data<float>());
  } else if (!t.defined()) {
    t = kv_b.dtype() == DType::kF32
            ? kv_b
            : detail::convert_float(kv_b, DType::kF32, MemoryCategory::kBuffers);
  }
  return std::as_const(t).data<float>();  // a mapped f32 view stays read-only
}

// Absorbed form for `n` query rows q[n, H, qk] under `ab`: q̃_h = [q_nope,h · W_UK,h, q_R,h]
// attends over the cached rows as one KV head of width cw; out[n, H, dv] = lat_h · W_UV,hᵀ.
void absorbed(ThreadPool& pool, float* out, const float* q, int64_t n, const Dims& d,
              const kernels::PagedKv& kv, const kernels::AttentionBatch& ab, const float* kvb,
              float scale, MlaState& st) {
  st.qa.resize(static_cast<size_t>(n * d.H * d.cw));
  st.lat.resize(static_cast<size_t>(n * d.H * d.cw));
  for (int64_t h = 0; h < d.H; ++h) {
    const float* w_uk = kvb + h * (d.dn + d.dv) * d.r;  // [dn, r]
    kernels::gemm_f32(pool, false, false, n, d.r, d.dn, 1.0f, q + h * d.qk, d.H * d.qk, w_uk, d.r,
                      0.0f, st.qa.data() + h * d.cw, d.H * d.cw);
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(&st.qa[static_cast<size_t>((t * d.H + h) * d.cw + d.r)],
                  q + (t * d.H + h) * d.qk + d.dn, static_cast<size_t>(d.dr) * sizeof(float));
  }
  kernels::PagedKv mqa = kv;  // K and V are the same cached rows; attention reads only
  kernels::paged_attention(pool, st.lat.data(), st.qa.data(), mqa, ab, static_cast<int>(d.H),
                           scale);
  for (int64_t h = 0; h < d.H; ++h) {
    const float* w_uv = kvb + (h * (d.dn + d.dv) + d.dn) * d.r;  // [dv, r]
    kernels::gemm_f32(pool, false, true, n, d.dv, d.r, 1.0f, st.lat.data() + h * d.cw, d.H * d.cw,
                      w_uv, d.r, 0.0f, out + h * d.dv, d.H * d.dv);
  }
}

// Expanded form for sequence s: every context token's k_h = [W_UK,h c, k_R] and v_h = W_UV,h c
// rebuilt from the cache, then ordinary attention (V zero-padded to qk, as transformers pads
// for flash attention, so one kernel serves both widths).
void expanded(ThreadPool& pool, float* out, const float* q, const ForwardBatch& b, int s,
              const Dims& d, const kernels::PagedKv& kv, const Tensor& kv_b, float scale,
              MlaState& st) {
  const int64_t q0 = b.query_start[static_cast<size_t>(s)];
  const int64_t n = b.query_start[static_cast<size_t>(s) + 1] - q0;
  const int64_t ctx = b.context_len[static_cast<size_t>(s)];
  const int32_t* table = &b.block_table[static_cast<size_t>(s) * b.max_blocks_per_seq];
  st.ctx.resize(static_cast<size_t>(ctx * d.r));
  st.kbuf.assign(static_cast<size_t>(ctx * d.H * d.qk), 0.0f);
  st.vbuf.assign(static_cast<size_t>(ctx * d.H * d.qk), 0.0f);
  std::vector<float> row(static_cast<size_t>(d.cw));  // one cached [c_KV, k_R], as f32
  for (int64_t j = 0; j < ctx; ++j) {
    const int64_t slot =
        static_cast<int64_t>(table[j / kv.block_size]) * kv.block_size + j % kv.block_size;
    kernels::kv_read_row(row.data(), kv, false, slot, 0);
    std::memcpy(&st.ctx[static_cast<size_t>(j * d.r)], row.data(),
                static_cast<size_t>(d.r) * sizeof(float));
    for (int64_t h = 0; h < d.H; ++h)
      std::memcpy(&st.kbuf[static_cast<size_t>((j * d.H + h) * d.qk + d.dn)], row.data() + d.r,
                  static_cast<size_t>(d.dr) * sizeof(float));
  }
  st.kvb.resize(static_cast<size_t>(ctx * d.H * (d.dn + d.dv)));
  kernels::linear(pool, st.kvb.data(), st.ctx.data(), kv_b, ctx);
  for (int64_t j = 0; j < ctx; ++j)
    for (int64_t h = 0; h < d.H; ++h) {
      const float* src = &st.kvb[static_cast<size_t>((j * d.H + h) * (d.dn + d.dv))];
      float* k = &st.kbuf[static_cast<size_t>((j * d.H + h) * d.qk)];
      std::memcpy(k, src, static_cast<size_t>(d.dn) * sizeof(float));
      std::memcpy(&st.vbuf[static_cast<size_t>((j * d.H + h) * d.qk)], src + d.dn,
                  static_cast<size_t>(d.dv) * sizeof(float));
    }
  kernels::PagedKv dense{st.kbuf.data(),        st.vbuf.data(),        1,
                         static_cast<int>(ctx), static_cast<int>(d.H), static_cast<int>(d.qk)};
  const int32_t qs[2] = {0, static_cast<int32_t>(n)}, cl = static_cast<int32_t>(ctx), block = 0;
  kernels::AttentionBatch ab;
  ab.num_seqs = 1;
  ab.query_start = qs;
  ab.context_len = &cl;
  ab.block_table = &block;
  ab.max_blocks_per_seq = 1;
  st.obuf.resize(static_cast<size_t>(n * d.H * d.qk));
  kernels::paged_attention(pool, st.obuf.data(), q + q0 * d.H * d.qk, dense, ab,
                           static_cast<int>(d.H), scale);
  for (int64_t t = 0; t < n * d.H; ++t)
    std::memcpy(out + (q0 * d.H + t) * d.dv, &st.obuf[static_cast<size_t>(t * d.qk)],
                static_cast<size_t>(d.dv) * sizeof(float));
}

bool use_absorbed(MlaMode mode, const ForwardBatch& b, int s) {
  if (mode != MlaMode::kAuto) return mode == MlaMode::kAbsorbed;
  return b.query_start[static_cast<size_t>(s) + 1] - b.query_start[static_cast<size_t>(s)] == 1;
}

// The queries [T, H, qk] with RoPE applied to their last dr dims.
void queries(ThreadPool& pool, const float* h, const ForwardBatch& b, const ModelConfig& c,
             const Tensor& wq, const MlaLayerWeights& w, const float* inv_freq, const Dims& d,
             MlaState& st) {
  st.q.resize(static_cast<size_t>(d.T * d.H * d.qk));
  if (c.mla.q_lora_rank > 0) {
    const int64_t qr = c.mla.q_lora_rank;
    st.kvb.resize(static_cast<size_t>(d.T * qr));
    kernels::linear(pool, st.kvb.data(), h, w.q_a, d.T);
    kernels::rmsnorm(st.kvb.data(), st.kvb.data(), w.q_a_norm.data<float>(), d.T, qr,
                     kMlaLatentNormEps);
    kernels::linear(pool, st.q.data(), st.kvb.data(), wq, d.T);
  } else {
    kernels::linear(pool, st.q.data(), h, wq, d.T);
  }
  mla_rope_tail(st.q.data(), b.positions.data(), d.T, d.H, d.qk, d.dn, d.dr, inv_freq,
                c.mla.rope_interleave, rope_magnitude(c), st.rope_tmp);
}

}  // namespace

void mla_attention(ThreadPool& pool, float* x, const float* h, const ForwardBatch& b,
                   KvCache& cache, int layer, const ModelConfig& c, const Tensor& wq,
                   const Tensor& wo, const MlaLayerWeights& w, const float* inv_freq,
                   MlaState& st) {
  const Dims d = dims_of(c, b.num_tokens());
  queries(pool, h, b, c, wq, w, inv_freq, d, st);
  // The cache row of each token: [RMSNorm(c_KV), RoPE(k_R)], written straight from kv_a's output.
  st.kv.resize(static_cast<size_t>(d.T * d.cw));
  kernels::linear(pool, st.kv.data(), h, w.kv_a, d.T);
  for (int64_t t = 0; t < d.T; ++t)
    kernels::rmsnorm(st.kv.data() + t * d.cw, st.kv.data() + t * d.cw, w.kv_a_norm.data<float>(), 1,
                     d.r, kMlaLatentNormEps);
  mla_rope_tail(st.kv.data(), b.positions.data(), d.T, 1, d.cw, d.r, d.dr, inv_freq,
                c.mla.rope_interleave, rope_magnitude(c), st.rope_tmp);
  const kernels::PagedKv kv = cache.layer(layer);
  kernels::kv_write(kv, st.kv.data(), st.kv.data(), b.slots.data(), d.T);

  const float scale = attention_scale(c);
  st.attn.resize(static_cast<size_t>(d.T * d.H * d.dv));
  bool all_absorbed = true;
  for (int s = 0; s < b.num_seqs(); ++s) all_absorbed = all_absorbed && use_absorbed(st.mode, b, s);
  const float* kvb =
      all_absorbed || st.mode != MlaMode::kExpanded ? kv_b_f32(st, layer, w.kv_b) : nullptr;
  kernels::AttentionBatch ab;
  ab.block_table = b.block_table.data();
  ab.max_blocks_per_seq = b.max_blocks_per_seq;
  if (all_absorbed) {  // one call for the whole batch (decode steps)
    ab.num_seqs = b.num_seqs();
    ab.query_start = b.query_start.data();
    ab.context_len = b.context_len.data();
    absorbed(pool, st.attn.data(), st.q.data(), d.T, d, kv, ab, kvb, scale, st);
  } else {
    for (int s = 0; s < b.num_seqs(); ++s) {
      if (!use_absorbed(st.mode, b, s)) {
        expanded(pool, st.attn.data(), st.q.data(), b, s, d, kv, w.kv_b, scale, st);
        continue;
      }
      const int32_t q0 = b.query_start[static_cast<size_t>(s)];
      const int32_t qs[2] = {0, b.query_start[static_cast<size_t>(s) + 1] - q0};
      ab.num_seqs = 1;
      ab.query_start = qs;
      ab.context_len = &b.context_len[static_cast<size_t>(s)];
      ab.block_table = &b.block_table[static_cast<size_t>(s) * b.max_blocks_per_seq];
      absorbed(pool, st.attn.data() + q0 * d.H * d.dv, st.q.data() + q0 * d.H * d.qk, qs[1], d, kv,
               ab, kvb, scale, st);
    }
  }
  kernels::linear(pool, x, st.attn.data(), wo, d.T, nullptr, /*accumulate=*/true);
}

}  // namespace lmstack::model
