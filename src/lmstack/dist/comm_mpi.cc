// MpiComm: comm.h over MPI. Collectives are blocking MPI calls (MPI_Allreduce,
// MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Alltoall) run in call order on the
// communicator's CommThread, which makes them non-blocking for the caller and progresses them
// while it computes; send/recv are MPI_Isend/Irecv. bf16 reductions: the input is widened into
// an f32 scratch, MPI reduces that in f32, and Request::wait rounds the result back once into
// the caller's bf16 buffer (comm.h).
#include "lmstack/dist/comm_mpi.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/dist/comm_thread.h"
#include "lmstack/dist/comm_util.h"

namespace lmstack::dist {
namespace {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

// Wraps every MPI call once (STYLE.md "vendor calls are wrapped once").
#define MPI_CHECK(rank, call)                                                     \
  do {                                                                            \
    const int mpi_check_rc = (call);                                              \
    if (mpi_check_rc != MPI_SUCCESS)                                              \
      throw_error<DistError>("{} failed on rank {}: {} ({}:{})", #call, rank,     \
                             mpi_error_string(mpi_check_rc), __FILE__, __LINE__); \
  } while (0)

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kBF16:
      return MPI_UINT16_T;  // moved as 16-bit words; reduced via f32 scratch
    case DType::kI8:
      return MPI_INT8_T;
    default:
      break;
  }
  LMSTACK_CHECK(false, "mpi_type: {}", dtype_name(dtype));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_SUM;
}

int mpi_count(int64_t count, const char* op, int rank) {
  if (count < 0 || count > INT_MAX)
    throw_error<DistError>("{} on rank {}: count {} outside MPI's int range", op, rank, count);
  return static_cast<int>(count);
}

// A point-to-point transfer started with MPI_Isend / MPI_Irecv from the caller's thread (not
// through the CommThread: a blocking send queued before a receive could deadlock two ranks).
class P2pRequest final : public Request {
 public:
  explicit P2pRequest(int rank) : rank_(rank) {}
  ~P2pRequest() override { wait_unwaited(*this, true); }
  void wait() override {
    if (done_) return;
    done_ = true;
    MPI_CHECK(rank_, MPI_Wait(&req_, MPI_STATUS_IGNORE));
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    MPI_CHECK(rank_, MPI_Test(&req_, &flag, MPI_STATUS_IGNORE));
    done_ = flag != 0;
    return done_;
  }
  MPI_Request req_ = MPI_REQUEST_NULL;

 private:
  int rank_;
  bool done_ = false;
};

// Collectives run as blocking MPI calls on the communicator's CommThread (comm_thread.h says
// why); bf16 reductions reduce an f32 scratch and round back once in Request::wait.
class MpiComm final : public Comm {
 public:
  MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_CHECK(-1, MPI_Comm_rank(comm_, &rank_));
    MPI_CHECK(rank_, MPI_Comm_size(comm_, &size_));
    MPI_CHECK(rank_, MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    thread_ = std::make_unique<CommThread>();
  }
  ~MpiComm() override {
    thread_.reset();  // finishes queued collectives first
    if (owned_ && mpi_active()) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  std::unique_ptr<Comm> split(int color, int key) override {
    MPI_Comm out = MPI_COMM_NULL;
    run([&, c = comm_, r = rank_] {
      MPI_CHECK(r, MPI_Comm_split(c, color < 0 ? MPI_UNDEFINED : color, key, &out));
    })->wait();
    if (out == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiComm>(out, true);
  }

  RequestPtr iall_reduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    const int n = mpi_count(count, "all_reduce", rank_);
    record(CommKind::kAllReduce, count * comm_element_bytes(reduction_dtype(dtype), "all_reduce"));
    if (dtype == DType::kBF16) {
      auto f = std::make_shared<std::vector<float>>(bf16_to_f32_scratch(buf, count));
      return run(
          [=, c = comm_, r = rank_] {
            MPI_CHECK(r, MPI_Allreduce(MPI_IN_PLACE, f->data(), n, MPI_FLOAT, mpi_op(op), c));
          },
          [=] { f32_to_bf16_into(f->data(), buf, count); });
    }
    return run([=, c = comm_, r = rank_] {
      MPI_CHECK(r, MPI_Allreduce(MPI_IN_PLACE, buf, n, mpi_type(dtype), mpi_op(op), c));
    });
  }

  RequestPtr ireduce_scatter(const void* send, void* recv, int64_t count, DType dtype,
                             ReduceOp op) override {
    const int64_t eb = comm_element_bytes(dtype, "reduce_scatter");
    const int n = mpi_count(count, "reduce_scatter", rank_);
    mpi_count(count * size_, "reduce_scatter", rank_);
    record(CommKind::kReduceScatter,
           count * size_ * comm_element_bytes(reduction_dtype(dtype), "reduce_scatter"));
    if (dtype == DType::kBF16) {
      // The widened input; MPI_IN_PLACE leaves the f32 result in its first `count` elements.
      auto f = std::make_shared<std::vector<float>>(bf16_to_f32_scratch(send, count * size_));
      return run(
          [=, c = comm_, r = rank_] {
            MPI_CHECK(
                r, MPI_Reduce_scatter_block(MPI_IN_PLACE, f->data(), n, MPI_FLOAT, mpi_op(op), c));
          },
          [=] { f32_to_bf16_into(f->data(), recv, count); });
    }
    const char* s = static_cast<const char*>(send);
    const char* d = static_cast<const char*>(recv);
    std::shared_ptr<std::vector<char>> copy;
    if (d < s + count * size_ * eb && s < d + count * eb) {
      // MPI forbids aliasing send and recv; ZeRO often reduces into a chunk of its own input.
      copy = std::make_shared<std::vector<char>>(s, s + count * size_ * eb);
    }
    return run([=, c = comm_, r = rank_] {
      const void* in = copy ? copy->data() : send;  // `copy` lives as long as this operation
      MPI_CHECK(r, MPI_Reduce_scatter_block(in, recv, n, mpi_type(dtype), mpi_op(op), c));
    });
  }

  RequestPtr iall_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    const int64_t eb = comm_element_bytes(dtype, "all_gather");
    const int n = mpi_count(count, "all_gather", rank_);
    mpi_count(count * size_, "all_gather", rank_);
    record(CommKind::kAllGather, count * size_ * eb);
    // In place when the caller's input already sits at its chunk of the output.
    const void* in =
        send == static_cast<const char*>(recv) + rank_ * count * eb ? MPI_IN_PLACE : send;
    return run([=, c = comm_, r = rank_] {
      MPI_CHECK(r, MPI_Allgather(in, n, mpi_type(dtype), recv, n, mpi_type(dtype), c));
    });
  }

