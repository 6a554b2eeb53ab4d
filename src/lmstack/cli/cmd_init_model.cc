// `lmstack init-model`: writes a Hugging Face model directory with random
// weights from a preset (real shapes: gpt2, smollm-135m, tinyllama-1.1b, ...;
// tiny test models) or from a config.json. The work is in model/init_model.h;
// this file maps options onto it.
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/core/file.h"
#include "lmstack/model/init_model.h"
#include "lmstack/model/presets.h"

namespace lmstack::cli {
namespace {

struct InitModelCliOptions {
  std::string arch, preset, config, out, dtype = "bf16", tokenizer;
  uint64_t seed = 0;
  float stddev = 0.02f;
  int threads = 1;
  bool list = false;
};

// The HF config.json the options describe, with torch_dtype set.
Json resolve_config(const InitModelCliOptions& o) {
  if (o.preset.empty() == o.config.empty())
    throw_error<RequestError>("init-model: give exactly one of --preset or --config");
  Json j;
  if (!o.preset.empty()) {
    j = model::find_model_preset(o.preset, o.arch).config;
  } else {
    j = read_json_file(o.config);
    if (!o.arch.empty()) {
      if (j.is_object() && j.contains("architectures"))
        j = model::convert_config(j, o.arch);
      else
        j["architectures"] = Json::array({model::architecture_for(o.arch)});
    }
  }
  const DType dtype = parse_dtype(o.dtype);
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16)
    throw_error<RequestError>("init-model: --dtype must be f32, bf16 or f16 (got {})", o.dtype);
  j["torch_dtype"] = dtype == DType::kF32    ? "float32"
                     : dtype == DType::kBF16 ? "bfloat16"
                                             : "float16";
  return j;
}

void print_presets() {
  std::printf("%-16s %-8s %14s  %s\n", "preset", "arch", "parameters", "source");
  for (const model::ModelPreset& p : model::model_presets()) {
    const model::ModelConfig c = model::ModelConfig::from_json(p.config, p.name);
    std::printf("%-16s %-8s %14lld  %s\n", p.name.c_str(), p.arch.c_str(),
                static_cast<long long>(c.num_parameters()), p.source.c_str());
  }
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<InitModelCliOptions>();
  app.add_option("--arch", o->arch,
                 "llama|mistral|qwen2|qwen3|gpt2: the architecture for "
                 "--config, or re-targets a tiny preset");
  app.add_option("--preset", o->preset, "model shape (see --list-presets); 'tiny' = tiny-<arch>");
  app.add_option("--config", o->config, "a Hugging Face config.json to take the shape from");
  app.add_option("--out", o->out, "output directory (created; its model files are replaced)");
  app.add_option("--seed", o->seed, "random seed (same seed, same weights on every machine)");
  app.add_option("--dtype", o->dtype, "stored dtype: bf16 (default), f32 or f16");
  app.add_option("--std", o->stddev, "standard deviation of the normal weights (default 0.02)");
  app.add_option("--tokenizer", o->tokenizer,
                 "adopt this tokenizer (a directory, e.g. from train-tokenizer --out DIR, or a "
                 "tokenizer.json) instead of the byte-level one: its files are copied and "
                 "vocab_size is its token count");
  app.add_flag("--list-presets", o->list, "print the presets and exit");
  add_threads_option(app, o->threads);
  return [o] {
    if (o->list) {
      print_presets();
      return 0;
    }
    if (o->out.empty()) throw_error<RequestError>("init-model: --out DIR is required");
    const Json j = resolve_config(*o);
    model::InitModelOptions io;
    Json config = j;
    if (!o->tokenizer.empty())  // the model's vocabulary is the adopted tokenizer's
      config["vocab_size"] = model::copy_tokenizer(o->tokenizer).num_tokens;
    io.config = model::ModelConfig::from_json(config, o->preset.empty() ? o->config : o->preset);
    io.out_dir = o->out;
    io.seed = o->seed;
    io.stddev = o->stddev;
    io.tokenizer_path = o->tokenizer;
    io.num_threads = o->threads;
    const model::InitModelResult r = model::init_model(io);
    std::printf("wrote %s: %s, %lld parameters, %s, %.1f MiB in %.2f s\n", o->out.c_str(),
                io.config.architecture.c_str(), static_cast<long long>(r.num_parameters),
                std::string(dtype_name(io.config.dtype)).c_str(),
                static_cast<double>(r.file_bytes) / (1 << 20), r.seconds);
    return 0;
  };
}

const RegisterCommand kRegister{
    {"init-model",
     "write a Hugging Face model directory with random weights (tests, "
     "benchmarks)",
     "  lmstack init-model --preset tinyllama-1.1b --out models/tinyllama\n"
     "  lmstack init-model --preset tiny-qwen3 --dtype f32 --seed 1 --out "
     "/tmp/q3\n"
     "  lmstack init-model --preset tiny --arch gpt2 --out /tmp/g\n"
     "  lmstack init-model --arch llama --config my_config.json --out /tmp/m\n"
     "  lmstack init-model --preset tiny-llama --tokenizer tok/ --out /tmp/m   # trained vocab\n"
     "  lmstack init-model --list-presets",
     setup}};

}  // namespace
}  // namespace lmstack::cli
