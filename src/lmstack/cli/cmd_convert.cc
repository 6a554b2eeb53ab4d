// `lmstack convert`: writes a model (a Hugging Face directory, or a GGUF file) as one GGUF file
// that llama.cpp and `lmstack --model FILE.gguf` read. The work is in model/gguf_model.h; the
// keys written are listed in docs/formats/gguf.md.
#include <cstdio>
#include <filesystem>

#include "lmstack/cli/command.h"
#include "lmstack/core/timer.h"
#include "lmstack/model/gguf_model.h"

namespace lmstack::cli {
namespace {

struct ConvertCliOptions {
  std::string model, out, type = "f16", name;
  int threads = 0;
};

int run_convert(const ConvertCliOptions& o) {
  if (o.model.empty() || o.out.empty())
    throw_error<RequestError>("convert: --model DIR|FILE.gguf and --out FILE.gguf are required");
  if (o.out.size() < 5 || o.out.compare(o.out.size() - 5, 5, ".gguf") != 0)
    throw_error<RequestError>("convert: --out must end in .gguf (got {})", o.out);
  const Timer timer;
  const model::ModelDir m = model::load_model_dir(o.model);
  model::GgufWriteOptions w;
  w.matrix_dtype = parse_dtype(o.type);
  w.name = o.name;
  w.num_threads = o.threads;
  model::write_gguf_model(o.out, m.config, m.weights, o.model, w);
  const GgufFile written(o.out);
  std::printf("wrote %s: %s, %zu tensors, %zu metadata keys, %s matrices, %.2f MB in %.2f s\n",
              o.out.c_str(), m.config.architecture.c_str(), written.tensors().size(),
              written.metadata().size(), std::string(dtype_name(w.matrix_dtype)).c_str(),
              static_cast<double>(std::filesystem::file_size(o.out)) / 1e6, timer.seconds());
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<ConvertCliOptions>();
  app.add_option("-m,--model", o->model, "Hugging Face model directory or .gguf file to convert");
  app.add_option("--out", o->out, "output .gguf file (written atomically)");
  app.add_option("--type", o->type,
                 "matrix type: f32, f16 (default), bf16, q8_0, q4_0, q4_K, q6_K (norms and biases "
                 "stay f32)");
  app.add_option("--name", o->name, "general.name (default: the architecture class name)");
  add_threads_option(app, o->threads);
  return [o] { return run_convert(*o); };
}

const RegisterCommand kRegister{
    {"convert", "write a model as a GGUF file (llama.cpp's format)",
     "  lmstack convert --model models/tiny --out /tmp/tiny.gguf\n"
     "  lmstack convert --model models/tiny --out /tmp/tiny-q8.gguf --type q8_0\n"
     "  lmstack generate --model /tmp/tiny.gguf --prompt 'Hello'",
     setup}};

}  // namespace
}  // namespace lmstack::cli
