// Sharded checkpoints of a model-parallel run (see model_parallel_checkpoint.h).
#include "lmstack/train/model_parallel_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/model/safetensors.h"

namespace lmstack::train {
namespace {

// The stored tensors of one slice in a shard: prefix + the tensor's name (format v2).
constexpr const char* kKindPrefix[] = {"weights.", "exp_avg.", "exp_avg_sq."};

bool is_kv(const std::string& name) {
  return name.ends_with(".wk") || name.ends_with(".wv") || name.ends_with(".bk") ||
         name.ends_with(".bv");
}

// The whole tensor's shape from rank t's slice of it (tensor_parallel.h's split rules).
Shape whole_shape(const std::string& name, const Shape& local, const model::ModelConfig& c,
                  const TpLayout& t) {
  const TpSplit split = tp_split_of(name);
  if (split == TpSplit::kReplicated) return local;
  const int64_t rows = local[0], cols = local.rank() == 2 ? local[1] : 1;
  if (split == TpSplit::kCols) return Shape{rows, cols * t.tp};
  const int64_t all_rows =
      is_kv(name) ? static_cast<int64_t>(c.num_kv_heads) * c.head_dim : rows * t.tp;
  return local.rank() == 2 ? Shape{all_rows, cols} : Shape{all_rows};
}

// Every rank's JSON value on every rank: the text all-gathered, its length first, then its
// bytes padded to the longest (as int32 words: Comm moves typed elements). A few dozen bytes
// per tensor, unlike the tensors themselves.
std::vector<Json> all_gather_json(dist::Comm& comm, const Json& mine) {
  const std::string text = mine.dump();
  const int32_t len = static_cast<int32_t>(text.size());
  std::vector<int32_t> lens(static_cast<size_t>(comm.size()));
  comm.all_gather(&len, lens.data(), 1, DType::kI32);
  const int64_t words = (*std::max_element(lens.begin(), lens.end()) + 3) / 4;
  std::vector<int32_t> send(static_cast<size_t>(words), 0);
  std::vector<int32_t> recv(static_cast<size_t>(words * comm.size()));
  std::memcpy(send.data(), text.data(), text.size());
  comm.all_gather(send.data(), recv.data(), words, DType::kI32);
  std::vector<Json> out;
  for (int r = 0; r < comm.size(); ++r)
    out.push_back(Json::parse(std::string(reinterpret_cast<const char*>(recv.data() + r * words),
                                          static_cast<size_t>(lens[static_cast<size_t>(r)]))));
  return out;
}

// index.json (format v2) from every rank's pieces [name, whole shape, r0, r1, c0, c1]; the
// files are the shards of the ranks that own something.
Json index_json(const std::vector<Json>& pieces, const dist::MeshShape& s) {
  const int world = static_cast<int>(pieces.size());
  Json tensors = Json::object(), files = Json::array();
  for (int r = 0; r < world; ++r) {
    if (pieces[static_cast<size_t>(r)].empty()) continue;
    const size_t file = files.size();
    files.push_back(shard_file_name(r, world));
    for (const Json& p : pieces[static_cast<size_t>(r)]) {
      const std::string name = p[0].get<std::string>();
      if (!tensors.contains(name)) tensors[name] = {{"shape", p[1]}, {"blocks", Json::array()}};
      tensors[name]["blocks"].push_back(Json::array({p[2], p[3], p[4], p[5], file, name}));
    }
  }
  return {{"format", "lmstack.sharded_checkpoint.v2"},
          {"world_size", world},
          {"zero", 0},
          {"mesh", {{"tp", s.tp}, {"pp", s.pp}, {"dp", s.dp}}},
          {"files", files},
          {"tensors", tensors}};
}

bool plan_holds(const StagePlan& plan, const std::string& name) {
  if (name == "embed") return plan.embed;
  if (name == "final_norm" || name == "lm_head") return plan.head;
  if (!name.starts_with("layers.")) return false;
  const int layer = std::stoi(name.substr(7));
  return layer >= plan.first_layer && layer < plan.first_layer + plan.num_layers;
}

}  // namespace

std::string save_model_parallel_checkpoint(const std::string& out_dir, ModelParallel& mp,
                                           const model::ModelConfig& config,
                                           const TrainerState& state,
                                           const model::ModelDirFiles& files, int keep) {
  dist::Comm& world = mp.mesh().world();
  const dist::MeshShape& s = mp.mesh().shape();
  const auto [name, dir] = new_sharded_checkpoint_dir(
      out_dir, state.step, world, fmt::format("-tp{}pp{}dp{}", s.tp, s.pp, s.dp));
  const TpLayout& t = mp.chunks().front()->tp_layout();
  std::vector<std::pair<std::string, Tensor>> tensors;
  Json pieces = Json::array();
  for (size_t i = 0; i < mp.params().size(); ++i) {
    const ParamRef& p = mp.params()[i];
    if (!mp.owns(p)) continue;
    const Shape whole = whole_shape(p.name, p.value->shape(), config, t);
    const TpBlock b = tp_block(p.name, whole, t, config.head_dim);
    pieces.push_back(
        Json::array({p.name, whole.to_vector(), b.row_begin, b.row_end, b.col_begin, b.col_end}));
    tensors.emplace_back(kKindPrefix[0] + p.name, *p.value);
    tensors.emplace_back(kKindPrefix[1] + p.name, mp.optimizer().exp_avg()[i]);
    tensors.emplace_back(kKindPrefix[2] + p.name, mp.optimizer().exp_avg_sq()[i]);
  }
  if (!tensors.empty())
    model::write_safetensors(path_join(dir, shard_file_name(world.rank(), world.size())), tensors);
  const std::vector<Json> all = all_gather_json(world, pieces);  // also: every shard is written
  if (world.rank() == 0)
    commit_sharded_checkpoint(out_dir, name, config, files, index_json(all, s), state,
                              {{"optimizer_steps", mp.optimizer().steps_taken()},
                               {"world_size", world.size()},
                               {"zero", 0},
                               {"tp", s.tp},
                               {"pp", s.pp},
                               {"dp", s.dp}},
                              keep);
  world.barrier();
  return dir;
}

model::ModelWeights read_model_parallel_weights(const CheckpointReader& reader,
                                                const dist::MeshShape& shape,
                                                const dist::MeshCoord& coord,
                                                const ModelParallelOptions& options) {
  const model::ModelConfig& c = reader.config();
  const TpLayout t = tp_layout(c, shape.tp, coord.tp);
  model::ModelWeights w;
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (const StagePlan& plan : stage_plans(c, shape, coord.pp, options))
    for (const auto& [name, whole] : reader.shapes()) {
      if (!plan_holds(plan, name)) continue;
      Tensor* field = weight_field(w, name);
      LMSTACK_CHECK(field, "no field for checkpoint tensor {}", name);
      const TpBlock b = tp_block(name, whole, t, c.head_dim);
      *field = Tensor::zeros(tp_block_shape(b, whole), DType::kF32, MemoryCategory::kWeights);
      reader.read_block(StateKind::kWeights, name, b.row_begin, b.row_end, b.col_begin, b.col_end,
                        field->data<float>());
    }
  return w;
}

void load_model_parallel_optimizer(const CheckpointReader& reader, const std::string& dir,
                                   ModelParallel& mp) {
  const TpLayout& t = mp.chunks().front()->tp_layout();
  const int head_dim = reader.config().head_dim;
  for (size_t i = 0; i < mp.params().size(); ++i) {
    const ParamRef& p = mp.params()[i];
    const auto it = reader.shapes().find(p.name);
    if (it == reader.shapes().end())
      throw_error<FormatError>("{}: the checkpoint has no tensor '{}'", dir, p.name);
    const TpBlock b = tp_block(p.name, it->second, t, head_dim);
    if (tp_block_shape(b, it->second) != p.value->shape())
      throw_error<FormatError>("{}: '{}' is {}; its slice {} does not match the model's {}", dir,
                               p.name, it->second.str(), tp_block_shape(b, it->second).str(),
                               p.value->shape().str());
    reader.read_block(StateKind::kExpAvg, p.name, b.row_begin, b.row_end, b.col_begin, b.col_end,
                      mp.optimizer().exp_avg()[i].data<float>());
    reader.read_block(StateKind::kExpAvgSq, p.name, b.row_begin, b.row_end, b.col_begin, b.col_end,
                      mp.optimizer().exp_avg_sq()[i].data<float>());
  }
  const std::string path = path_join(dir, "trainer_state.json");
  mp.optimizer().set_steps_taken(require<int64_t>(read_json_file(path), "optimizer_steps", path));
}

}  // namespace lmstack::train
