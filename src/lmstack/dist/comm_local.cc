// LocalComm (comm_local.h): collectives between threads of one process. Each call posts a copy
// of its rank's input into a slot keyed by the call's sequence number; waiting blocks until all
// ranks have posted, then computes this rank's output from the copies. No algorithm beyond
// that: this backend exists for tests and single-process runs, not speed.
#include "lmstack/dist/comm_local.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "lmstack/core/error.h"
#include "lmstack/dist/comm_util.h"

namespace lmstack::dist {
namespace {

// Shared by a group and every group split from it: one lock, one abort flag.
struct Universe {
  std::mutex mu;
  std::condition_variable cv;
  bool aborted = false;  // GUARDED_BY(mu)
  std::string reason;    // GUARDED_BY(mu)
};

struct Group;

// One collective call, as seen by all ranks. Inputs are immutable once posted.
struct Slot {
  std::string op;
  int64_t count = 0;
  DType dtype = DType::kF32;
  int root = 0;
  std::vector<std::vector<char>> inputs;               // per rank
  std::map<int, std::shared_ptr<Group>> split_groups;  // split: color -> new group
  int posted = 0, finished = 0;
};

struct Group {
  std::shared_ptr<Universe> u;
  int n = 0;
  std::map<int64_t, std::shared_ptr<Slot>> slots;                           // GUARDED_BY(u->mu)
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mail;  // (src, dst, tag)
};

std::shared_ptr<Group> new_group(std::shared_ptr<Universe> u, int n) {
  auto g = std::make_shared<Group>();
  g->u = std::move(u);
  g->n = n;
  return g;
}

std::vector<char> bytes_of(const void* p, int64_t n) {
  const char* c = static_cast<const char*>(p);
  return std::vector<char>(c, c + n);
}

// The input a reduction posts: in its reduction dtype (bf16 widened to f32).
std::vector<char> reduction_input(const void* p, int64_t count, DType dtype, const char* op) {
  if (dtype != DType::kBF16) return bytes_of(p, count * comm_element_bytes(dtype, op));
  std::vector<float> f = bf16_to_f32_scratch(p, count);
  return bytes_of(f.data(), count * 4);
}

// Reduces chunk `chunk` (of `count` elements) over all ranks' inputs, in rank order, into out.
void reduce_chunk(const Slot& s, int64_t chunk, ReduceOp op, void* out) {
  const DType rd = reduction_dtype(s.dtype);
  const int64_t eb = comm_element_bytes(rd, s.op.c_str()), bytes = s.count * eb;
  std::vector<char> acc(s.inputs[0].begin() + chunk * bytes,
                        s.inputs[0].begin() + (chunk + 1) * bytes);
  for (size_t r = 1; r < s.inputs.size(); ++r)
    reduce_into(acc.data(), s.inputs[r].data() + chunk * bytes, s.count, rd, op);
  if (s.dtype == DType::kBF16)
    f32_to_bf16_into(reinterpret_cast<const float*>(acc.data()), out, s.count);
  else
    std::memcpy(out, acc.data(), static_cast<size_t>(bytes));
}

class DoneRequest final : public Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class LocalRequest final : public Request {
 public:
  using Finish = std::function<void(const Slot&)>;
  LocalRequest(std::shared_ptr<Group> g, int rank, int64_t seq, std::shared_ptr<Slot> slot,
               Finish finish)
      : g_(std::move(g)),
        rank_(rank),
        seq_(seq),
        slot_(std::move(slot)),
        finish_(std::move(finish)) {}
  ~LocalRequest() override { wait_unwaited(*this, false); }
  void wait() override {
    if (done_) return;
    std::unique_lock lock(g_->u->mu);
    g_->u->cv.wait(lock, [&] { return slot_->posted == g_->n || g_->u->aborted; });
    throw_if_aborted();
    lock.unlock();
    finish_(*slot_);
    lock.lock();
    if (++slot_->finished == g_->n) g_->slots.erase(seq_);
    done_ = true;
  }
  bool test() override {
    if (done_) return true;
    {
      std::lock_guard lock(g_->u->mu);
      throw_if_aborted();
      if (slot_->posted < g_->n) return false;
    }
    wait();
    return true;
  }

