// CommThread (comm_thread.h): a FIFO of operations, one worker thread, and a Request per
// operation that waits on its completion flag.
#include "lmstack/dist/comm_thread.h"

#include "lmstack/dist/comm_util.h"

namespace lmstack::dist {

struct CommThread::Task {
  std::function<void()> op;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;  // GUARDED_BY(mu)
  std::exception_ptr error;
};

namespace {

class TaskRequest final : public Request {
 public:
  TaskRequest(std::shared_ptr<CommThread::Task> task, std::function<void()> finish)
      : task_(std::move(task)), finish_(std::move(finish)) {}
  ~TaskRequest() override { wait_unwaited(*this, true); }
  void wait() override {
    if (finished_) return;
    {
      std::unique_lock lock(task_->mu);
      task_->cv.wait(lock, [&] { return task_->done; });
    }
    finished_ = true;
    if (task_->error) std::rethrow_exception(task_->error);
    if (finish_) finish_();
  }
  bool test() override {
    if (finished_) return true;
    {
      std::lock_guard lock(task_->mu);
      if (!task_->done) return false;
    }
    wait();
    return true;
  }

 private:
  std::shared_ptr<CommThread::Task> task_;
  std::function<void()> finish_;
  bool finished_ = false;
};

}  // namespace

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

RequestPtr CommThread::submit(std::function<void()> op, std::function<void()> finish) {
  auto task = std::make_shared<Task>();
  task->op = std::move(op);
  {
    std::lock_guard lock(mu_);
    queue_.push_back(task);
  }
  cv_.notify_one();
  return std::make_unique<TaskRequest>(std::move(task), std::move(finish));
}

void CommThread::loop() {
  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task->op();
    } catch (...) {
      task->error = std::current_exception();
    }
    {
      std::lock_guard lock(task->mu);
      task->done = true;
    }
    task->cv.notify_all();
  }
}

}  // namespace lmstack::dist
