// Random-weight model directories (see init_model.h). The weights are generated straight into
// the bytes of model.safetensors (layout planned first), in parallel over 64Ki-element
// chunks, so a 1.1B model needs one file-sized buffer and no per-tensor copies.
#include "lmstack/model/init_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "lmstack/core/file.h"
#include "lmstack/core/half.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/core/timer.h"
#include "lmstack/model/model_dir.h"

namespace lmstack::model {
namespace {

constexpr int64_t kChunk = int64_t{1} << 16;

// SplitMix64 (Steele, Lea, Flood 2014): decorrelates nearby seeds before mt19937_64.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char ch : s) h = (h ^ static_cast<uint8_t>(ch)) * 0x100000001b3ull;
  return h;
}

uint64_t tensor_seed(uint64_t seed, std::string_view name) {
  return splitmix64(seed ^ fnv1a(name));
}

// Marsaglia's polar method (Marsaglia & Bray 1964): Box-Muller without the sine and cosine.
// A pair of uniforms in the unit disk (accepted with probability pi/4) gives two independent
// standard normals. Rejection keeps it deterministic: the stream, not the clock, decides.
void fill_chunk(uint64_t seed, int64_t chunk, float stddev, float* out, int64_t n) {
  std::mt19937_64 gen(splitmix64(seed + static_cast<uint64_t>(chunk)));
  auto uniform = [&gen] { return static_cast<double>(gen() >> 11) * 0x1p-52 - 1.0; };  // [-1, 1)
  for (int64_t i = 0; i < n; i += 2) {
    double x, y, s;
    do {
      x = uniform();
      y = uniform();
      s = x * x + y * y;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * std::log(s) / s) * stddev;
    out[i] = static_cast<float>(x * f);
    if (i + 1 < n) out[i + 1] = static_cast<float>(y * f);
  }
}

void store(const float* src, DType dtype, int64_t n, char* dst) {
  if (dtype == DType::kF32)
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  else if (dtype == DType::kBF16)
    convert_f32_to_bf16(src, reinterpret_cast<uint16_t*>(dst), n);
  else
    convert_f32_to_f16(src, reinterpret_cast<uint16_t*>(dst), n);
}

struct Job {
  const HfTensorSpec* spec;
  int64_t chunk;
};

// Generates every tensor into `file` (already sized and holding the header).
void generate_weights(const InitModelOptions& o, const std::vector<HfTensorSpec>& specs,
                      const SafetensorsLayout& layout, std::string& file) {
  const DType dtype = o.config.dtype;
  const int elem = dtype_info(dtype).block_bytes;
  std::vector<Job> jobs;
  for (const HfTensorSpec& s : specs)
    for (int64_t c = 0; c * kChunk < s.shape.numel(); ++c) jobs.push_back({&s, c});
  ThreadPool pool(o.num_threads);
  pool.parallel_for(static_cast<int64_t>(jobs.size()), [&](int64_t begin, int64_t end) {
    std::vector<float> tmp(static_cast<size_t>(kChunk));
    for (int64_t j = begin; j < end; ++j) {
      const HfTensorSpec& s = *jobs[static_cast<size_t>(j)].spec;
      const int64_t c = jobs[static_cast<size_t>(j)].chunk;
      const int64_t n = std::min(kChunk, s.shape.numel() - c * kChunk);
      if (s.is_norm)
        std::fill_n(tmp.data(), n, s.is_bias ? 0.0f : 1.0f);
      else
        fill_chunk(tensor_seed(o.seed, s.name), c, o.stddev, tmp.data(), n);
      const uint64_t at = layout.offsets.at(s.name) + static_cast<uint64_t>(c * kChunk * elem);
      store(tmp.data(), dtype, n, file.data() + at);
    }
  });
}

Json generation_config(const TokenizerFiles& tok) {
  Json eos = tok.eos_ids.size() == 1 ? Json(tok.eos_ids[0]) : Json(tok.eos_ids);
  return {{"bos_token_id", tok.bos_id >= 0 ? Json(tok.bos_id) : Json(nullptr)},
          {"eos_token_id", eos},
          {"do_sample", false}};
}

}  // namespace

void fill_normal(uint64_t seed, std::string_view name, float stddev, float* out, int64_t n) {
  const uint64_t ts = tensor_seed(seed, name);
  for (int64_t c = 0; c * kChunk < n; ++c)
    fill_chunk(ts, c, stddev, out + c * kChunk, std::min(kChunk, n - c * kChunk));
}

InitModelResult init_model(const InitModelOptions& o) {
  const Timer timer;
  ModelConfig config = o.config;
  LMSTACK_CHECK(dtype_info(config.dtype).is_float && !is_quantized(config.dtype),
                "init_model: dtype {}", dtype_name(config.dtype));
  const TokenizerFiles tok =
      o.tokenizer_path.empty()
          ? byte_level_tokenizer(config.arch != Arch::kGpt2, config.max_position)
          : copy_tokenizer(o.tokenizer_path);
  if (tok.num_tokens > config.vocab_size)
    throw_error<ConfigError>("the tokenizer has {} tokens but the model's vocab_size is {}",
                             tok.num_tokens, config.vocab_size);
  config.bos_token_id = tok.bos_id;
  config.eos_token_ids = tok.eos_ids;

  const std::vector<HfTensorSpec> specs = hf_tensor_specs(config);
  std::vector<TensorSpec> plan;
  for (const HfTensorSpec& s : specs) plan.push_back({s.name, s.shape, config.dtype});
  const SafetensorsLayout layout = plan_safetensors(plan, Json{{"format", "pt"}});
  std::string file(static_cast<size_t>(layout.file_bytes), '\0');
  std::memcpy(file.data(), layout.header.data(), layout.header.size());
  generate_weights(o, specs, layout, file);

  make_directories(o.out_dir);
  write_file_atomic(path_join(o.out_dir, "config.json"), config.to_json().dump(2) + "\n");
  write_file_atomic(path_join(o.out_dir, "model.safetensors"), file);
  std::error_code ec;  // the loader prefers model.safetensors; a stale index would mislead
  std::filesystem::remove(path_join(o.out_dir, "model.safetensors.index.json"), ec);
  write_file_atomic(path_join(o.out_dir, "tokenizer.json"), tok.tokenizer_json);
  write_file_atomic(path_join(o.out_dir, "tokenizer_config.json"),
                    tok.tokenizer_config.dump(2) + "\n");
  for (const auto& [name, text] : tok.template_files) {
    const std::string path = path_join(o.out_dir, name);
    make_directories(std::filesystem::path(path).parent_path().string());
    write_file_atomic(path, text);
  }
  write_file_atomic(path_join(o.out_dir, "generation_config.json"),
                    generation_config(tok).dump(2) + "\n");
  return {config.num_parameters(), static_cast<int64_t>(file.size()), timer.seconds()};
}

}  // namespace lmstack::model
