// CommThread: one thread per communicator that runs its collectives, in call order, as
// blocking calls (PyTorch's ProcessGroupMPI does the same). Why not MPI_Iallreduce & co.:
// OpenMPI's non-blocking collectives (libnbc) advance only inside MPI calls and measured 2-6x
// slower than the tuned blocking ones for 2-16 MB here (docs/dist.md); a thread inside the
// blocking call progresses the transfer while the caller computes, with no polling.
// Internal to dist/.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "lmstack/dist/comm.h"

namespace lmstack::dist {

class CommThread {
 public:
  CommThread();
  ~CommThread();  // runs what is queued, then joins
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `op` to run on the thread and returns its Request: wait() blocks until `op` ran,
  // rethrows what `op` threw, then runs `finish` (e.g. the bf16 rounding) on the waiting thread.
  // Operations run one at a time in submission order, so every rank issues its collectives on
  // this communicator in its own call order, as MPI requires.
  RequestPtr submit(std::function<void()> op, std::function<void()> finish = {});

  struct Task;  // one queued operation and its completion flag (comm_thread.cc)

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;  // GUARDED_BY(mu_)
  bool stop_ = false;                        // GUARDED_BY(mu_)
  std::thread thread_;                       // last: starts after the members above exist
};

}  // namespace lmstack::dist
