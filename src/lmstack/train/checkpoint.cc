// Checkpoint save/load (contracts in checkpoint.h, layout in docs/formats/checkpoint.md).
// m and v are re-arranged as ModelWeights so model/model_dir's to_hf_tensors / load_weights
// give them the weights' HF names and layouts (GPT-2's Conv1D transposes included).
#include "lmstack/train/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/model/safetensors.h"

namespace lmstack::train {
namespace {

constexpr const char* kExpAvg = "optimizer.exp_avg.safetensors";
constexpr const char* kExpAvgSq = "optimizer.exp_avg_sq.safetensors";

// A ModelWeights whose fields are the optimizer tensors `state` (parallel to params).
model::ModelWeights as_weights(const TrainModel& model, std::vector<Tensor>& state) {
  // Structure (handles; a copy's MoE/MLA blocks are its own, model/weights.h), then the state.
  model::ModelWeights w = model.master();
  auto fields = weight_fields(w, model.config().tie_word_embeddings);
  LMSTACK_CHECK(fields.size() == state.size(), "{} fields vs {} optimizer tensors", fields.size(),
                state.size());
  for (size_t i = 0; i < fields.size(); ++i) *fields[i].second = state[i];
  if (model.config().tie_word_embeddings) w.lm_head = w.embed;
  return w;
}

void load_state_file(const std::string& path, const TrainModel& model, std::vector<Tensor>& state) {
  const model::SafetensorsSet set = model::SafetensorsSet::open_file(path);
  model::ModelWeights loaded = model::load_weights(model.config(), set);
  auto fields = weight_fields(loaded, model.config().tie_word_embeddings);
  if (fields.size() != state.size())
    throw_error<FormatError>("{}: {} tensors, the model has {}", path, fields.size(), state.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    const Tensor& src = *fields[i].second;
    if (src.dtype() != DType::kF32 || !(src.shape() == state[i].shape()))
      throw_error<FormatError>("{}: tensor '{}' is {} {}, expected f32 {}", path, fields[i].first,
                               dtype_name(src.dtype()), src.shape().str(), state[i].shape().str());
    std::copy_n(src.data<float>(), src.numel(), state[i].data<float>());
  }
}

}  // namespace

model::ModelDirFiles model_dir_files(const model::ModelDir& md) {
  model::ModelDirFiles f;
  if (!md.tokenizer_path.empty()) f.tokenizer_json = read_file(md.tokenizer_path);
  f.tokenizer_config = md.tokenizer_config;
  f.generation_config = md.generation_config;
  return f;
}

std::string checkpoint_step_name(int64_t step) { return fmt::format("step-{:08d}", step); }

void prune_checkpoints(const std::string& out_dir, int keep) {
  if (keep <= 0) return;
  const std::string root = path_join(out_dir, "checkpoints");
  std::vector<std::string> names;  // names sort by step
  for (const auto& e : std::filesystem::directory_iterator(root))
    if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0)
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < names.size(); ++i)
    std::filesystem::remove_all(path_join(root, names[i]));
}

std::string save_checkpoint(const std::string& out_dir, const TrainModel& model, AdamW& opt,
                            const TrainerState& state, const model::ModelDirFiles& files,
                            int keep) {
  const std::string root = path_join(out_dir, "checkpoints");
  std::string name = checkpoint_step_name(state.step);
  if (file_exists(path_join(path_join(root, name), "index.json")))
    name += "-n1z0";  // a sharded checkpoint of this step, resharded to one process: keep it
  const std::string dir = path_join(root, name);
  model::write_model_dir(dir, model.config(), model::to_hf_tensors(model.config(), model.master()),
                         files);
  model::write_safetensors(path_join(dir, kExpAvg),
                           model::to_hf_tensors(model.config(), as_weights(model, opt.exp_avg())));
  model::write_safetensors(
      path_join(dir, kExpAvgSq),
      model::to_hf_tensors(model.config(), as_weights(model, opt.exp_avg_sq())));
  const Json j = {{"format", "lmstack.checkpoint.v1"},      {"step", state.step},
                  {"windows_served", state.windows_served}, {"seed", state.seed},
                  {"optimizer_steps", opt.steps_taken()},   {"settings", state.settings}};
  write_file_atomic(path_join(dir, "trainer_state.json"), j.dump(2) + "\n");
  write_file_atomic(path_join(out_dir, "latest"), "checkpoints/" + name + "\n");
  prune_checkpoints(out_dir, keep);
  return dir;
}

std::optional<std::string> latest_checkpoint(const std::string& out_dir) {
  const std::string pointer = path_join(out_dir, "latest");
  if (!file_exists(pointer)) return std::nullopt;
  std::string rel = read_file(pointer);
  while (!rel.empty() && (rel.back() == '\n' || rel.back() == '\r')) rel.pop_back();
  const std::string dir = path_join(out_dir, rel);
  if (!file_exists(path_join(dir, "trainer_state.json")))
    throw_error<FormatError>("{} names {}, which has no trainer_state.json", pointer, dir);
  return dir;
}

TrainerState read_trainer_state(const std::string& checkpoint_dir) {
  const std::string path = path_join(checkpoint_dir, "trainer_state.json");
  return parse_trainer_state(read_file(path), path);
}

void load_optimizer_state(const std::string& checkpoint_dir, const TrainModel& model, AdamW& opt) {
  const std::string path = path_join(checkpoint_dir, "trainer_state.json");
  load_state_file(path_join(checkpoint_dir, kExpAvg), model, opt.exp_avg());
  load_state_file(path_join(checkpoint_dir, kExpAvgSq), model, opt.exp_avg_sq());
  opt.set_steps_taken(require<int64_t>(read_json_file(path), "optimizer_steps", path));
}

std::string describe_settings_mismatch(const Json& saved, const Json& now) {
  std::string out;
  for (const auto& [key, value] : now.items()) {
    const Json old = saved.contains(key) ? saved.at(key) : Json();
    if (old != value)
      out += fmt::format("  {}: checkpoint {}, now {}\n", key, old.dump(), value.dump());
  }
  for (const auto& [key, value] : saved.items())
    if (!now.contains(key))
      out += fmt::format("  {}: checkpoint {}, now absent\n", key, value.dump());
  return out;
}

}  // namespace lmstack::train