  RequestPtr ibroadcast(void* buf, int64_t count, DType dtype, int root) override {
    const int64_t eb = comm_element_bytes(dtype, "broadcast");
    check_peer(root, "broadcast root");
    const int n = mpi_count(count, "broadcast", rank_);
    record(CommKind::kBroadcast, count * eb);
    return run(
        [=, c = comm_, r = rank_] { MPI_CHECK(r, MPI_Bcast(buf, n, mpi_type(dtype), root, c)); });
  }

  RequestPtr iall_to_all(const void* send, void* recv, int64_t count, DType dtype) override {
    const int64_t eb = comm_element_bytes(dtype, "all_to_all");
    const int n = mpi_count(count, "all_to_all", rank_);
    record(CommKind::kAllToAll, count * size_ * eb);
    return run([=, c = comm_, r = rank_] {
      MPI_CHECK(r, MPI_Alltoall(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), c));
    });
  }

  RequestPtr iall_to_all_v(const void* send, const int64_t* send_counts, void* recv,
                           const int64_t* recv_counts, DType dtype) override {
    const int64_t eb = comm_element_bytes(dtype, "all_to_all_v");
    record_all_to_all_v(send_counts, eb);
    // MPI_Alltoallv's int counts and displacements, owned by the operation.
    auto v = std::make_shared<std::vector<int>>(4 * static_cast<size_t>(size_));
    int* sc = v->data();
    int* sd = sc + size_;
    int* rc = sd + size_;
    int* rd = rc + size_;
    int64_t so = 0, ro = 0;
    for (int q = 0; q < size_; ++q) {
      sc[q] = mpi_count(send_counts[q], "all_to_all_v", rank_);
      rc[q] = mpi_count(recv_counts[q], "all_to_all_v", rank_);
      sd[q] = mpi_count(so, "all_to_all_v", rank_);
      rd[q] = mpi_count(ro, "all_to_all_v", rank_);
      so += send_counts[q], ro += recv_counts[q];
    }
    return run([=, c = comm_, r = rank_, n = size_] {
      int* b = v->data();
      MPI_CHECK(r, MPI_Alltoallv(send, b, b + n, mpi_type(dtype), recv, b + 2 * n, b + 3 * n,
                                 mpi_type(dtype), c));
    });
  }

  RequestPtr isend(const void* buf, int64_t count, DType dtype, int dst, int tag) override {
    const int64_t eb = comm_element_bytes(dtype, "send");
    check_peer(dst, "send destination");
    auto r = std::make_unique<P2pRequest>(rank_);
    record(CommKind::kP2p, count * eb);
    MPI_CHECK(rank_, MPI_Isend(buf, mpi_count(count, "send", rank_), mpi_type(dtype), dst, tag,
                               comm_, &r->req_));
    return r;
  }

  RequestPtr irecv(void* buf, int64_t count, DType dtype, int src, int tag) override {
    comm_element_bytes(dtype, "recv");
    check_peer(src, "recv source");
    auto r = std::make_unique<P2pRequest>(rank_);
    MPI_CHECK(rank_, MPI_Irecv(buf, mpi_count(count, "recv", rank_), mpi_type(dtype), src, tag,
                               comm_, &r->req_));
    return r;
  }

  void barrier() override {
    run([c = comm_, r = rank_] { MPI_CHECK(r, MPI_Barrier(c)); })->wait();
  }

 private:
  RequestPtr run(std::function<void()> op, std::function<void()> finish = {}) {
    return thread_->submit(std::move(op), std::move(finish));
  }
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_)
      throw_error<DistError>("rank {}: {} {} outside the group of {}", rank_, what, peer, size_);
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = -1, size_ = 0;
  std::unique_ptr<CommThread> thread_;  // runs every collective of comm_
};

void finalize_at_exit() {
  if (mpi_active()) MPI_Finalize();
}

}  // namespace

bool mpi_active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

std::unique_ptr<Comm> make_mpi_world() {
  int provided = 0;
  MPI_CHECK(-1, MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  std::atexit(finalize_at_exit);
  // Each communicator's CommThread calls MPI while the caller may post sends and receives.
  if (provided < MPI_THREAD_MULTIPLE)
    throw_error<DistError>("MPI provides thread level {}; lmstack needs MPI_THREAD_MULTIPLE",
                           provided);
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false);
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace lmstack::dist
