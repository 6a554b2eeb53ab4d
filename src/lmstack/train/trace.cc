// Chrome trace recording and writing (see trace.h).
#include "lmstack/train/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "lmstack/core/file.h"
#include "lmstack/core/json.h"

namespace lmstack::train {
namespace {

int64_t micros(TraceRecorder::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

}  // namespace

void TraceRecorder::span(const std::string& name, const char* category, int track,
                         Clock::time_point begin, Clock::time_point end) {
  events_.push_back({name, category, track, micros(begin), std::max(micros(end), micros(begin))});
}

double TraceRecorder::hidden_fraction(const char* category) const {
  // The union of the communication spans (buckets in flight together count once), and the
  // part of it that a compute span of `category` covers (those never overlap each other).
  std::vector<std::pair<int64_t, int64_t>> comm;
  for (const Event& c : events_)
    if (c.track == kCommTrack) comm.emplace_back(c.begin_us, c.end_us);
  std::sort(comm.begin(), comm.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& c : comm)
    if (!merged.empty() && c.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, c.second);
    else
      merged.push_back(c);
  int64_t total = 0, hidden = 0;
  for (const auto& [b, e] : merged) {
    total += e - b;
    for (const Event& x : events_)
      if (x.track == kComputeTrack && std::strcmp(x.category, category) == 0)
        hidden += std::max<int64_t>(0, std::min(e, x.end_us) - std::max(b, x.begin_us));
  }
  return total > 0 ? static_cast<double>(hidden) / static_cast<double>(total) : 0.0;
}

std::string TraceRecorder::events_json() const {
  std::string out;
  for (const Event& e : events_) {
    if (!out.empty()) out += ",\n";
    out += Json{{"name", e.name},
                {"cat", e.category},
                {"ph", "X"},
                {"pid", rank_},
                {"tid", e.track},
                {"ts", e.begin_us},
                {"dur", e.end_us - e.begin_us}}
               .dump();
  }
  return out;
}

void write_trace(const std::string& path, const TraceRecorder& trace, dist::Comm& comm) {
  const std::string mine = trace.events_json();
  const int n = comm.size();
  std::vector<int32_t> lengths(static_cast<size_t>(n));
  const int32_t my_length = static_cast<int32_t>(mine.size());
  comm.all_gather(&my_length, lengths.data(), 1, DType::kI32);
  if (comm.rank() != 0) {
    if (my_length > 0) comm.send(mine.data(), my_length, DType::kI8, 0, 7);
    return;
  }
  std::string body = mine;
  for (int r = 1; r < n; ++r) {
    std::string part(static_cast<size_t>(lengths[static_cast<size_t>(r)]), '\0');
    if (!part.empty()) comm.recv(part.data(), lengths[static_cast<size_t>(r)], DType::kI8, r, 7);
    if (!part.empty()) body += (body.empty() ? "" : ",\n") + part;
  }
  std::string meta;
  for (int r = 0; r < n; ++r)
    for (int t = 0; t < 2; ++t)
      meta += fmt::format(
          "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":"
          "\"{}\"}}}},\n",
          r, t, t == 0 ? "compute" : "communication");
  write_file_atomic(path,
                    "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + meta + body + "\n]}\n");
}

}  // namespace lmstack::train
