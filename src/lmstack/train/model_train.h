// TrainModel: the training forward (saving activations) and the hand-written backward of a
// whole decoder (llama family and GPT-2, every flag of model/config.h, sliding windows included)
// over a dense batch of B sequences × T tokens, with fp32 master weights and gradients. It is
// the training twin of model/decoder.cc (same math, same kernels where they fit; attention
// here is plain causal attention over the batch, not paged), and a checkpoint it writes loads
// in the Decoder with the same logits (tests/train/model_train_test.cc).
// Thread safety: one call at a time per TrainModel; kernels parallelize over the pool.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lmstack/core/memory.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/config.h"
#include "lmstack/model/weights.h"

namespace lmstack::train {

struct MlaTrainLayer;   // train/mla_train.h
class MoeExpertRunner;  // train/moe_train.h

struct TrainModelOptions {
  // kF32: compute on the f32 master weights (parity mode). kBF16: matmuls and embedding
  // lookups read bf16 copies of the matrices, refreshed by sync_compute_weights() after each
  // optimizer step; activations, gradients and master weights are stored f32, and each
  // matmul rounds its activation / gradient operands to bf16 too (kernels::gemm_bf16, as
  // PyTorch autocast; backward/backward.h).
  DType compute_dtype = DType::kF32;
  // true: keep only each layer's input and recompute the layer in the backward (Chen et al.
  // 2016, "full" recomputation): same losses and gradients, activations ~1/L.
  bool recompute = false;
  // MoE models: weight of the load-balancing loss (moe_train.h moe_aux_loss) that
  // forward_backward adds to each micro-batch's objective, as transformers adds
  // router_aux_loss_coef · aux_loss to the loss. 0: none.
  double moe_aux_loss_coef = 0;
};

// A trainable tensor: `name` is lmstack's field name ("layers.0.wq"); decay says whether
// AdamW's weight decay applies (2-D matrices: yes; norms, biases: no).
struct ParamRef {
  std::string name;
  Tensor* value = nullptr;  // f32 master
  Tensor* grad = nullptr;   // f32
  bool decay = false;
};

// Every defined tensor field of `w` with its lmstack name, tied lm_head skipped.
std::vector<std::pair<std::string, Tensor*>> weight_fields(model::ModelWeights& w, bool tied);
// The field named `name` ("layers.3.wq", "embed", ...) of `w`, defined or not; nullptr for an
// unknown name. `w.layers` must already have its entries, and MLA layers their `mla` blocks
// ("layers.3.kv_b", ...: q_a, q_a_norm, kv_a, kv_a_norm, kv_b).
Tensor* weight_field(model::ModelWeights& w, const std::string& name);
// An empty ModelWeights with every field weight_field can name for `config`: num_layers layer
// entries, an MLA struct in each layer of an MLA model, and a MoE struct with num_experts
// expert slots in each sparse layer.
model::ModelWeights weight_skeleton(const model::ModelConfig& config);

// Parameter groups in forward order: 0 = embeddings, 1..L = layer l-1, L+1 = head (final norm
// and lm_head). Data parallelism buckets and ZeRO-3 gathers work group by group.
int param_group(const std::string& name, int num_layers);

// Called by TrainModel around each group's forward and backward, so parallelism can act from
// outside the model (torchtitan's rule: model code never includes dist/): ZeRO-3 gathers a
// group's weights in before_* and frees them in after_*; data parallelism starts a bucket's
// all-reduce in after_backward once the group's gradients are complete. Under --recompute the
// layer's forward runs again inside its backward, between before_backward and after_backward.
class TrainHooks {
 public:
  virtual ~TrainHooks() = default;
  virtual void before_forward(int group) = 0;
  virtual void after_forward(int group) = 0;
  virtual void before_backward(int group) = 0;
  virtual void after_backward(int group) = 0;
};

class TrainModel {
 public:
  // Copies `init` (any float dtype, mapped or owned) into owned f32 master tensors (counted
  // under kWeights) and allocates zeroed f32 gradients (kGradients).
  TrainModel(const model::ModelConfig& config, const model::ModelWeights& init, ThreadPool& pool,
             TrainModelOptions options);
  ~TrainModel();

