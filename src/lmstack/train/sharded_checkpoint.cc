// Sharded checkpoints and the layout-independent reader (contracts in sharded_checkpoint.h,
// format in docs/formats/checkpoint.md). index.json:
//   {"format": "lmstack.sharded_checkpoint.v1" or ".v2", "world_size": N, "zero": Z,
//    "files": [...],
//    "tensors": {"layers.0.wq": {"shape": [64, 64],
//                                "slices": [[begin, end, file, "u3", offset], ...],
//                                "blocks": [[row_begin, row_end, col_begin, col_end, file,
//                                            "layers.0.wq"], ...]}}}
// a slice (v1, data parallel): elements [begin, end) of the flattened tensor are elements
// [offset, offset + end - begin) of tensors "weights.u3", "exp_avg.u3", "exp_avg_sq.u3" of
// files[file]. A block (v2, tensor/pipeline parallel): rows x columns of the tensor viewed as
// [rows, cols] (1-D: one column) are the whole of tensors "weights.<key>", ... of files[file],
// stored row-major as [row_end - row_begin, col_end - col_begin].
#include "lmstack/train/sharded_checkpoint.h"

#include <fmt/format.h>

#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/safetensors.h"

namespace lmstack::train {
namespace {

constexpr const char* kIndex = "index.json";
constexpr const char* kFormatV1 = "lmstack.sharded_checkpoint.v1";
constexpr const char* kFormatV2 = "lmstack.sharded_checkpoint.v2";
constexpr const char* kKindPrefix[] = {"weights.", "exp_avg.", "exp_avg_sq."};
constexpr const char* kWholeFile[] = {"model.safetensors", "optimizer.exp_avg.safetensors",
                                      "optimizer.exp_avg_sq.safetensors"};

std::string shard_file(int rank, int world) {
  return fmt::format("shard-{:05d}-of-{:05d}.safetensors", rank, world);
}

// One piece of a tensor in the shards: an element range (rows < 0) or a 2-D block.
struct Slice {
  int64_t begin, end;  // elements (a slice) or columns (a block)
  size_t file;
  std::string key;
  int64_t offset;                        // a slice's offset in its stored tensor
  int64_t row_begin = -1, row_end = -1;  // a block's rows
};

// The part of elements [begin, end) of a tensor with `cols` columns inside piece s, as pairs
// (element index in the tensor, index in the piece's stored data) of runs of `n` elements.
template <typename F>
void for_each_run(const Slice& s, int64_t cols, int64_t begin, int64_t end, F f) {
  if (s.row_begin < 0) {
    const int64_t b = std::max(begin, s.begin), e = std::min(end, s.end);
    if (b < e) f(b, s.offset + (b - s.begin), e - b);
    return;
  }
  const int64_t width = s.end - s.begin;
  const int64_t r0 = std::max(s.row_begin, begin / cols), r1 = std::min(s.row_end, end / cols + 1);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = std::max(begin, r * cols + s.begin), e = std::min(end, r * cols + s.end);
    if (b < e) f(b, (r - s.row_begin) * width + (b - r * cols - s.begin), e - b);
  }
}

// The "slices" and "blocks" of tensor entry `t` of the index (either may be absent).
void read_pieces(const Json& t, const std::string& name, const std::string& index, size_t files,
                 std::vector<Slice>& out) {
  auto bad = [&](const char* what) {
    throw_error<FormatError>("{}: tensor '{}': a {} is not [{}]", index, name, what,
                             std::string(what) == "slice"
                                 ? "begin, end, file, key, offset"
                                 : "row_begin, row_end, col_begin, col_end, file, key");
  };
  if (t.contains("slices"))
    for (const Json& s : t["slices"]) {
      if (!s.is_array() || s.size() != 5 || s[2].get<size_t>() >= files) bad("slice");
      out.push_back({s[0].get<int64_t>(), s[1].get<int64_t>(), s[2].get<size_t>(),
                     s[3].get<std::string>(), s[4].get<int64_t>()});
    }
  if (t.contains("blocks"))
    for (const Json& b : t["blocks"]) {
      if (!b.is_array() || b.size() != 6 || b[4].get<size_t>() >= files) bad("block");
      out.push_back({b[2].get<int64_t>(), b[3].get<int64_t>(), b[4].get<size_t>(),
                     b[5].get<std::string>(), 0, b[0].get<int64_t>(), b[1].get<int64_t>()});
    }
}

// FormatError naming the index when a piece lies outside the tensor's shape.
void check_pieces(const std::vector<Slice>& pieces, const Shape& shape, const std::string& name,
                  const std::string& index) {
  const int64_t rows = shape.rank() == 2 ? shape[0] : shape.numel();
  const int64_t cols = shape.rank() == 2 ? shape[1] : 1;
  for (const Slice& s : pieces) {
    const bool block = s.row_begin >= 0;
    const bool ok = block ? s.row_begin < s.row_end && s.row_end <= rows && 0 <= s.begin &&
                                s.begin < s.end && s.end <= cols
                          : 0 <= s.begin && s.begin < s.end && s.end <= shape.numel();
    if (!ok)
      throw_error<FormatError>("{}: tensor '{}' of shape {}: a {} [{}, {}) lies outside it", index,
                               name, shape.str(), block ? "block's columns" : "slice", s.begin,
                               s.end);
  }
}

}  // namespace

