// RequestStream: the one-way channel from the engine loop to the thread that waits for a
// request's results (an HTTP handler, a test, the load generator). The engine pushes events
// (tokens, a finish per choice, then one final kDone or kError); the consumer pops them and
// may cancel, which the engine notices at its next step and frees the request's blocks.
//
// Thread safety: push() from the engine thread and next()/cancel() from one consumer thread
// may run concurrently; the queue is guarded by mu_.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "lmstack/model/generate.h"

namespace lmstack::serve {

// What a request cost and how long it took; the `usage` of the OpenAI response.
struct RequestUsage {
  int prompt_tokens = 0;
  int completion_tokens = 0;  // all choices together
  int cached_tokens = 0;      // prompt tokens reused from the prefix cache
  int num_preemptions = 0;
  double ttft_seconds = 0;  // arrival to the first generated token
  double e2e_seconds = 0;   // arrival to the last event
};

struct StreamEvent {
  enum class Kind {
    kToken,   // `token` of choice `choice` (token.token == -1: held-back text at the end)
    kFinish,  // choice `choice` ended with `finish_reason` ("stop", "length", "cancelled");
              // ended by an EOS token: `token` holds it and its sample (else token.token = -1)
    kDone,    // every choice ended; `usage` is final. Last event.
    kError,   // the request failed inside the engine (`error`). Last event.
  };
  Kind kind = Kind::kToken;
  int choice = 0;
  model::GeneratedToken token{};
  std::string finish_reason;
  RequestUsage usage;
  std::string error;
};

class RequestStream {
 public:
  explicit RequestStream(int64_t request_id) : id_(request_id) {}
  int64_t id() const { return id_; }

  // The next event, waiting up to `timeout`; nullopt when none came in time.
  std::optional<StreamEvent> next(std::chrono::milliseconds timeout);
  // Asks the engine to stop this request (client gone); idempotent.
  void cancel() { cancelled_.store(true); }
  bool is_cancelled() const { return cancelled_.load(); }

  void push(StreamEvent event);  // engine side

 private:
  int64_t id_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;  // GUARDED_BY(mu_)
};

}  // namespace lmstack::serve
