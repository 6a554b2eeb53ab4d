// A Chrome trace (the JSON that chrome://tracing and Perfetto open) of a training run: complete
// ("ph": "X") events with pid = rank, tid = 0 for compute (forward/backward spans) and tid = 1
// for communication, timestamps in microseconds of the steady clock (system-wide on one
// machine, so ranks line up). Not here: what the spans mean (data_parallel.cc, trainer.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "lmstack/dist/comm.h"

namespace lmstack::train {

class TraceRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kComputeTrack = 0, kCommTrack = 1;

  explicit TraceRecorder(int rank) : rank_(rank) {}
  static Clock::time_point now() { return Clock::now(); }
  void span(const std::string& name, const char* category, int track, Clock::time_point begin,
            Clock::time_point end);
  // Fraction of the time some communication is in flight (the union of track 1's spans) that
  // a span of `category` on track 0 covers: the share of communication the backward hides.
  double hidden_fraction(const char* category) const;
  // This rank's events as a JSON array body (comma-separated objects).
  std::string events_json() const;
  size_t size() const { return events_.size(); }

 private:
  struct Event {
    std::string name;
    const char* category;
    int track;
    int64_t begin_us, end_us;
  };
  int rank_;
  std::vector<Event> events_;
};

// Gathers every rank's events on rank 0, which writes `path` (IoError naming it). Collective.
void write_trace(const std::string& path, const TraceRecorder& trace, dist::Comm& comm);

}  // namespace lmstack::train