struct CheckpointReader::Impl {
  std::string dir;
  // sharded
  std::vector<std::string> files;
  mutable std::vector<std::unique_ptr<model::SafetensorsFile>> open;
  std::map<std::string, std::vector<Slice>> slices;
  // whole tensors, per kind (opened on first use)
  mutable std::map<std::string, Tensor> whole[3];
  mutable bool whole_loaded[3] = {false, false, false};

  // The stored data of piece s (a block's whole tensor, a slice's unit), checked against the
  // index: FormatError naming the shard file when it is not F32 or too small.
  const float* sharded_data(const Slice& s, StateKind kind) const {
    auto& f = open[s.file];
    if (!f) f = std::make_unique<model::SafetensorsFile>(path_join(dir, files[s.file]));
    const std::string name = kKindPrefix[static_cast<int>(kind)] + s.key;
    const Tensor t = f->tensor(name);
    if (t.dtype() != DType::kF32)
      throw_error<FormatError>("{}: tensor '{}' is {}, expected F32", f->path(), name,
                               dtype_name(t.dtype()));
    const int64_t need = s.row_begin < 0 ? s.offset + (s.end - s.begin)
                                         : (s.row_end - s.row_begin) * (s.end - s.begin);
    if (t.numel() < need)
      throw_error<FormatError>("{}: tensor '{}' has {} elements; {} names {}", f->path(), name,
                               t.numel(), path_join(dir, kIndex), need);
    return t.data<float>();  // the mapping outlives the view
  }

  const Tensor& whole_tensor(const model::ModelConfig& config, StateKind kind,
                             const std::string& name) const {
    const int k = static_cast<int>(kind);
    if (!whole_loaded[k]) {
      const std::string path = path_join(dir, kWholeFile[k]);
      model::ModelWeights w = model::load_weights(config, model::SafetensorsSet::open_file(path));
      for (auto& [n, t] : weight_fields(w, config.tie_word_embeddings)) {
        if (t->dtype() != DType::kF32)
          throw_error<FormatError>("{}: '{}' is {}, a training checkpoint holds f32", path, n,
                                   dtype_name(t->dtype()));
        whole[k][n] = *t;
      }
      whole_loaded[k] = true;
    }
    return whole[k].at(name);
  }
};