 private:
  void throw_if_aborted() {  // REQUIRES(g_->u->mu)
    if (g_->u->aborted) {
      done_ = true;
      throw_error<DistError>("rank {} of {}: {} aborted: {}", rank_, g_->n, slot_->op,
                             g_->u->reason);
    }
  }
  std::shared_ptr<Group> g_;
  int rank_;
  int64_t seq_;
  std::shared_ptr<Slot> slot_;
  Finish finish_;
  bool done_ = false;
};

class RecvRequest final : public Request {
 public:
  RecvRequest(std::shared_ptr<Group> g, int rank, int src, int tag, void* buf, int64_t bytes)
      : g_(std::move(g)), rank_(rank), src_(src), tag_(tag), buf_(buf), bytes_(bytes) {}
  ~RecvRequest() override { wait_unwaited(*this, false); }
  void wait() override {
    if (done_) return;
    std::unique_lock lock(g_->u->mu);
    auto& q = g_->mail[{src_, rank_, tag_}];
    g_->u->cv.wait(lock, [&] { return !q.empty() || g_->u->aborted; });
    done_ = true;
    if (g_->u->aborted)
      throw_error<DistError>("rank {}: recv from rank {} aborted: {}", rank_, src_, g_->u->reason);
    std::vector<char> msg = std::move(q.front());
    q.pop_front();
    if (static_cast<int64_t>(msg.size()) != bytes_)
      throw_error<DistError>("rank {}: recv of {} bytes from rank {} (tag {}) got {} bytes", rank_,
                             bytes_, src_, tag_, msg.size());
    std::memcpy(buf_, msg.data(), msg.size());
  }
  bool test() override {
    {
      std::lock_guard lock(g_->u->mu);
      if (!done_ && g_->mail[{src_, rank_, tag_}].empty() && !g_->u->aborted) return false;
    }
    wait();
    return true;
  }

 private:
  std::shared_ptr<Group> g_;
  int rank_, src_, tag_;
  void* buf_;
  int64_t bytes_;
  bool done_ = false;
};

class LocalComm final : public Comm {
 public:
  LocalComm(std::shared_ptr<Group> g, int rank, std::string backend)
      : g_(std::move(g)), rank_(rank), backend_(std::move(backend)) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->n; }
  std::string backend() const override { return backend_; }

  std::unique_ptr<Comm> split(int color, int key) override {
    const int32_t ck[2] = {color, key};
    auto slot = post("split", 2, DType::kI32, 0, bytes_of(ck, sizeof ck));
    std::shared_ptr<Group> group;
    int new_rank = 0;
    LocalRequest(g_, rank_, seq_ - 1, slot, [&](const Slot& s) {
      if (color < 0) return;
      std::vector<std::pair<int32_t, int>> members;  // (key, old rank) of my color
      for (int r = 0; r < g_->n; ++r) {
        int32_t v[2];
        std::memcpy(v, s.inputs[static_cast<size_t>(r)].data(), sizeof v);
        if (v[0] == color) members.emplace_back(v[1], r);
      }
      std::sort(members.begin(), members.end());
      while (members[static_cast<size_t>(new_rank)].second != rank_) ++new_rank;
      std::lock_guard lock(g_->u->mu);  // the first member to get here creates the group
      auto& made = slot->split_groups[color];
      if (!made) made = new_group(g_->u, static_cast<int>(members.size()));
      group = made;
    }).wait();
    if (!group) return nullptr;
    return std::make_unique<LocalComm>(group, new_rank, "local");
  }

  RequestPtr iall_reduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    record(CommKind::kAllReduce, count * comm_element_bytes(reduction_dtype(dtype), "all_reduce"));
    if (g_->n == 1) return std::make_unique<DoneRequest>();
    return start("all_reduce", count, dtype, 0, reduction_input(buf, count, dtype, "all_reduce"),
                 [=](const Slot& s) { reduce_chunk(s, 0, op, buf); });
  }

