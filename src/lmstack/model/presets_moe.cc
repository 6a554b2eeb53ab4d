// init-model presets for the mixture-of-experts and latent-attention families (see presets.h):
// real shapes from each checkpoint's config.json on the Hugging Face Hub (named in `source`)
// and tiny test shapes (DeepSeek-V2-Lite with its YaRN RoPE scaling, as the checkpoint).
#include "lmstack/model/presets_internal.h"

namespace lmstack::model::detail {
namespace {

Json mixtral(int vocab, int hidden, int inter, int layers, int heads, int kv, int experts, int k) {
  Json j = llama_like("MixtralForCausalLM", vocab, hidden, inter, layers, heads, kv, 32768, 1e6,
                      1e-5, false);
  j["num_local_experts"] = experts;
  j["num_experts_per_tok"] = k;
  j["sliding_window"] = nullptr;
  return j;
}

Json qwen_moe(const char* cls, int vocab, int hidden, int inter, int layers, int heads, int kv,
              int experts, int k, int moe_inter, int shared_inter) {
  Json j = llama_like(cls, vocab, hidden, inter, layers, heads, kv, 8192, 1e6, 1e-6, false);
  j["num_experts"] = experts;
  j["num_experts_per_tok"] = k;
  j["moe_intermediate_size"] = moe_inter;
  if (shared_inter > 0) j["shared_expert_intermediate_size"] = shared_inter;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = Json::array();
  j["norm_topk_prob"] = false;
  return j;
}

struct DeepSeekShape {
  int vocab, hidden, inter, moe_inter, layers, heads, experts, shared, k, first_dense;
  int q_lora, kv_lora, nope, rope, v;
};

Json deepseek(const char* cls, const DeepSeekShape& d) {
  Json j = llama_like(cls, d.vocab, d.hidden, d.inter, d.layers, d.heads, d.heads, 4096, 10000.0,
                      1e-6, false);
  j["moe_intermediate_size"] = d.moe_inter;
  j["n_routed_experts"] = d.experts;
  j["n_shared_experts"] = d.shared;
  j["num_experts_per_tok"] = d.k;
  j["first_k_dense_replace"] = d.first_dense;
  j["q_lora_rank"] = d.q_lora > 0 ? Json(d.q_lora) : Json(nullptr);
  j["kv_lora_rank"] = d.kv_lora;
  j["qk_nope_head_dim"] = d.nope;
  j["qk_rope_head_dim"] = d.rope;
  j["v_head_dim"] = d.v;
  j["routed_scaling_factor"] = 1.0;
  j["n_group"] = 1;
  j["topk_group"] = 1;
  return j;
}

}  // namespace

void append_moe_presets(std::vector<ModelPreset>& p) {
  p.push_back({"qwen1.5-moe-a2.7b", "qwen2_moe", "Qwen/Qwen1.5-MoE-A2.7B",
               qwen_moe("Qwen2MoeForCausalLM", 151936, 2048, 5632, 24, 16, 16, 60, 4, 1408, 5632)});
  Json lite = deepseek("DeepseekV2ForCausalLM",
                       {102400, 2048, 10944, 1408, 27, 16, 64, 2, 6, 1, 0, 512, 128, 64, 128});
  lite["max_position_embeddings"] = 163840;
  lite["topk_method"] = "greedy";
  lite["rope_scaling"] = {{"type", "yarn"},
                          {"factor", 40},
                          {"beta_fast", 32},
                          {"beta_slow", 1},
                          {"mscale", 0.707},
                          {"mscale_all_dim", 0.707},
                          {"original_max_position_embeddings", 4096}};
  p.push_back({"deepseek-v2-lite", "deepseek_v2", "deepseek-ai/DeepSeek-V2-Lite", lite});
  // Tiny test models (vocab 512 >= init-model's byte-level tokenizer).
  p.push_back({"tiny-mixtral", "mixtral", "test (Mixtral-8x7B scaled down: top-2 of 8, GQA 4/2)",
               mixtral(512, 64, 128, 2, 4, 2, 8, 2)});
  Json q2 = qwen_moe("Qwen2MoeForCausalLM", 512, 64, 160, 3, 4, 2, 8, 2, 32, 64);
  q2["mlp_only_layers"] = Json::array({1});
  p.push_back(
      {"tiny-qwen2-moe", "qwen2_moe", "test (top-2 of 8, gated shared expert, layer 1 dense)", q2});
  Json q3 = qwen_moe("Qwen3MoeForCausalLM", 512, 64, 160, 2, 4, 2, 8, 2, 32, 0);
  q3["head_dim"] = 16;
  q3["norm_topk_prob"] = true;
  p.push_back({"tiny-qwen3-moe", "qwen3_moe", "test (top-2 of 8, renormalized, q/k norm)", q3});
  Json v2 =
      deepseek("DeepseekV2ForCausalLM", {512, 64, 160, 32, 3, 4, 8, 1, 2, 1, 0, 32, 16, 8, 16});
  v2["topk_method"] = "group_limited_greedy";
  v2["n_group"] = 4;
  v2["topk_group"] = 2;
  p.push_back({"tiny-deepseek-v2", "deepseek_v2",
               "test (MLA 32+8 latent, first layer dense, group-limited top-2 of 8)", v2});
  Json v3 =
      deepseek("DeepseekV3ForCausalLM", {512, 64, 160, 32, 3, 4, 8, 1, 2, 1, 24, 32, 16, 8, 16});
  v3["n_group"] = 4;
  v3["topk_group"] = 2;
  v3["routed_scaling_factor"] = 2.5;
  p.push_back({"tiny-deepseek-v3", "deepseek_v3",
               "test (MLA with q latent, sigmoid router with bias, top-2 of 8)", v3});
}

}  // namespace lmstack::model::detail