CheckpointReader::CheckpointReader(const std::string& dir) : impl_(std::make_unique<Impl>()) {
  impl_->dir = dir;
  const std::string cfg = path_join(dir, "config.json");
  config_ = model::ModelConfig::from_json(read_json_file(cfg), cfg);
  const std::string index = path_join(dir, kIndex);
  sharded_ = file_exists(index);
  if (!sharded_) {
    model::ModelWeights w = model::load_model_dir(dir).weights;
    for (auto& [n, t] : weight_fields(w, config_.tie_word_embeddings)) shapes_[n] = t->shape();
    return;
  }
  const Json j = read_json_file(index);
  const std::string format = require<std::string>(j, "format", index);
  if (format != kFormatV1 && format != kFormatV2)
    throw_error<FormatError>("{}: format '{}' is neither {} nor {}", index, format, kFormatV1,
                             kFormatV2);
  world_size_ = require<int>(j, "world_size", index);
  zero_ = require<int>(j, "zero", index);
  impl_->files = require<std::vector<std::string>>(j, "files", index);
  impl_->open.resize(impl_->files.size());
  for (const std::string& f : impl_->files)  // fail alike on every rank, before any step
    if (!file_exists(path_join(dir, f)))
      throw_error<IoError>("{} names shard {}, which is missing", index, path_join(dir, f));
  const Json tensors = require<Json>(j, "tensors", index);
  for (const auto& [name, t] : tensors.items()) {
    shapes_[name] = Shape(require<std::vector<int64_t>>(t, "shape", index));
    read_pieces(t, name, index, impl_->files.size(), impl_->slices[name]);
    check_pieces(impl_->slices[name], shapes_[name], name, index);
  }
}

CheckpointReader::~CheckpointReader() = default;

void CheckpointReader::read(StateKind kind, const std::string& name, int64_t begin, int64_t end,
                            float* out) const {
  if (!shapes_.count(name))
    throw_error<FormatError>("{}: the checkpoint has no tensor '{}'", impl_->dir, name);
  if (!sharded_) {
    const Tensor& t = impl_->whole_tensor(config_, kind, name);
    std::memcpy(out, t.data<float>() + begin, static_cast<size_t>(end - begin) * sizeof(float));
    return;
  }
  const Shape& shape = shapes_.at(name);
  const int64_t cols = shape.rank() == 2 ? shape[1] : 1;
  int64_t copied = 0;
  for (const Slice& s : impl_->slices.at(name)) {
    const float* data = nullptr;  // opened only when the piece overlaps
    for_each_run(s, cols, begin, end, [&](int64_t at, int64_t from, int64_t n) {
      if (!data) data = impl_->sharded_data(s, kind);
      std::memcpy(out + (at - begin), data + from, static_cast<size_t>(n) * sizeof(float));
      copied += n;
    });
  }
  if (copied != end - begin)
    throw_error<FormatError>(
        "{}: elements [{}, {}) of '{}' are not each in exactly one shard piece",
        path_join(impl_->dir, kIndex), begin, end, name);
}

void CheckpointReader::read_block(StateKind kind, const std::string& name, int64_t row_begin,
                                  int64_t row_end, int64_t col_begin, int64_t col_end,
                                  float* out) const {
  if (!shapes_.count(name))
    throw_error<FormatError>("{}: the checkpoint has no tensor '{}'", impl_->dir, name);
  const Shape& shape = shapes_.at(name);
  const int64_t cols = shape.rank() == 2 ? shape[1] : 1, width = col_end - col_begin;
  for (int64_t r = row_begin; r < row_end; ++r)
    read(kind, name, r * cols + col_begin, r * cols + col_end, out + (r - row_begin) * width);
}

model::ModelWeights CheckpointReader::full_weights(StateKind kind) const {
  model::ModelWeights w = weight_skeleton(config_);
  const MemoryCategory cat =
      kind == StateKind::kWeights ? MemoryCategory::kWeights : MemoryCategory::kOptimizer;
  for (const auto& [name, shape] : shapes_) {
    Tensor* field = weight_field(w, name);
    if (!field) throw_error<FormatError>("{}: unknown tensor '{}'", impl_->dir, name);
    *field = Tensor::zeros(shape, DType::kF32, cat);
    read(kind, name, 0, shape.numel(), field->data<float>());
  }
  if (config_.tie_word_embeddings) w.lm_head = w.embed;
  return w;
}