  RequestPtr ireduce_scatter(const void* send, void* recv, int64_t count, DType dtype,
                             ReduceOp op) override {
    const int n = g_->n, r = rank_;
    record(CommKind::kReduceScatter,
           n * count * comm_element_bytes(reduction_dtype(dtype), "reduce_scatter"));
    return start("reduce_scatter", count, dtype, 0,
                 reduction_input(send, n * count, dtype, "reduce_scatter"),
                 [=](const Slot& s) { reduce_chunk(s, r, op, recv); });
  }

  RequestPtr iall_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    const int64_t bytes = count * comm_element_bytes(dtype, "all_gather");
    record(CommKind::kAllGather, g_->n * bytes);
    return start("all_gather", count, dtype, 0, bytes_of(send, bytes), [=](const Slot& s) {
      for (size_t q = 0; q < s.inputs.size(); ++q)
        std::memcpy(static_cast<char*>(recv) + q * bytes, s.inputs[q].data(), bytes);
    });
  }

  RequestPtr ibroadcast(void* buf, int64_t count, DType dtype, int root) override {
    const int64_t bytes = count * comm_element_bytes(dtype, "broadcast");
    check_peer(root, "broadcast root");
    record(CommKind::kBroadcast, bytes);
    if (g_->n == 1) return std::make_unique<DoneRequest>();
    const int me = rank_;
    return start("broadcast", count, dtype, root,
                 me == root ? bytes_of(buf, bytes) : std::vector<char>{}, [=](const Slot& s) {
                   if (me != root) std::memcpy(buf, s.inputs[root].data(), bytes);
                 });
  }

  RequestPtr iall_to_all(const void* send, void* recv, int64_t count, DType dtype) override {
    const int64_t bytes = count * comm_element_bytes(dtype, "all_to_all");
    const int n = g_->n, me = rank_;
    record(CommKind::kAllToAll, n * bytes);
    return start("all_to_all", count, dtype, 0, bytes_of(send, n * bytes), [=](const Slot& s) {
      for (size_t q = 0; q < s.inputs.size(); ++q)
        std::memcpy(static_cast<char*>(recv) + q * bytes, s.inputs[q].data() + me * bytes, bytes);
    });
  }

  // Each rank posts [its n send counts as int64][its send buffer]; a receiver reads its part
  // of every sender's buffer at the sender's displacement.
  RequestPtr iall_to_all_v(const void* send, const int64_t* send_counts, void* recv,
                           const int64_t* recv_counts, DType dtype) override {
    const int64_t eb = comm_element_bytes(dtype, "all_to_all_v");
    const int n = g_->n, me = rank_;
    record_all_to_all_v(send_counts, eb);
    int64_t total = 0;
    for (int q = 0; q < n; ++q) total += send_counts[q];
    const int64_t head = n * static_cast<int64_t>(sizeof(int64_t));
    std::vector<char> input(static_cast<size_t>(head + total * eb));
    std::memcpy(input.data(), send_counts, static_cast<size_t>(head));
    if (total > 0) std::memcpy(input.data() + head, send, static_cast<size_t>(total * eb));
    std::vector<int64_t> want(recv_counts, recv_counts + n);
    return start("all_to_all_v", 0, dtype, 0, std::move(input), [=](const Slot& s) {
      int64_t at = 0;
      for (int q = 0; q < n; ++q) {
        const auto* counts =
            reinterpret_cast<const int64_t*>(s.inputs[static_cast<size_t>(q)].data());
        int64_t from = 0;
        for (int k = 0; k < me; ++k) from += counts[k];
        if (counts[me] != want[static_cast<size_t>(q)])
          throw_error<DistError>("all_to_all_v on rank {}: rank {} sends {} elements, {} expected",
                                 me, q, counts[me], want[static_cast<size_t>(q)]);
        if (counts[me] > 0)
          std::memcpy(static_cast<char*>(recv) + at * eb,
                      s.inputs[static_cast<size_t>(q)].data() + head + from * eb,
                      static_cast<size_t>(counts[me] * eb));
        at += counts[me];
      }
    });
  }

  RequestPtr isend(const void* buf, int64_t count, DType dtype, int dst, int tag) override {
    const int64_t bytes = count * comm_element_bytes(dtype, "send");
    check_peer(dst, "send destination");
    record(CommKind::kP2p, bytes);
    {
      std::lock_guard lock(g_->u->mu);
      g_->mail[{rank_, dst, tag}].push_back(bytes_of(buf, bytes));
    }
    g_->u->cv.notify_all();
    return std::make_unique<DoneRequest>();
  }

  RequestPtr irecv(void* buf, int64_t count, DType dtype, int src, int tag) override {
    const int64_t bytes = count * comm_element_bytes(dtype, "recv");
    check_peer(src, "recv source");
    return std::make_unique<RecvRequest>(g_, rank_, src, tag, buf, bytes);
  }

  void barrier() override {
    if (g_->n > 1) start("barrier", 0, DType::kI8, 0, {}, [](const Slot&) {})->wait();
  }

 private:
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= g_->n)
      throw_error<DistError>("rank {}: {} {} outside the group of {}", rank_, what, peer, g_->n);
  }

  // Posts this rank's input for its next collective; throws DistError if another rank's call
  // with the same sequence number is a different operation or shape.
  std::shared_ptr<Slot> post(const char* op, int64_t count, DType dtype, int root,
                             std::vector<char> input) {
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard lock(g_->u->mu);
      const int64_t seq = seq_++;
      std::shared_ptr<Slot>& s = g_->slots[seq];
      if (!s) {
        s = std::make_shared<Slot>(Slot{op, count, dtype, root, {}, {}, 0, 0});
        s->inputs.resize(static_cast<size_t>(g_->n));
      } else if (s->op != op || s->count != count || s->dtype != dtype || s->root != root) {
        throw_error<DistError>(
            "rank {}: collective #{} is {}(count {}, {}, root {}) here but {}(count {}, {}, root "
            "{}) on another rank",
            rank_, seq, op, count, dtype_name(dtype), root, s->op, s->count, dtype_name(s->dtype),
            s->root);
      }
      s->inputs[static_cast<size_t>(rank_)] = std::move(input);
      ++s->posted;
      slot = s;
    }
    g_->u->cv.notify_all();
    return slot;
  }

  RequestPtr start(const char* op, int64_t count, DType dtype, int root, std::vector<char> input,
                   LocalRequest::Finish finish) {
    auto slot = post(op, count, dtype, root, std::move(input));
    return std::make_unique<LocalRequest>(g_, rank_, seq_ - 1, slot, std::move(finish));
  }

  std::shared_ptr<Group> g_;
  int rank_;
  std::string backend_;
  int64_t seq_ = 0;
};

