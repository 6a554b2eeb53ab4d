// The JSONL training log: one JSON object per line, each a complete run-metrics record
// (schema lmstack.run.v1, kind "train", docs/formats/run_metrics.md) whose `measured` object
// also carries step, loss, lr, grad_norm, tok_s, mfu (and eval_loss on evaluation lines), so
// `lmstack calc check` can read any line and `lmstack plot` draws the curves. The file is
// rewritten atomically (core/file.h) when flushed; on resume, lines past the checkpoint's step
// are dropped so an interrupted run's log equals the uninterrupted one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmstack/core/json.h"

namespace lmstack::train {

class TrainLog {
 public:
  // path "" disables the log. With `resume_step` >= 0 the existing file is read and lines of
  // steps > resume_step are dropped; otherwise the file starts empty.
  TrainLog(std::string path, int64_t resume_step);
  void append(const Json& line);
  // Rewrites the file (no-op when nothing changed or disabled).
  void flush();

 private:
  std::string path_;
  std::string text_;
  bool dirty_ = false;
};

// Parses a JSONL log; FormatError naming the file and line for a line that is not JSON.
std::vector<Json> read_train_log(const std::string& path);

}  // namespace lmstack::train