namespace {

// index.json of a layout: computed alike by every rank, written by rank 0.
Json index_json(const FlatLayout& layout, int zero) {
  Json tensors = Json::object();
  std::vector<std::string> files;
  for (int r = 0; r < layout.world; ++r) files.push_back(shard_file(r, layout.world));
  for (size_t u = 0; u < layout.units.size(); ++u) {
    const FlatUnit& fu = layout.units[u];
    for (const FlatParam& p : fu.params)
      if (!tensors.contains(p.name))
        tensors[p.name] = {{"shape", p.shape.to_vector()}, {"slices", Json::array()}};
    for (int r = 0; r < layout.world; ++r)
      for (const ParamSlice& s : params_in_range(fu, r * fu.chunk, (r + 1) * fu.chunk))
        tensors[s.param->name]["slices"].push_back(
            Json::array({s.begin, s.end, r, fmt::format("u{}", u), s.unit_offset - r * fu.chunk}));
  }
  return {{"format", kFormatV1},
          {"world_size", layout.world},
          {"zero", zero},
          {"files", files},
          {"tensors", tensors}};
}

Tensor chunk_copy(const float* src, int64_t n) {
  Tensor t = Tensor::zeros(Shape{n}, DType::kF32, MemoryCategory::kBuffers);
  std::memcpy(t.raw_data(), src, static_cast<size_t>(n) * sizeof(float));
  return t;
}

}  // namespace

std::string shard_file_name(int rank, int world) { return shard_file(rank, world); }

std::pair<std::string, std::string> new_sharded_checkpoint_dir(const std::string& out_dir,
                                                               int64_t step, dist::Comm& comm,
                                                               const std::string& suffix) {
  const std::string rel = "checkpoints/" + checkpoint_step_name(step);
  int32_t exists =
      comm.rank() == 0 && file_exists(path_join(path_join(out_dir, rel), kIndex)) ? 1 : 0;
  comm.broadcast(&exists, 1, DType::kI32, 0);  // every rank must pick the same directory
  const std::string name = exists ? rel + suffix : rel;
  const std::string dir = path_join(out_dir, name);
  make_directories(dir);
  return {name, dir};
}

void commit_sharded_checkpoint(const std::string& out_dir, const std::string& name,
                               const model::ModelConfig& config, const model::ModelDirFiles& files,
                               const Json& index, const TrainerState& state, const Json& layout,
                               int keep) {
  const std::string dir = path_join(out_dir, name);
  model::write_model_files(dir, config, files);
  write_file_atomic(path_join(dir, kIndex), index.dump(1) + "\n");
  Json j = {{"format", "lmstack.checkpoint.v1"},
            {"step", state.step},
            {"windows_served", state.windows_served},
            {"seed", state.seed},
            {"settings", state.settings}};
  for (const auto& [k, v] : layout.items()) j[k] = v;
  write_file_atomic(path_join(dir, "trainer_state.json"), j.dump(2) + "\n");
  write_file_atomic(path_join(out_dir, "latest"), name + "\n");  // the commit point
  prune_checkpoints(out_dir, keep);
}

