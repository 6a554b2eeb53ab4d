// The router of disaggregated serving (`lmstack serve --role router`): the address clients
// use. It is a byte-level HTTP reverse proxy: each client connection carries one request,
// which goes to a decode server (round robin over --decode) with two headers changed:
// X-Lmstack-Prefill names the prefill server that decode server must fetch the prompt's KV
// from (round robin over --prefill), and Connection: close. The answer, streaming or not,
// is piped back unchanged, so clients see exactly a single server's API. It parses nothing
// but the request head and holds no model. docs/disaggregation.md has the whole picture.
//
// Thread safety: serve() runs the accept loop on its caller's thread, one thread per
// connection; stop() may be called from any thread.
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace lmstack::serve {

struct ProxyRouterOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                                     // 0: any free port (see bind())
  std::vector<std::string> prefill_urls, decode_urls;  // "http://host:port", at least one each
  double read_timeout_s = 30;                          // for the request head
  double shutdown_grace_s = 5;  // stop(): connections in flight get this long to finish
};

class ProxyRouter {
 public:
  // ConfigError when a URL is not http://host:port or a list is empty.
  explicit ProxyRouter(ProxyRouterOptions options);
  ~ProxyRouter();
  ProxyRouter(const ProxyRouter&) = delete;
  ProxyRouter& operator=(const ProxyRouter&) = delete;

  int bind();    // the port; IoError when the address is unavailable
  void serve();  // until stop(), then waits up to the grace for open connections
  void stop();

 private:
  struct Backend {
    std::string url, host, port;
  };
  void handle(int client);
  // The request head with the two headers replaced, or an error text when it is no HTTP head.
  bool rewrite_head(std::string& head, const std::string& prefill_url) const;

  ProxyRouterOptions options_;
  std::vector<Backend> prefill_, decode_;
  int listener_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_{0};
  std::atomic<int> open_{0};
};

}  // namespace lmstack::serve
