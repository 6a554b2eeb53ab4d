// JSONL training log (see train_log.h).
#include "lmstack/train/train_log.h"

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"

namespace lmstack::train {

TrainLog::TrainLog(std::string path, int64_t resume_step) : path_(std::move(path)) {
  if (path_.empty() || resume_step < 0 || !file_exists(path_)) return;
  for (const Json& line : read_train_log(path_)) {
    const Json& m = line.contains("measured") ? line["measured"] : Json();
    if (m.is_object() && m.contains("step") && m["step"].get<int64_t>() > resume_step) break;
    text_ += line.dump() + "\n";
  }
  dirty_ = true;
}

void TrainLog::append(const Json& line) {
  if (path_.empty()) return;
  text_ += line.dump() + "\n";
  dirty_ = true;
}

void TrainLog::flush() {
  if (path_.empty() || !dirty_) return;
  write_file_atomic(path_, text_);
  dirty_ = false;
}

std::vector<Json> read_train_log(const std::string& path) {
  const std::string text = read_file(path);
  std::vector<Json> out;
  size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    const std::string line = text.substr(start, end - start);
    if (!line.empty()) out.push_back(parse_json(line, fmt::format("{} line {}", path, line_no)));
    start = end + 1;
  }
  return out;
}

}  // namespace lmstack::train