std::vector<std::unique_ptr<Comm>> make_group(const std::shared_ptr<Universe>& u, int n,
                                              const std::string& backend) {
  if (n < 1) throw_error<DistError>("a local group needs at least 1 rank, got {}", n);
  auto g = new_group(u, n);
  std::vector<std::unique_ptr<Comm>> comms;
  for (int r = 0; r < n; ++r) comms.push_back(std::make_unique<LocalComm>(g, r, backend));
  return comms;
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

std::unique_ptr<Comm> make_self_comm() {
  return std::move(make_group(std::make_shared<Universe>(), 1, "self")[0]);
}

std::vector<std::unique_ptr<Comm>> make_local_group(int n) {
  return make_group(std::make_shared<Universe>(), n, "local");
}

void run_local(int n, const std::function<void(Comm&)>& fn) {
  auto u = std::make_shared<Universe>();
  auto comms = make_group(u, n, "local");
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*comms[static_cast<size_t>(r)]);
      } catch (...) {
        std::lock_guard lock(u->mu);
        if (!u->aborted) {  // the first failure aborts the group; later ones are its echoes
          first = std::current_exception();
          u->aborted = true;
          u->reason = "rank " + std::to_string(r) + " failed: " + what_of(first);
        }
        u->cv.notify_all();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace lmstack::dist
