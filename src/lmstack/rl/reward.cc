// The reward functions of reward.h.
#include "lmstack/rl/reward.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json.h"

namespace lmstack::rl {

double ExactMatchReward::score(const Example& example, const std::string& completion) {
  return extract_answer(completion) == example.answer ? 1.0 : 0.0;
}

double FormatReward::score(const Example&, const std::string& completion) {
  const bool has_newline = completion.find('\n') != std::string::npos;
  return has_newline && task_.is_well_formed(extract_answer(completion)) ? weight_ : 0.0;
}

double SumReward::score(const Example& example, const std::string& completion) {
  double total = 0;
  for (auto& part : parts_) total += part->score(example, completion);
  return total;
}

double CommandReward::score(const Example& example, const std::string& completion) {
  const Json input = {
      {"prompt", example.prompt}, {"answer", example.answer}, {"completion", completion}};
  // popen() is one-way: the JSON goes through a private temporary file on stdin.
  char path[] = "/tmp/lmstack-reward-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw_error<IoError>("--reward-cmd: cannot create a temporary file");
  close(fd);
  write_file_atomic(path, input.dump());
  const std::string shell = "(" + command_ + ") < " + path;
  FILE* pipe = popen(shell.c_str(), "r");
  std::string out;
  if (pipe) {
    char buf[256];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  }
  const int status = pipe ? pclose(pipe) : -1;
  std::remove(path);
  if (status != 0)
    throw_error<RequestError>("--reward-cmd '{}': exited with status {}", command_, status);
  char* end = nullptr;
  const double value = std::strtod(out.c_str(), &end);
  if (end == out.c_str() || !std::isfinite(value))
    throw_error<RequestError>("--reward-cmd '{}': printed '{}', not a number", command_, out);
  return value;
}

}  // namespace lmstack::rl
