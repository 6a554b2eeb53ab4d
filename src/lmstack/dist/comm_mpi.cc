// MpiComm: comm.h over MPI-3 non-blocking collectives (MPI_Iallreduce,
// MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Ibcast, MPI_Ialltoall, MPI_Isend/Irecv).
// bf16 reductions: the input is widened into an f32 scratch, MPI reduces that in f32, and the
// Request's completion rounds the result back once into the caller's bf16 buffer (comm.h).
// Progress: OpenMPI advances non-blocking collectives only inside MPI calls, so a caller
// overlapping a long computation should call Request::test() now and then (docs/dist.md).
#include "lmstack/dist/comm_mpi.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lmstack/core/error.h"
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

// A started MPI operation. For a bf16 reduction it owns the f32 scratch and, on completion,
// rounds scratch[out_offset, out_offset + out_count) into `bf16_out`.
class MpiRequest final : public Request {
 public:
  explicit MpiRequest(int rank) : rank_(rank) {}
  ~MpiRequest() override {
    if (done_) return;
    try {
      wait();
    } catch (const std::exception& e) {
      abort_all(std::string("a dropped request failed: ") + e.what());
    }
  }
  void wait() override {
    if (done_) return;
    MPI_CHECK(rank_, MPI_Wait(&req_, MPI_STATUS_IGNORE));
    finish();
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    MPI_CHECK(rank_, MPI_Test(&req_, &flag, MPI_STATUS_IGNORE));
    if (flag) finish();
    return done_;
  }

  MPI_Request req_ = MPI_REQUEST_NULL;
  std::vector<float> scratch_;
  void* bf16_out_ = nullptr;
  int64_t out_offset_ = 0, out_count_ = 0;

 private:
  void finish() {
    if (bf16_out_) f32_to_bf16_into(scratch_.data() + out_offset_, bf16_out_, out_count_);
    scratch_ = {};
    done_ = true;
  }
  int rank_;
  bool done_ = false;
};

class MpiComm final : public Comm {
 public:
  MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_CHECK(-1, MPI_Comm_rank(comm_, &rank_));
    MPI_CHECK(rank_, MPI_Comm_size(comm_, &size_));
    MPI_CHECK(rank_, MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  }
  ~MpiComm() override {
    if (owned_ && mpi_active()) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  std::unique_ptr<Comm> split(int color, int key) override {
    MPI_Comm out = MPI_COMM_NULL;
    MPI_CHECK(rank_, MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out));
    if (out == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiComm>(out, true);
  }

  RequestPtr iall_reduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    const int n = mpi_count(count, "all_reduce", rank_);
    auto r = std::make_unique<MpiRequest>(rank_);
    record(CommKind::kAllReduce, count * comm_element_bytes(reduction_dtype(dtype), "all_reduce"));
    if (dtype == DType::kBF16) {
      r->scratch_ = bf16_to_f32_scratch(buf, count);
      r->bf16_out_ = buf;
      r->out_count_ = count;
      MPI_CHECK(rank_, MPI_Iallreduce(MPI_IN_PLACE, r->scratch_.data(), n, MPI_FLOAT, mpi_op(op),
                                      comm_, &r->req_));
    } else {
      MPI_CHECK(rank_,
                MPI_Iallreduce(MPI_IN_PLACE, buf, n, mpi_type(dtype), mpi_op(op), comm_, &r->req_));
    }
    return r;
  }

