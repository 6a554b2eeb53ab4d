// Whole-tensor checkpoints of a model-parallel run (see model_parallel_checkpoint.h).
#include "lmstack/train/model_parallel_checkpoint.h"

#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/train/sharded_checkpoint.h"

namespace lmstack::train {
namespace {

// Places this rank's slice `local` of tensor `name` into the whole tensor `full` [rows, cols].
void place_slice(const std::string& name, const float* local, float* full, const Shape& shape,
                 const TpLayout& t, int head_dim) {
  const int64_t rows = shape[0], cols = shape.rank() == 2 ? shape[1] : 1;
  const TpSplit split = tp_split_of(name);
  const auto [b, e] = tp_range(name, split == TpSplit::kCols ? cols : rows, t, head_dim);
  if (split == TpSplit::kCols) {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(full + r * cols + b, local + r * (e - b),
                  static_cast<size_t>(e - b) * sizeof(float));
  } else {
    std::memcpy(full + b * cols, local, static_cast<size_t>((e - b) * cols) * sizeof(float));
  }
}

// The whole tensor `name` of state `kind` (0 weights, 1 m, 2 v) on every rank.
std::vector<float> gather_tensor(ModelParallel& mp, const std::string& name, const Shape& shape,
                                 int kind, int head_dim, const TpLayout& t) {
  std::vector<float> full(static_cast<size_t>(shape.numel()), 0.0f);
  std::vector<ParamRef>& params = mp.params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name != name || !mp.owns(params[i])) continue;
    const Tensor& src = kind == 0   ? *params[i].value
                        : kind == 1 ? mp.optimizer().exp_avg()[i]
                                    : mp.optimizer().exp_avg_sq()[i];
    place_slice(name, src.data<float>(), full.data(), shape, t, head_dim);
  }
  mp.mesh().world().all_reduce(full.data(), shape.numel(), DType::kF32);
  return full;
}

}  // namespace

std::string save_model_parallel_checkpoint(const std::string& out_dir, ModelParallel& mp,
                                           const model::ModelConfig& config,
                                           const model::ModelWeights& like,
                                           const TrainerState& state,
                                           const model::ModelDirFiles& files, int keep,
                                           ThreadPool& pool) {
  const bool rank0 = mp.mesh().world().rank() == 0;
  const TpLayout& t = mp.chunks().front()->tp_layout();
  model::ModelWeights whole = like;  // handles; replaced by owned f32 tensors below
  auto fields = weight_fields(whole, config.tie_word_embeddings);
  std::vector<std::vector<float>> m_all, v_all;
  for (auto& [name, tensor] : fields) {
    const Shape shape = tensor->shape();
    std::vector<float> w = gather_tensor(mp, name, shape, 0, config.head_dim, t);
    m_all.push_back(gather_tensor(mp, name, shape, 1, config.head_dim, t));
    v_all.push_back(gather_tensor(mp, name, shape, 2, config.head_dim, t));
    if (rank0) *tensor = Tensor::from_f32(shape, w, MemoryCategory::kWeights);
  }
  std::string dir;
  if (rank0) {
    if (config.tie_word_embeddings) whole.lm_head = whole.embed;
    TrainModel model(config, whole, pool, TrainModelOptions{});
    AdamW opt(model.params(), mp.optimizer().config());
    LMSTACK_CHECK(model.params().size() == fields.size(), "checkpoint: {} params vs {} fields",
                  model.params().size(), fields.size());
    for (size_t i = 0; i < fields.size(); ++i) {
      std::memcpy(opt.exp_avg()[i].raw_data(), m_all[i].data(), m_all[i].size() * sizeof(float));
      std::memcpy(opt.exp_avg_sq()[i].raw_data(), v_all[i].data(), v_all[i].size() * sizeof(float));
    }
    opt.set_steps_taken(mp.optimizer().steps_taken());
    dir = save_checkpoint(out_dir, model, opt, state, files, keep);
  }
  mp.mesh().world().barrier();
  return dir;
}

void load_model_parallel_optimizer(const std::string& dir, ModelParallel& mp,
                                   const model::ModelWeights& like) {
  const CheckpointReader reader(dir);
  const TpLayout& t = mp.chunks().front()->tp_layout();
  std::vector<ParamRef>& params = mp.params();
  const int head_dim = reader.config().head_dim;
  model::ModelWeights shapes = like;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor* whole = weight_field(shapes, params[i].name);
    LMSTACK_CHECK(whole && whole->defined(), "no tensor {} in the model", params[i].name);
    for (int kind = 1; kind <= 2; ++kind) {
      std::vector<float> all(static_cast<size_t>(whole->numel()));
      reader.read(kind == 1 ? StateKind::kExpAvg : StateKind::kExpAvgSq, params[i].name, 0,
                  whole->numel(), all.data());
      const Tensor slice =
          tp_slice(params[i].name, Tensor::from_f32(whole->shape(), all), t, head_dim);
      Tensor& dst = kind == 1 ? mp.optimizer().exp_avg()[i] : mp.optimizer().exp_avg_sq()[i];
      std::memcpy(dst.raw_data(), slice.raw_data(), static_cast<size_t>(slice.nbytes()));
    }
  }
  const std::string path = path_join(dir, "trainer_state.json");
  mp.optimizer().set_steps_taken(require<int64_t>(read_json_file(path), "optimizer_steps", path));
}

}  // namespace lmstack::train
