// Loading and writing Hugging Face model directories (see model_dir.h). Shard names and the
// index layout follow transformers' save_pretrained: model-00001-of-00002.safetensors and
// {"metadata": {"total_size": N}, "weight_map": {tensor: file}}.
#include "lmstack/model/model_dir.h"

#include <filesystem>

#include "lmstack/core/file.h"
#include "lmstack/core/log.h"
#include "lmstack/model/gguf_model.h"

namespace lmstack::model {
namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

Json read_optional_json(const std::string& path) {
  return file_exists(path) ? read_json_file(path) : Json(nullptr);
}

SafetensorsSet open_weights(const std::string& dir) {
  const std::string single = path_join(dir, kSingleFile);
  const std::string index = path_join(dir, kIndexFile);
  if (file_exists(single)) return SafetensorsSet::open_file(single);
  if (file_exists(index)) return SafetensorsSet::open_index(index);
  throw_error<FormatError>(
      "{}: neither {} nor {} found (PyTorch .bin checkpoints are not supported; save them "
      "with safe_serialization=True)",
      dir, kSingleFile, kIndexFile);
}

std::string shard_name(size_t i, size_t n) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n);
}

// Greedy split in the given order: a shard closes before a tensor that would push it past
// `max_bytes` (a single larger tensor gets a shard of its own), as transformers does.
std::vector<std::vector<size_t>> split_shards(
    const std::vector<std::pair<std::string, Tensor>>& tensors, int64_t max_bytes) {
  std::vector<std::vector<size_t>> shards(1);
  int64_t used = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t b = tensors[i].second.nbytes();
    if (!shards.back().empty() && used + b > max_bytes) {
      shards.emplace_back();
      used = 0;
    }
    shards.back().push_back(i);
    used += b;
  }
  return shards;
}

void remove_if_present(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) throw_error<IoError>("{}: cannot remove stale file: {}", path, ec.message());
}

void write_weights(const std::string& dir,
                   const std::vector<std::pair<std::string, Tensor>>& tensors,
                   int64_t max_shard_bytes) {
  const Json metadata = {{"format", "pt"}};
  int64_t total = 0;
  for (const auto& [name, t] : tensors) total += t.nbytes();
  if (max_shard_bytes <= 0 || total <= max_shard_bytes) {
    write_safetensors(path_join(dir, kSingleFile), tensors, metadata);
    remove_if_present(path_join(dir, kIndexFile));
    return;
  }
  const std::vector<std::vector<size_t>> shards = split_shards(tensors, max_shard_bytes);
  Json weight_map = Json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<std::pair<std::string, Tensor>> part;
    for (size_t i : shards[s]) {
      part.push_back(tensors[i]);
      weight_map[tensors[i].first] = shard_name(s, shards.size());
    }
    write_safetensors(path_join(dir, shard_name(s, shards.size())), part, metadata);
  }
  const Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomic(path_join(dir, kIndexFile), index.dump(2) + "\n");
  remove_if_present(path_join(dir, kSingleFile));
}

}  // namespace

ModelDir load_model_dir(const std::string& dir) {
  if (dir.size() > 5 && dir.compare(dir.size() - 5, 5, ".gguf") == 0 && !is_directory(dir))
    return load_gguf_model(dir);
  if (!is_directory(dir)) throw_error<IoError>("{}: not a model directory", dir);
  ModelDir m;
  m.path = dir;
  const std::string config_path = path_join(dir, "config.json");
  m.config = ModelConfig::from_json(read_json_file(config_path), config_path);
  m.weights = load_weights(m.config, open_weights(dir));
  const std::string tok = path_join(dir, "tokenizer.json");
  if (file_exists(tok)) m.tokenizer_path = tok;
  const std::string tok_config = path_join(dir, "tokenizer_config.json");
  if (file_exists(tok_config)) {
    m.tokenizer_config_path = tok_config;
    m.tokenizer_config = read_json_file(tok_config);
  }
  m.generation_config = read_optional_json(path_join(dir, "generation_config.json"));
  return m;
}

void write_model_dir(const std::string& dir, const ModelConfig& config,
                     const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const ModelDirFiles& files, int64_t max_shard_bytes) {
  make_directories(dir);
  write_weights(dir, tensors, max_shard_bytes);
  write_model_files(dir, config, files);
}

void write_model_files(const std::string& dir, const ModelConfig& config,
                       const ModelDirFiles& files) {
  write_file_atomic(path_join(dir, "config.json"), config.to_json().dump(2) + "\n");
  if (!files.tokenizer_json.empty())
    write_file_atomic(path_join(dir, "tokenizer.json"), files.tokenizer_json);
  if (!files.tokenizer_config.is_null())
    write_file_atomic(path_join(dir, "tokenizer_config.json"),
                      files.tokenizer_config.dump(2) + "\n");
  if (!files.generation_config.is_null())
    write_file_atomic(path_join(dir, "generation_config.json"),
                      files.generation_config.dump(2) + "\n");
}

}  // namespace lmstack::model
