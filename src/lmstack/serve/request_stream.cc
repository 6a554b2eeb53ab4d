// Engine-to-consumer event queue (see request_stream.h).
#include "lmstack/serve/request_stream.h"

namespace lmstack::serve {

std::optional<StreamEvent> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  StreamEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void RequestStream::push(StreamEvent event) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(event));
  }
  cv_.notify_one();
}

}  // namespace lmstack::serve