  RequestPtr ireduce_scatter(const void* send, void* recv, int64_t count, DType dtype,
                             ReduceOp op) override {
    const int64_t eb = comm_element_bytes(dtype, "reduce_scatter");
    const int n = mpi_count(count, "reduce_scatter", rank_);
    mpi_count(count * size_, "reduce_scatter", rank_);
    auto r = std::make_unique<MpiRequest>(rank_);
    record(CommKind::kReduceScatter,
           count * size_ * comm_element_bytes(reduction_dtype(dtype), "reduce_scatter"));
    if (dtype == DType::kBF16) {
      // One scratch: the widened input, then the f32 result in its first `count` elements
      // (MPI_IN_PLACE semantics of MPI_Reduce_scatter_block).
      r->scratch_ = bf16_to_f32_scratch(send, count * size_);
      r->bf16_out_ = recv;
      r->out_count_ = count;
      MPI_CHECK(rank_, MPI_Ireduce_scatter_block(MPI_IN_PLACE, r->scratch_.data(), n, MPI_FLOAT,
                                                 mpi_op(op), comm_, &r->req_));
      return r;
    }
    const char* s = static_cast<const char*>(send);
    const char* d = static_cast<const char*>(recv);
    if (d < s + count * size_ * eb && s < d + count * eb) {
      // MPI forbids aliasing send and recv; ZeRO often reduces into a chunk of its own input.
      std::vector<char> copy(s, s + count * size_ * eb);
      const int rc =
          MPI_Reduce_scatter_block(copy.data(), recv, n, mpi_type(dtype), mpi_op(op), comm_);
      MPI_CHECK(rank_, rc);
      return r;  // req_ stays MPI_REQUEST_NULL: MPI_Wait on it returns at once
    }
    MPI_CHECK(rank_, MPI_Ireduce_scatter_block(send, recv, n, mpi_type(dtype), mpi_op(op), comm_,
                                               &r->req_));
    return r;
  }

  RequestPtr iall_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    const int64_t eb = comm_element_bytes(dtype, "all_gather");
    const int n = mpi_count(count, "all_gather", rank_);
    mpi_count(count * size_, "all_gather", rank_);
    auto r = std::make_unique<MpiRequest>(rank_);
    record(CommKind::kAllGather, count * size_ * eb);
    // In place when the caller's input already sits at its chunk of the output.
    const bool in_place = send == static_cast<const char*>(recv) + rank_ * count * eb;
    MPI_CHECK(rank_, MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, mpi_type(dtype), recv, n,
                                    mpi_type(dtype), comm_, &r->req_));
    return r;
  }

  RequestPtr ibroadcast(void* buf, int64_t count, DType dtype, int root) override {
    const int64_t eb = comm_element_bytes(dtype, "broadcast");
    check_peer(root, "broadcast root");
    auto r = std::make_unique<MpiRequest>(rank_);
    record(CommKind::kBroadcast, count * eb);
    MPI_CHECK(rank_, MPI_Ibcast(buf, mpi_count(count, "broadcast", rank_), mpi_type(dtype), root,
                                comm_, &r->req_));
    return r;
  }

  RequestPtr iall_to_all(const void* send, void* recv, int64_t count, DType dtype) override {
    const int64_t eb = comm_element_bytes(dtype, "all_to_all");
    const int n = mpi_count(count, "all_to_all", rank_);
    auto r = std::make_unique<MpiRequest>(rank_);
    record(CommKind::kAllToAll, count * size_ * eb);
    MPI_CHECK(rank_,
              MPI_Ialltoall(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_, &r->req_));
    return r;
  }

  RequestPtr isend(const void* buf, int64_t count, DType dtype, int dst, int tag) override {
    const int64_t eb = comm_element_bytes(dtype, "send");
    check_peer(dst, "send destination");
    auto r = std::make_unique<MpiRequest>(rank_);
    record(CommKind::kP2p, count * eb);
    MPI_CHECK(rank_, MPI_Isend(buf, mpi_count(count, "send", rank_), mpi_type(dtype), dst, tag,
                               comm_, &r->req_));
    return r;
  }

  RequestPtr irecv(void* buf, int64_t count, DType dtype, int src, int tag) override {
    comm_element_bytes(dtype, "recv");
    check_peer(src, "recv source");
    auto r = std::make_unique<MpiRequest>(rank_);
    MPI_CHECK(rank_, MPI_Irecv(buf, mpi_count(count, "recv", rank_), mpi_type(dtype), src, tag,
                               comm_, &r->req_));
    return r;
  }

  void barrier() override { MPI_CHECK(rank_, MPI_Barrier(comm_)); }

 private:
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_)
      throw_error<DistError>("rank {}: {} {} outside the group of {}", rank_, what, peer, size_);
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = -1, size_ = 0;
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
  if (provided < MPI_THREAD_SERIALIZED)
    throw_error<DistError>("MPI provides thread level {}; lmstack needs MPI_THREAD_SERIALIZED",
                           provided);
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false);
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace lmstack::dist