std::string save_sharded_checkpoint(const std::string& out_dir, const TrainModel& model,
                                    DataParallel& dp, dist::Comm& comm, const TrainerState& state,
                                    const model::ModelDirFiles& files, int keep,
                                    const std::vector<WholeShardTensor>& whole, int ep) {
  const int rank = comm.rank(), world = comm.size();
  const std::string suffix = ep > 1 ? fmt::format("-n{}z{}e{}", world, dp.zero(), ep)
                                    : fmt::format("-n{}z{}", world, dp.zero());
  const auto [name, dir] = new_sharded_checkpoint_dir(out_dir, state.step, comm, suffix);
  std::vector<std::pair<std::string, Tensor>> tensors;
  const FlatLayout& layout = dp.layout();
  for (size_t u = 0; u < layout.units.size(); ++u) {
    const int64_t c = layout.units[u].chunk, skip = dp.zero() == 0 ? rank * c : 0;
    const std::string key = fmt::format("u{}", u);
    tensors.emplace_back(kKindPrefix[0] + key, chunk_copy(dp.owned_values(u) + skip, c));
    tensors.emplace_back(kKindPrefix[1] + key, chunk_copy(dp.owned_exp_avg(u) + skip, c));
    tensors.emplace_back(kKindPrefix[2] + key, chunk_copy(dp.owned_exp_avg_sq(u) + skip, c));
  }
  for (const WholeShardTensor& w : whole) {
    if (w.rank != rank) continue;
    const int64_t n = w.shape.numel();
    tensors.emplace_back(kKindPrefix[0] + w.name, chunk_copy(w.value, n));
    tensors.emplace_back(kKindPrefix[1] + w.name, chunk_copy(w.exp_avg, n));
    tensors.emplace_back(kKindPrefix[2] + w.name, chunk_copy(w.exp_avg_sq, n));
  }
  model::write_safetensors(path_join(dir, shard_file(rank, world)), tensors);
  comm.barrier();  // every shard is on disk before the index names them
  if (rank == 0) {
    Json index = index_json(layout, dp.zero());
    for (const WholeShardTensor& w : whole)
      index["tensors"][w.name] = {
          {"shape", w.shape.to_vector()},
          {"slices", Json::array({Json::array({0, w.shape.numel(), w.rank, w.name, 0})})}};
    commit_sharded_checkpoint(out_dir, name, model.config(), files, index, state,
                              {{"optimizer_steps", dp.steps_taken()},
                               {"world_size", world},
                               {"zero", dp.zero()},
                               {"ep", ep}},
                              keep);
  }
  comm.barrier();
  return dir;
}

void load_sharded_state(const CheckpointReader& reader, const std::string& dir, DataParallel& dp) {
  const FlatLayout& layout = dp.layout();
  for (size_t u = 0; u < layout.units.size(); ++u) {
    const auto [lo, hi] = dp.owned_range(u);
    float* dst[] = {dp.owned_values(u), dp.owned_exp_avg(u), dp.owned_exp_avg_sq(u)};
    for (const ParamSlice& s : params_in_range(layout.units[u], lo, hi))
      for (int k = 0; k < 3; ++k)
        reader.read(static_cast<StateKind>(k), s.param->name, s.begin, s.end,
                    dst[k] + (s.unit_offset - lo));
  }
  const std::string path = path_join(dir, "trainer_state.json");
  dp.set_steps_taken(require<int64_t>(read_json_file(path), "optimizer_steps", path));
  dp.gather_weights();
}

model::ModelDir load_checkpoint_model(const std::string& dir, bool weights) {
  if (weights && !file_exists(path_join(dir, kIndex))) return model::load_model_dir(dir);
  model::ModelDir md;
  md.path = dir;
  const std::string cfg = path_join(dir, "config.json");
  md.config = model::ModelConfig::from_json(read_json_file(cfg), cfg);
  if (weights) md.weights = CheckpointReader(dir).full_weights(StateKind::kWeights);
  const std::string tok = path_join(dir, "tokenizer.json");
  if (file_exists(tok)) md.tokenizer_path = tok;
  const std::string tok_config = path_join(dir, "tokenizer_config.json");
  if (file_exists(tok_config))
    md.tokenizer_config_path = tok_config, md.tokenizer_config = read_json_file(tok_config);
  const std::string gen = path_join(dir, "generation_config.json");
  if (file_exists(gen)) md.generation_config = read_json_file(gen);
  return md;
}

void export_checkpoint(const std::string& checkpoint_dir, const std::string& out_dir) {
  const model::ModelDir md = load_checkpoint_model(checkpoint_dir);
  model::write_model_dir(out_dir, md.config, model::to_hf_tensors(md.config, md.weights),
                         model_dir_files(md));
}

}  // namespace lmstack::train
