// A small Chrome DevTools Protocol client for browser tests: runs `chromium --headless` with
// --remote-debugging-pipe (the browser reads commands on fd 3 and writes replies and events
// on fd 4, each message a JSON object followed by a NUL byte; see the protocol's docs at
// chromedevtools.github.io/devtools-protocol), opens a page and evaluates JavaScript in it.
// Every wait is bounded; failures throw std::runtime_error naming the method.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lmstack/core/json.h"
#include "test_util.h"

extern char** environ;

namespace lmstack::serve::test {

class HeadlessChromium {
 public:
  // The Chromium binary on PATH ("" when there is none).
  static std::string find_binary() {
    std::string out;
    for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
      if (lmstack::test::run_command(std::string("command -v ") + name, &out, false) == 0)
        return out.substr(0, out.find('\n'));
    return "";
  }

  // Starts the browser with a fresh profile in `profile_dir`; its output goes to
  // profile_dir/chromium.log.
  HeadlessChromium(const std::string& binary, const std::string& profile_dir) {
    std::signal(SIGPIPE, SIG_IGN);  // a dead browser must fail a write, not kill the test
    int to_browser[2], from_browser[2];
    if (pipe2(to_browser, O_CLOEXEC) != 0 || pipe2(from_browser, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    // Keep our ends and the child's sources clear of fds 3 and 4, which dup2 targets.
    for (int* fd : {&to_browser[0], &to_browser[1], &from_browser[0], &from_browser[1]}) {
      const int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 10);
      close(*fd);
      *fd = moved;
    }
    std::filesystem::create_directories(profile_dir);
    const std::string log = profile_dir + "/chromium.log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_browser[0], 3);
    posix_spawn_file_actions_adddup2(&actions, from_browser[1], 4);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<std::string> args = {binary,
                                     "--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--no-first-run",
                                     "--no-default-browser-check",
                                     "--disable-extensions",
                                     "--remote-debugging-pipe",
                                     "--user-data-dir=" + profile_dir,
                                     "about:blank"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(to_browser[0]);
    close(from_browser[1]);
    to_browser_ = to_browser[1];
    from_browser_ = from_browser[0];
    if (rc != 0) throw std::runtime_error("cannot start " + binary + ": " + std::strerror(rc));
  }

  ~HeadlessChromium() {
    if (pid_ <= 0) return;
    try {
      call("Browser.close", Json::object(), "", std::chrono::seconds(10));
    } catch (const std::exception&) {
      // Killed below.
    }
    int status = 0;
    for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    close(to_browser_);
    close(from_browser_);
  }
  HeadlessChromium(const HeadlessChromium&) = delete;
  HeadlessChromium& operator=(const HeadlessChromium&) = delete;

  // Opens `url` in a new tab and attaches to it (evaluate() then runs there).
  void open(const std::string& url) {
    const Json target = call("Target.createTarget", {{"url", url}});
    const Json attached =
        call("Target.attachToTarget", {{"targetId", target["targetId"]}, {"flatten", true}});
    session_ = attached["sessionId"].get<std::string>();
  }

  // The value of a JavaScript expression in the open page (JSON-serialisable results).
  Json evaluate(const std::string& expression) {
    const Json r =
        call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}}, session_);
    if (r.contains("exceptionDetails"))
      throw std::runtime_error("JavaScript error in '" + expression +
                               "': " + r["exceptionDetails"].dump());
    return r["result"].value("value", Json());
  }

  // The page's viewport in CSS pixels (screenshots have this size).
  void set_viewport(int width, int height) {
    call("Emulation.setDeviceMetricsOverride",
         {{"width", width}, {"height", height}, {"deviceScaleFactor", 1}, {"mobile", false}},
         session_);
  }

  // A PNG of the open page's viewport (Page.captureScreenshot, base64-decoded).
  std::string screenshot_png() {
    const Json r = call("Page.captureScreenshot", {{"format", "png"}}, session_);
    return base64_decode(r["data"].get<std::string>());
  }

 private:
  static std::string base64_decode(const std::string& text) {
    static const std::string alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    uint32_t bits = 0;
    int count = 0;
    for (char c : text) {
      const size_t v = alphabet.find(c);
      if (v == std::string::npos) continue;  // '=' padding, whitespace
      bits = (bits << 6) | static_cast<uint32_t>(v);
      count += 6;
      if (count >= 8) {
        count -= 8;
        out += static_cast<char>((bits >> count) & 0xFF);
      }
    }
    return out;
  }

  // Sends a command and returns its "result", skipping events and other replies.
  Json call(const std::string& method, const Json& params, const std::string& session = "",
            std::chrono::seconds timeout = std::chrono::seconds(30)) {
    Json message = {{"id", ++next_id_}, {"method", method}, {"params", params}};
    if (!session.empty()) message["sessionId"] = session;
    const std::string bytes = message.dump() + '\0';
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = write(to_browser_, bytes.data() + sent, bytes.size() - sent);
      if (n <= 0) throw std::runtime_error(method + ": the browser is gone");
      sent += static_cast<size_t>(n);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      for (size_t end; (end = buffer_.find('\0')) != std::string::npos;) {
        const Json reply = Json::parse(buffer_.substr(0, end), nullptr, false);
        buffer_.erase(0, end + 1);
        if (reply.is_discarded() || reply.value("id", -1) != next_id_) continue;
        if (reply.contains("error")) throw std::runtime_error(method + ": " + reply.dump());
        return reply["result"];
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p = {from_browser_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0)
        throw std::runtime_error(method + ": no answer from the browser in time");
      char chunk[65536];
      const ssize_t n = read(from_browser_, chunk, sizeof(chunk));
      if (n <= 0) throw std::runtime_error(method + ": the browser closed its pipe");
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  pid_t pid_ = -1;
  int to_browser_ = -1, from_browser_ = -1;
  std::string buffer_;
  int next_id_ = 0;
  std::string session_;
};

}  // namespace lmstack::serve::test
