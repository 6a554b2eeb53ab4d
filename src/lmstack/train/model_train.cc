// TrainModel's set-up, parameters and the top of the forward/backward (embedding, final norm,
// lm_head and the fused cross-entropy); the per-layer blocks are in model_train_layer.cc. The
// loss is the mean token cross-entropy; the backward walks the graph of decoder.cc in reverse.
#include "lmstack/train/model_train.h"

#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/moe.h"
#include "lmstack/model/rope_scaling.h"
#include "lmstack/train/backward/backward.h"
#include "lmstack/train/mla_train.h"
#include "lmstack/train/model_train_buffers.h"
#include "lmstack/train/moe_train.h"

namespace lmstack::train {
namespace {

Tensor owned_f32(const Tensor& t, MemoryCategory category) {
  Tensor out = Tensor::zeros(t.shape(), DType::kF32, category);
  float* dst = out.data<float>();
  const int64_t n = t.numel();
  if (t.dtype() == DType::kF32)
    std::memcpy(dst, t.data<float>(), static_cast<size_t>(n) * sizeof(float));
  else if (t.dtype() == DType::kBF16)
    convert_bf16_to_f32(t.data<uint16_t>(), dst, n);
  else if (t.dtype() == DType::kF16)
    convert_f16_to_f32(t.data<uint16_t>(), dst, n);
  else
    throw_error<ConfigError>("cannot train a weight stored as {}", dtype_name(t.dtype()));
  return out;
}

}  // namespace

namespace {

// A sparse layer's fields: "router", "score_bias", "experts.<e>.w_gate|w_up|w_down",
// "shared.w_gate|w_up|w_down", "shared_expert_gate" (each under "layers.<i>.moe.").
template <class F>
void for_each_moe_field(model::MoeLayerWeights& m, const std::string& p, F&& f) {
  f(p + "router", m.router);
  f(p + "score_bias", m.score_bias);
  for (size_t e = 0; e < m.w_gate.size(); ++e) {
    const std::string x = p + "experts." + std::to_string(e) + ".";
    f(x + "w_gate", m.w_gate[e]);
    f(x + "w_up", m.w_up[e]);
    f(x + "w_down", m.w_down[e]);
  }
  f(p + "shared.w_gate", m.shared_gate);
  f(p + "shared.w_up", m.shared_up);
  f(p + "shared.w_down", m.shared_down);
  f(p + "shared_expert_gate", m.shared_expert_gate);
}

// Calls f(name, field) for every field of `w`, defined or not, in forward order; lm_head last.
template <class F>
void for_each_field(model::ModelWeights& w, F&& f) {
  f("embed", w.embed);
  f("pos_embed", w.pos_embed);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    model::LayerWeights& l = w.layers[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    std::pair<const char*, Tensor*> fields[] = {{"attn_norm", &l.attn_norm},
                                                {"attn_norm_bias", &l.attn_norm_bias},
                                                {"wq", &l.wq},
                                                {"wk", &l.wk},
                                                {"wv", &l.wv},
                                                {"wo", &l.wo},
                                                {"bq", &l.bq},
                                                {"bk", &l.bk},
                                                {"bv", &l.bv},
                                                {"bo", &l.bo},
                                                {"q_norm", &l.q_norm},
                                                {"k_norm", &l.k_norm},
                                                {"mlp_norm", &l.mlp_norm},
                                                {"mlp_norm_bias", &l.mlp_norm_bias},
                                                {"w_gate", &l.w_gate},
                                                {"w_up", &l.w_up},
                                                {"w_down", &l.w_down},
                                                {"b_up", &l.b_up},
                                                {"b_down", &l.b_down}};
    for (auto& [name, t] : fields) f(p + name, *t);
    if (l.mla) {  // DeepSeek MLA (model/mla.h); wq is q_proj or q_b_proj, wo o_proj
      model::MlaLayerWeights& a = *l.mla;
      std::pair<const char*, Tensor*> mla[] = {{"q_a", &a.q_a},
                                               {"q_a_norm", &a.q_a_norm},
                                               {"kv_a", &a.kv_a},
                                               {"kv_a_norm", &a.kv_a_norm},
                                               {"kv_b", &a.kv_b}};
      for (auto& [name, t] : mla) f(p + name, *t);
    }
    if (l.moe) for_each_moe_field(*l.moe, p + "moe.", f);
  }
  f("final_norm", w.final_norm);
  f("final_norm_bias", w.final_norm_bias);
  f("lm_head", w.lm_head);
}

}  // namespace

std::vector<std::pair<std::string, Tensor*>> weight_fields(model::ModelWeights& w, bool tied) {
  std::vector<std::pair<std::string, Tensor*>> out;
  for_each_field(w, [&](const std::string& name, Tensor& t) {
    if (t.defined() && !(tied && name == "lm_head")) out.emplace_back(name, &t);
  });
  return out;
}

Tensor* weight_field(model::ModelWeights& w, const std::string& name) {
  Tensor* found = nullptr;
  for_each_field(w, [&](const std::string& n, Tensor& t) {
    if (n == name) found = &t;
  });
  return found;
}

model::ModelWeights weight_skeleton(const model::ModelConfig& config) {
  model::ModelWeights w;
  w.layers.resize(static_cast<size_t>(config.num_layers));
  const size_t e = static_cast<size_t>(config.moe.num_experts);
  for (int l = 0; l < config.num_layers; ++l) {
    if (config.mla.enabled())  // weight_field finds MLA tensors in a layer's mla block
      w.layers[static_cast<size_t>(l)].mla = std::make_shared<model::MlaLayerWeights>();
    if (!config.moe.is_sparse(l)) continue;
    auto m = std::make_shared<model::MoeLayerWeights>();
    m->w_gate.resize(e), m->w_up.resize(e), m->w_down.resize(e);
    w.layers[static_cast<size_t>(l)].moe = std::move(m);
  }
  return w;
}

int param_group(const std::string& name, int num_layers) {
  if (name == "embed" || name == "pos_embed") return 0;
  if (name.rfind("layers.", 0) == 0) return std::stoi(name.substr(7)) + 1;
  return num_layers + 1;
}

TrainModel::TrainModel(const model::ModelConfig& config, const model::ModelWeights& init,
                       ThreadPool& pool, TrainModelOptions options)
    : config_(config), pool_(pool), options_(options) {
  if (config.mla.enabled()) check_mla_trainable(config);
  const bool tied = config.tie_word_embeddings;
  model::ModelWeights src = init;  // handles only
  master_ = init;
  grads_ = init;
  auto src_fields = weight_fields(src, tied);
  auto master_fields = weight_fields(master_, tied);
  auto grad_fields = weight_fields(grads_, tied);
  for (size_t i = 0; i < src_fields.size(); ++i) {
    const Tensor& s = *src_fields[i].second;
    *master_fields[i].second = owned_f32(s, MemoryCategory::kWeights);
    *grad_fields[i].second = Tensor::zeros(s.shape(), DType::kF32, MemoryCategory::kGradients);
    params_.push_back(
        {master_fields[i].first, master_fields[i].second, grad_fields[i].second, s.rank() == 2});
  }
  if (tied) {  // one storage: lm_head's gradient lands in embed's
    master_.lm_head = master_.embed;
    grads_.lm_head = grads_.embed;
  }
  compute_ = master_;
  sync_compute_weights();
  if (!config.learned_positions) {
    inv_freq_ = model::rope_inv_freq(config);
  }
}

TrainModel::~TrainModel() = default;

void TrainModel::sync_compute_weights() {
  if (options_.compute_dtype == DType::kF32) return;
  LMSTACK_CHECK(options_.compute_dtype == DType::kBF16, "compute dtype {}",
                dtype_name(options_.compute_dtype));
  const bool tied = config_.tie_word_embeddings;
  auto master = weight_fields(master_, tied);
  auto compute = weight_fields(compute_, tied);
  for (size_t i = 0; i < master.size(); ++i) {
    const Tensor& m = *master[i].second;
    if (m.rank() != 2) continue;  // norms and biases stay f32
    Tensor& c = *compute[i].second;
    if (c.dtype() != DType::kBF16) c = Tensor::zeros(m.shape(), DType::kBF16);
    convert_f32_to_bf16(m.data<float>(), c.data<uint16_t>(), m.numel());
  }
  if (tied) compute_.lm_head = compute_.embed;
}

int64_t TrainModel::num_parameters() const {
  int64_t n = 0;
  for (const ParamRef& p : params_) n += p.value->numel();
  return n;
}

int64_t TrainModel::activation_bytes() const {
  return (buf_ ? buf_->bytes() : 0) + (moe_runner_ ? moe_runner_->bytes() : 0);
}

void TrainModel::bind_param(size_t index, Tensor value, Tensor grad) {
  ParamRef& p = params_.at(index);
  LMSTACK_CHECK(!value.defined() || !grad.defined() || value.shape() == grad.shape(),
                "bind {}: value {} vs grad {}", p.name, value.shape().str(), grad.shape().str());
  *p.value = std::move(value);
  *p.grad = std::move(grad);
  const bool f32 = options_.compute_dtype == DType::kF32;
  if (f32) *weight_field(compute_, p.name) = *p.value;
  if (p.name == "embed" && config_.tie_word_embeddings) {
    master_.lm_head = master_.embed;
    grads_.lm_head = grads_.embed;
    if (f32) compute_.lm_head = compute_.embed;
  }
}

void TrainModel::zero_grads() {
  for (ParamRef& p : params_)
    std::memset(p.grad->raw_data(), 0, static_cast<size_t>(p.grad->nbytes()));
}

void TrainModel::forward(const int32_t* inputs, int batch, int seq, bool logits) {
  const model::ModelConfig& c = config_;
  if (c.learned_positions && seq > c.max_position)
    throw_error<RequestError>("sequence length {} exceeds the model's {} learned positions", seq,
                              c.max_position);
  ensure_buffers(batch, seq);
  Buffers& b = *buf_;
  const int64_t n = static_cast<int64_t>(batch) * seq;
  const int head = c.num_layers + 1;
  hook(&TrainHooks::before_forward, 0);
  float* x0 = fptr(b.inputs[0]);
  kernels::embedding_lookup(x0, compute_.embed, inputs, n);
  if (c.learned_positions) {
    std::vector<float> pos(static_cast<size_t>(n * c.hidden_size));
    kernels::embedding_lookup(pos.data(), compute_.pos_embed, b.positions.data(), n);
    kernels::add_inplace(x0, pos.data(), n * c.hidden_size);
  }
  hook(&TrainHooks::after_forward, 0);
  for (int l = 0; l < c.num_layers; ++l) {
    hook(&TrainHooks::before_forward, l + 1);
    layer_forward(l, batch, seq);
    hook(&TrainHooks::after_forward, l + 1);
  }
  hook(&TrainHooks::before_forward, head);
  norm_forward(fptr(b.nf), fptr(b.nf_mean), fptr(b.nf_rstd), fptr(b.inputs.back()),
               master_.final_norm, master_.final_norm_bias, n);
  if (logits) {
    if (b.logits.size() == 0)
      b.logits = HostBuffer(static_cast<size_t>(n * c.vocab_size) * sizeof(float),
                            MemoryCategory::kActivations);
    train::linear_forward(pool_, fptr(b.logits), fptr(b.nf), compute_.lm_head, n);
  }
  hook(&TrainHooks::after_forward, head);
}

double TrainModel::forward_backward(const int32_t* inputs, const int32_t* targets, int batch,
                                    int seq, float grad_scale) {
  forward(inputs, batch, seq, false);
  const int64_t n = static_cast<int64_t>(batch) * seq;
  // The aux loss enters the objective as coef · aux per micro-batch, next to the mean CE:
  // grad_scale · n is the weight the mean CE has (transformers: loss += coef · aux_loss).
  prepare_moe_aux(options_.moe_aux_loss_coef * grad_scale * static_cast<double>(n));
  return backward(inputs, targets, grad_scale) / static_cast<double>(n);
}

double TrainModel::forward_backward_logits(const int32_t* inputs, int batch, int seq,
                                           const std::function<double(float* logits)>& loss_grad) {
  forward(inputs, batch, seq, true);
  const double loss = loss_grad(fptr(buf_->logits));
  prepare_moe_aux(0);
  backward(inputs, nullptr, 0.0f);
  return loss;
}

const float* TrainModel::final_hidden() const { return buf_ ? fptr(buf_->nf) : nullptr; }

double TrainModel::evaluate(const int32_t* inputs, const int32_t* targets, int batch, int seq) {
  forward(inputs, batch, seq, true);
  const int64_t n = static_cast<int64_t>(batch) * seq;
  return cross_entropy_loss(fptr(buf_->logits), fptr(buf_->losses), targets, n,
                            config_.vocab_size) /
         static_cast<double>(n);
}

void TrainModel::logits(const int32_t* inputs, int batch, int seq, std::vector<float>& out) {
  forward(inputs, batch, seq, true);
  const size_t count = static_cast<size_t>(batch) * static_cast<size_t>(seq) *
                       static_cast<size_t>(config_.vocab_size);
  out.assign(fptr(buf_->logits), fptr(buf_->logits) + count);
}

// Reverse of forward(): lm_head, final norm, layers L-1..0, embeddings.
double TrainModel::backward(const int32_t* inputs, const int32_t* targets, float grad_scale) {
  const model::ModelConfig& c = config_;
  Buffers& b = *buf_;
  const int64_t n = static_cast<int64_t>(b.batch) * b.seq;
  const size_t row_bytes = static_cast<size_t>(n * c.hidden_size) * sizeof(float);
  const int head = c.num_layers + 1;
  hook(&TrainHooks::before_backward, head);
  std::memset(b.dn.data(), 0, row_bytes);
  const double total = targets ? head_backward(targets, grad_scale) : 0.0;
  if (!targets) {
    Tensor none;
    linear_backward(fptr(b.dn), grads_.lm_head, none, fptr(b.logits), fptr(b.nf), compute_.lm_head,
                    n);
  }
  std::memset(b.dx.data(), 0, row_bytes);
  norm_backward(fptr(b.dx), fptr(b.dn), fptr(b.inputs.back()), master_.final_norm, fptr(b.nf_mean),
                fptr(b.nf_rstd), grads_.final_norm, grads_.final_norm_bias, n);
  hook(&TrainHooks::after_backward, head);
  for (int l = c.num_layers - 1; l >= 0; --l) {
    hook(&TrainHooks::before_backward, l + 1);
    if (options_.recompute) layer_forward(l, b.batch, b.seq);
    layer_backward(l, b.batch, b.seq, fptr(b.dx));
    hook(&TrainHooks::after_backward, l + 1);
  }
  hook(&TrainHooks::before_backward, 0);
  embedding_backward(grads_.embed.data<float>(), fptr(b.dx), inputs, n, c.hidden_size);
  if (c.learned_positions)
    embedding_backward(grads_.pos_embed.data<float>(), fptr(b.dx), b.positions.data(), n,
                       c.hidden_size);
  hook(&TrainHooks::after_backward, 0);
  return total;
}

// lm_head, cross-entropy and their gradients by row chunks (backward/classifier.cc), from the
// final norm's output into b.dn and lm_head's gradient. Returns Σ losses.
double TrainModel::head_backward(const int32_t* targets, float grad_scale) {
  Buffers& b = *buf_;
  const Tensor& w = compute_.lm_head;
  ClassifierArgs args;  // a bf16 w runs bf16 mixed precision (backward.h), reading w directly
  args.x = fptr(b.nf), args.w = w, args.targets = targets;
  if (w.dtype() == DType::kF32) args.w_f32 = w.data<float>();
  args.rows = static_cast<int64_t>(b.batch) * b.seq, args.grad_scale = grad_scale;
  args.chunk = fptr(b.logits_chunk);
  args.chunk_rows =
      static_cast<int64_t>(b.logits_chunk.size() / sizeof(float)) / config_.vocab_size;
  return classifier_forward_backward(pool_, fptr(b.dn), grads_.lm_head.data<float>(),
                                     fptr(b.losses), args);
}

}  // namespace lmstack::train
