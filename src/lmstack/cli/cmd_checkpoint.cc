// `lmstack checkpoint export CKPT --out DIR`: a training checkpoint of any layout (sharded by a
// data-parallel or a TP/PP run, or whole) as a plain Hugging Face directory that generate and
// transformers load (train/sharded_checkpoint.h). Runs in one process; reads each tensor's
// element ranges or blocks from the shards through the index.
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/train/sharded_checkpoint.h"

namespace lmstack::cli {
namespace {

struct ExportOptions {
  std::string checkpoint, out;
};

std::function<int()> setup(CLI::App& app) {
  app.require_subcommand(1);
  auto o = std::make_shared<ExportOptions>();
  CLI::App* sub = app.add_subcommand(
      "export", "write a checkpoint (sharded or whole) as a Hugging Face model directory");
  sub->add_option("checkpoint", o->checkpoint,
                  "checkpoint directory (<out>/checkpoints/step-N) or a run's <out> (its latest)")
      ->required();
  sub->add_option("--out", o->out, "output directory")->required();
  return [o] {
    std::string dir = o->checkpoint;
    if (const auto latest = train::latest_checkpoint(dir)) dir = *latest;
    train::export_checkpoint(dir, o->out);
    std::printf("exported %s to %s\n", dir.c_str(), o->out.c_str());
    return 0;
  };
}

const RegisterCommand kRegister{
    {"checkpoint", "training checkpoints: export one (sharded or whole) as a Hugging Face model",
     "  lmstack checkpoint export runs/dp2 --out /tmp/dp2-hf && lmstack generate -m /tmp/dp2-hf\n"
     "  lmstack checkpoint export runs/dp2/checkpoints/step-00000200 --out /tmp/hf",
     setup}};

}  // namespace
}  // namespace lmstack::cli