  // One micro-batch: inputs and targets are [batch, seq]. Accumulates into the gradients
  // ∂(grad_scale · Σ_tokens loss)/∂θ and returns the mean loss over the batch's tokens.
  // Throws RequestError for a token outside the vocabulary or (GPT-2) seq > max_position.
  double forward_backward(const int32_t* inputs, const int32_t* targets, int batch, int seq,
                          float grad_scale);
  // Any loss over the logits (RL and preference losses, rl/): the forward of inputs
  // [batch, seq], then `loss_grad(logits)` with logits [batch·seq, vocab] row-major, which
  // returns the loss and overwrites logits with ∂loss/∂logits, then the backward (accumulating
  // into the gradients). Returns what loss_grad returned.
  double forward_backward_logits(const int32_t* inputs, int batch, int seq,
                                 const std::function<double(float* logits)>& loss_grad);
  // The final norm's output [batch·seq, hidden] of the last forward (a value head's input);
  // nullptr before any forward. Valid until the next call with another (batch, seq).
  const float* final_hidden() const;
  // Mean loss without gradients.
  double evaluate(const int32_t* inputs, const int32_t* targets, int batch, int seq);
  // Logits of every position, [batch · seq, vocab].
  void logits(const int32_t* inputs, int batch, int seq, std::vector<float>& out);

  void zero_grads();
  // Hooks called around each group (nullptr: none). Not owned.
  void set_hooks(TrainHooks* hooks) { hooks_ = hooks; }
  // Points parameter `index` of params() (and, in f32 mode, its compute view; a tied lm_head
  // follows embed) at `value` and `grad`: views into a data-parallel flat buffer, or undefined
  // tensors while ZeRO-3 holds the weights elsewhere. Shapes must match.
  void bind_param(size_t index, Tensor value, Tensor grad);
  // Who runs the routed experts of the sparse layers (moe_train.h; nullptr: every expert here,
  // which needs every expert's weights). Not owned.
  void set_moe_runner(MoeExpertRunner* runner) { moe_runner_ = runner; }
  // Refreshes the bf16 compute copies from the master weights (no-op in f32 mode).
  void sync_compute_weights();

  std::vector<ParamRef>& params() { return params_; }
  const model::ModelConfig& config() const { return config_; }
  const model::ModelWeights& master() const { return master_; }
  model::ModelWeights& master() { return master_; }
  const model::ModelWeights& grads() const { return grads_; }
  const TrainModelOptions& options() const { return options_; }
  int64_t num_parameters() const;
  // MoE models: the rows each routed expert received in the last forward, [num_layers · E]
  // (zeros for dense layers); empty for dense models.
  const std::vector<int64_t>& expert_tokens() const;
  // The load-balancing loss of the last forward_backward (unweighted by its coefficient; 0
  // without experts).
  double moe_aux_loss() const { return moe_aux_loss_; }
  // Bytes of activation and backward scratch buffers currently allocated.
  int64_t activation_bytes() const;

  struct Buffers;  // activation storage (model_train_layer.cc)

 private:
  void ensure_buffers(int batch, int seq);
  void hook(void (TrainHooks::*call)(int), int group) {
    if (hooks_) (hooks_->*call)(group);
  }
  // logits: also the lm_head product into the full [N, V] buffer (forward_backward leaves
  // the head to the fused classifier in backward instead).
  void forward(const int32_t* inputs, int batch, int seq, bool logits);
  // The aux loss of the last forward and its gradient per router probability, weighted by
  // `coef_scale` (model_train_layer.cc); 0: no aux gradient.
  void prepare_moe_aux(double coef_scale);
  // With targets: the fused classifier (cross-entropy scaled by grad_scale) from the final
  // norm's output, returning Σ losses; without: b.logits holds dL/dlogits, returns 0.
  double backward(const int32_t* inputs, const int32_t* targets, float grad_scale);
  double head_backward(const int32_t* targets, float grad_scale);
  void rope_rows(float* x, int64_t rows, int heads, bool backward);
  void layer_forward(int layer, int batch, int seq);
  const float* dense_attention_forward(int layer, int batch, int seq);
  MlaTrainLayer mla_layer(int layer, int batch, int seq);
  void mla_attention_backward(int layer, int batch, int seq, float* dx);
  void layer_backward(int layer, int batch, int seq, float* dx);
  void attention_backward_block(int layer, int batch, int seq, float* dx);
  void norm_forward(float* y, float* mean, float* rstd, const float* x, const Tensor& w,
                    const Tensor& b, int64_t rows);
  void norm_backward(float* dx, const float* dy, const float* x, const Tensor& w, const float* mean,
                     const float* rstd, Tensor& dw, Tensor& db, int64_t rows);
  void linear_forward(float* y, const float* x, const Tensor& w, const Tensor& b, int64_t rows,
                      bool accumulate);
  void linear_backward(float* dx, Tensor& dw, Tensor& db, const float* dy, const float* x,
                       const Tensor& w, int64_t rows);

  model::ModelConfig config_;
  ThreadPool& pool_;
  TrainModelOptions options_;
  model::ModelWeights master_, grads_, compute_;
  std::vector<ParamRef> params_;
  std::vector<float> inv_freq_;
  std::unique_ptr<Buffers> buf_;
  TrainHooks* hooks_ = nullptr;
  MoeExpertRunner* moe_runner_ = nullptr;
  double moe_aux_loss_ = 0;
};

}  // namespace lmstack::train
