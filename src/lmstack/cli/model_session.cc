// Shared model-command plumbing (see model_session.h).
#include "lmstack/cli/model_session.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "lmstack/calc/model_shape.h"
#include "lmstack/calc/params.h"
#include "lmstack/calc/predict.h"
#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/log.h"
#include "lmstack/core/machine_cache.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/kv_cache.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/moe.h"
#include "lmstack/model/repack.h"
#include "lmstack/tokenizer/chat_template.h"

namespace lmstack::cli {

std::string default_model_dir() {
  if (const char* env = std::getenv("LMSTACK_DEFAULT_MODEL")) return env;
#ifdef LMSTACK_SOURCE_DIR
  const std::string in_tree = std::string(LMSTACK_SOURCE_DIR) + "/models/default";
  if (file_exists(in_tree + "/config.json")) return in_tree;
#endif
  return "";
}

void add_model_option(CLI::App& app, std::string& model_dir) {
  app.add_option("-m,--model", model_dir,
                 "Hugging Face model directory (default: the built-in model, if present)");
}

void add_kv_dtype_option(CLI::App& app, std::string& kv_dtype) {
  app.add_option("--kv-dtype", kv_dtype,
                 "KV cache element type: f32, bf16 (half the bytes) or int8 (a quarter, plus one "
                 "f32 scale per token per kv head)")
      ->check(CLI::IsMember({"f32", "bf16", "int8"}))
      ->capture_default_str();
}

ModelSession load_session(const std::string& dir_arg) {
  const std::string dir = dir_arg.empty() ? default_model_dir() : dir_arg;
  if (dir.empty())
    throw_error<RequestError>("no --model given and no built-in default model is installed");
  ModelSession s{model::load_model_dir(dir), tokenizer::Tokenizer::load(dir), {}};
  for (int id : s.model.config.eos_token_ids) s.eos_ids.push_back(id);
  const Json& gen = s.model.generation_config;
  if (gen.is_object() && gen.contains("eos_token_id")) {
    const Json& e = gen["eos_token_id"];
    if (e.is_number_integer()) s.eos_ids.push_back(e.get<int32_t>());
    if (e.is_array())
      for (const Json& v : e) s.eos_ids.push_back(v.get<int32_t>());
  }
  if (auto id = s.tokenizer.eos_id()) s.eos_ids.push_back(*id);
  std::sort(s.eos_ids.begin(), s.eos_ids.end());
  s.eos_ids.erase(std::unique(s.eos_ids.begin(), s.eos_ids.end()), s.eos_ids.end());
  return s;
}

void repack_for_decode(ModelSession& s, ThreadPool& pool) {
  const char* env = std::getenv("LMSTACK_REPACK");
  if (env && std::string(env) == "0") return;
  const model::RepackStats st = model::repack_for_decode(s.model.weights, pool);
  if (st.tensors > 0)
    log_debug("repacked {} q4_0 / q4_K / q6_K matrices ({} MiB) for the decode GEMV", st.tensors,
              st.bytes >> 20);
}

std::vector<int32_t> encode_prompt(const ModelSession& s, const std::string& text, bool chat) {
  using tokenizer::SpecialMode;
  if (!chat) {
    std::vector<int32_t> ids;
    if (s.tokenizer.add_bos_token())
      if (auto bos = s.tokenizer.bos_id()) ids.push_back(*bos);
    const auto body = s.tokenizer.encode(text, SpecialMode::kAllow);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
  }
  if (tokenizer::chat_template_for(s.tokenizer, false).empty())
    throw_error<ConfigError>("{}: the model has no chat_template (tokenizer_config.json)",
                             s.model.path);
  const auto tmpl =
      tokenizer::ChatTemplate::parse(tokenizer::chat_template_for(s.tokenizer, false));
  const Json messages = Json::array({{{"role", "user"}, {"content", text}}});
  const std::string rendered = tokenizer::render_chat(tmpl, messages, true, s.tokenizer.bos_token(),
                                                      s.tokenizer.eos_token());
  // The template already wrote BOS where the model wants it.
  return s.tokenizer.encode(rendered, SpecialMode::kAllow);
}

MachineReport machine_report(const std::string& machine_file, int threads) {
  if (!machine_file.empty())
    return machine_report_from_json(read_json_file(machine_file), machine_file);
  return cached_or_probed_machine(threads);
}

namespace {

double all_expert_bytes(const model::ModelWeights& w) {
  double b = 0;
  for (const model::LayerWeights& l : w.layers)
    if (l.moe)
      for (size_t e = 0; e < l.moe->w_gate.size(); ++e)
        b += static_cast<double>(l.moe->expert_bytes(static_cast<int>(e)));
  return b;
}

}  // namespace

DecodeTraffic decode_traffic(const model::ModelConfig& c, const model::ModelWeights& w,
                             double context, double batch, double expert_bytes, DType kv_dtype) {
  DecodeTraffic t;
  // All weights except the embedding table (only B rows of it are read), unless it doubles
  // as the lm_head (tied), which reads it whole.
  t.weight_bytes = static_cast<double>(w.bytes());
  // An explicit lm_head (untied, or a quantized model's own) leaves the embedding gathered.
  if (w.lm_head.raw_data() != w.embed.raw_data())
    t.weight_bytes -= static_cast<double>(w.embed.nbytes());
  if (w.pos_embed.defined()) t.weight_bytes -= static_cast<double>(w.pos_embed.nbytes());
  if (c.moe.enabled()) {
    const double all = all_expert_bytes(w), e = c.moe.num_experts;
    t.weight_bytes -= all;
    t.weight_bytes += expert_bytes >= 0
                          ? expert_bytes
                          : all * calc::expected_experts_touched(e, c.moe.top_k, batch) / e;
  }
  t.kv_bytes = static_cast<double>(model::KvCache::bytes_per_token(c, kv_dtype)) * context * batch;
  return t;
}

namespace {

double bytes_per_weight(DType t) {
  const DTypeInfo& info = dtype_info(t);
  return static_cast<double>(info.block_bytes) / info.block_size;
}

// Bytes per parameter of calc part `key`, from the loaded tensors it counts.
// MoE and MLA parts, priced at the dtype of a tensor they count (quantize may leave a narrow
// matrix such as q_b_proj unquantized while the experts are); 0 for other keys.
double moe_mla_part_bytes(const std::string& key, const model::ModelWeights& w) {
  for (const model::LayerWeights& l : w.layers) {
    const Tensor* t = nullptr;
    if (l.moe && key == "experts") t = &l.moe->w_up[0];
    if (l.moe && key == "shared_experts") t = &l.moe->shared_up;
    if (l.mla && key == "attn_kv_a") t = &l.mla->kv_a;
    if (l.mla && key == "attn_kv_b") t = &l.mla->kv_b;
    if (t != nullptr && t->defined()) return bytes_per_weight(t->dtype());
  }
  return 0;
}

double part_bytes_per_weight(const std::string& key, const model::ModelWeights& w) {
  const model::LayerWeights& l = w.layers.front();
  const DType small = is_quantized(l.wq.dtype()) ? DType::kF32 : l.wq.dtype();
  const std::map<std::string, const Tensor*> single = {
      {"embedding", &w.embed}, {"position", &w.pos_embed}, {"attn_q", &l.wq},
      {"attn_k", &l.wk},       {"attn_v", &l.wv},          {"attn_o", &l.wo},
      {"lm_head", &w.lm_head}};
  if (auto it = single.find(key); it != single.end() && it->second->defined())
    return bytes_per_weight(it->second->dtype());
  if (key == "router") return 4.0;  // MoE routers are held in f32 whatever the stored dtype
  if (const double b = moe_mla_part_bytes(key, w); b > 0) return b;
  if (key == "mlp") {  // gate, up, down (or fc, proj): equal sizes, possibly different types
    const model::LayerWeights* dense = &l;  // MoE models: a dense layer need not be the first
    for (const model::LayerWeights& d : w.layers)
      if (d.w_up.defined()) {
        dense = &d;
        break;
      }
    double sum = 0;
    int n = 0;
    for (const Tensor* t : {&dense->w_gate, &dense->w_up, &dense->w_down})
      if (t->defined()) sum += bytes_per_weight(t->dtype()), ++n;
    return sum / std::max(n, 1);
  }
  return bytes_per_weight(key == "norms" ? small : l.wq.dtype());
}

}  // namespace

double predicted_weight_bytes(const model::ModelConfig& c, const model::ModelWeights& w,
                              const std::string& source) {
  const calc::ModelShape shape = calc::ModelShape::from_hf_config(c.to_json(), source);
  if (w.layers.empty()) return 0;
  double total = 0;
  for (const calc::ParamPart& p : calc::count_parameters(shape).parts)
    total += static_cast<double>(p.total) * part_bytes_per_weight(p.key, w);
  return total;
}

double predicted_decode_weight_bytes(const model::ModelConfig& c, const model::ModelWeights& w,
                                     const std::string& source) {
  const calc::ModelShape shape = calc::ModelShape::from_hf_config(c.to_json(), source);
  if (w.layers.empty()) return 0;
  double total = 0;
  for (const calc::ParamPart& p : calc::count_parameters(shape).parts) {
    if (p.key == "embedding" && !shape.tied_embeddings) continue;  // gathered, not read whole
    if (p.key == "position") continue;
    total += static_cast<double>(p.key == "experts" ? p.active : p.total) *
             part_bytes_per_weight(p.key, w);
  }
  return total;
}

double forward_flops_per_token(const model::ModelConfig& c, double context) {
  const double C = c.hidden_size, F = c.intermediate_size;
  const double attn_mats = C * c.q_dim() * 2 + C * c.kv_dim() * 2;
  const double mlp_mats = (c.mlp == model::MlpKind::kSwiGlu ? 3 : 2) * C * F;
  const double matmul_params = c.num_layers * (attn_mats + mlp_mats) + C * c.vocab_size;
  return 2 * matmul_params + 4.0 * c.num_layers * c.q_dim() * context;
}

}  // namespace lmstack::cli
