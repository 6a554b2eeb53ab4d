// A live `lmstack serve` for end-to-end tests: makes an init-model tiny-llama in a temp dir,
// starts the binary on a free 127.0.0.1 port (--port 0; the port is read from its "serving
// ... on http://127.0.0.1:PORT" line) and stops it with SIGTERM when destroyed.
#pragma once

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "api_fixture.h"
#include "test_util.h"

namespace lmstack::serve::test {

class LiveServer {
 public:
  // `name` names the temp dir; `serve_args` are extra `lmstack serve` flags. Check ok() and
  // error() after construction (a test cannot ASSERT in a constructor).
  LiveServer(const std::string& name, const std::string& serve_args) {
    dir_ = lmstack::test::temp_dir(name);
    const std::string bin = lmstack::test::lmstack_binary();
    error_ = write_tiny_llama(dir_ + "/model");
    if (!error_.empty()) return;
    std::string out;
    log_ = dir_ + "/serve.log";
    lmstack::test::run_command(bin + " serve --model " + dir_ + "/model --port 0 " + serve_args +
                                   " > " + log_ + " 2>&1 & echo $!",
                               &out, false);
    pid_ = std::stoi(out);
    port_ = wait_for_port();
    if (!port_) error_ = "the server did not start within 120 s; its log: " + log_;
  }
  ~LiveServer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    std::string status;
    for (int i = 0;
         i < 100 && lmstack::test::run_command("kill -0 " + std::to_string(pid_) + " 2>/dev/null",
                                               &status) == 0;
         ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  bool ok() const { return port_.has_value(); }
  const std::string& error() const { return error_; }
  int port() const { return *port_; }
  const std::string& dir() const { return dir_; }
  const std::string& log_path() const { return log_; }

 private:
  std::optional<int> wait_for_port() const {
    for (int i = 0; i < 1200; ++i) {
      std::ifstream in(log_);
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      const size_t at = s.find("http://127.0.0.1:");
      if (at != std::string::npos) {
        const size_t begin = at + 17;
        const size_t end = s.find_first_not_of("0123456789", begin);
        if (end != std::string::npos && end > begin) return std::stoi(s.substr(begin, end - begin));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return std::nullopt;
  }

  std::string dir_, log_, error_;
  int pid_ = -1;
  std::optional<int> port_;
};

}  // namespace lmstack::serve::test
