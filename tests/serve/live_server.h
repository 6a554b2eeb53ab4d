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
  // `name` names the temp dir; `serve_args` are extra `lmstack serve` flags; `model_dir`
  // empty: a fresh tiny-llama. Check ok() and error() after construction (a test cannot
  // ASSERT in a constructor).
  // `launcher` prefixes the command (e.g. "prlimit --nofile=64:64").
  LiveServer(const std::string& name, const std::string& serve_args,
             const std::string& model_dir = "", const std::string& launcher = "") {
    dir_ = lmstack::test::temp_dir(name);
    const std::string bin = lmstack::test::lmstack_binary();
    std::string model = model_dir;
    if (model.empty()) {
      model = dir_ + "/model";
      error_ = write_tiny_llama(model);
      if (!error_.empty()) return;
    }
    std::string out;
    log_ = dir_ + "/serve.log";
    const std::string exec = launcher.empty() ? "exec " : "exec " + launcher + " ";
    lmstack::test::run_command(exec + bin + " serve --model " + model + " --port 0 " + serve_args +
                                   " > " + log_ + " 2>&1 & echo $!",
                               &out, false);
    pid_ = std::stoi(out);
    port_ = wait_for_port();
    if (!port_) error_ = "the server did not start within 120 s; its log: " + log_;
  }
  ~LiveServer() { terminate(std::chrono::seconds(10)); }

  // SIGTERM, then waits up to `timeout` for the process to end; whether it ended.
  bool terminate(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return true;
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (kill(pid_, 0) != 0 || zombie()) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // What the server printed so far.
  std::string log_text() const {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  int pid() const { return pid_; }
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  bool ok() const { return port_.has_value(); }
  const std::string& error() const { return error_; }
  int port() const { return *port_; }
  const std::string& dir() const { return dir_; }
  const std::string& log_path() const { return log_; }

 private:
  // Ended but not reaped (its parent shell is gone; a container's init may not reap).
  bool zombie() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string pid, comm, state;
    in >> pid >> comm >> state;
    return state == "Z";
  }
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
