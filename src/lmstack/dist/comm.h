// The communication layer (glossary layer 2): a `Comm` is a group of ranks that can run
// collectives and point-to-point transfers on host buffers. Backends: `SelfComm` (a world of
// one process; every collective is a copy or a no-op, so a single process needs no launcher)
// and `MpiComm` (OpenMPI). The interface is the one an NCCL backend implements too: buffers
// are raw pointers plus element counts and a dtype, every call has a non-blocking form that
// returns a `Request`, and groups come from `split` (MPI_Comm_split / ncclCommSplit).
//
// bf16 buffers are reduced in f32 (each element converted, summed in f32, rounded once), as
// NCCL and PyTorch's reducers do for 16-bit types, so the result does not depend on the
// reduction tree more than f32 summation does.
//
// Every collective adds the bytes it moved (sent by this rank, by the standard cost model of
// each algorithm: ring all-reduce 2(n-1)/n * bytes, reduce-scatter and all-gather (n-1)/n *
// bytes) to `stats()`, so training logs and `calc check` can compare them with calc comm.
//
// Errors: a failing call throws lmstack::DistError naming the operation and the rank. A rank
// that throws out of main calls `abort_all()`, so the other ranks exit within seconds instead
// of hanging in their next collective.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lmstack/core/dtype.h"

namespace lmstack::dist {

enum class ReduceOp : uint8_t { kSum, kMax, kMin };

// A pending non-blocking operation. `wait` blocks until it completes (and, for bf16
// reductions, until the result has been converted back into the caller's buffer); `test`
// polls. Destroying a Request that has not completed waits for it (a buffer must never be
// freed under a transfer in flight).
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};
using RequestPtr = std::unique_ptr<Request>;

// Bytes moved by this rank per kind of operation (see the header comment for the model).
struct CommStats {
  int64_t all_reduce_bytes = 0, reduce_scatter_bytes = 0, all_gather_bytes = 0;
  int64_t broadcast_bytes = 0, p2p_bytes = 0, all_to_all_bytes = 0;
  int64_t calls = 0;
  int64_t total() const {
    return all_reduce_bytes + reduce_scatter_bytes + all_gather_bytes + broadcast_bytes +
           p2p_bytes + all_to_all_bytes;
  }
};

// Bytes this rank sends for one collective on `payload_bytes` over `n` ranks, by the cost
// model in the header comment (what stats() adds). Kinds: the CommStats fields.
enum class CommKind : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kP2p,
  kAllToAll
};
// payload_bytes: all-reduce/broadcast/p2p: the buffer; reduce-scatter: the input
// (size()*count); all-gather: the output (size()*count); all-to-all: one rank's send buffer.
int64_t modeled_bytes_sent(CommKind kind, int64_t payload_bytes, int n);

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "self", "mpi", "nccl"

  // Ranks passing the same `color` form one new group, ordered by `key` (then old rank).
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;

  // Non-blocking collectives. Counts are in elements of `dtype` (kF32, kBF16, kI32 or kI8
  // as bytes). In-place where there is one buffer.
  //   all_reduce:     buf[count] on every rank becomes the reduction over ranks.
  //   reduce_scatter: send[size()*count] -> recv[count] = reduction of chunk rank() of all.
  //   all_gather:     send[count] -> recv[size()*count], chunk r from rank r; send may be
  //                   recv's own chunk (recv + rank()*count: in place).
  //   broadcast:      buf[count] from `root` to all.
  //   all_to_all:     send[size()*count] -> recv[size()*count]; chunk r of rank q's send
  //                   lands as chunk q of rank r's recv.
  //   all_to_all_v:   the same with a count per peer (MPI_Alltoallv): send holds, in rank
  //                   order, send_counts[r] elements for each rank r; recv gets, in rank order,
  //                   recv_counts[q] elements from each rank q. recv_counts[q] must equal rank
  //                   q's send_counts[rank()] (DistError otherwise where the backend can see
  //                   it); zero counts are allowed. The count arrays are copied by the call.
  virtual RequestPtr iall_reduce(void* buf, int64_t count, DType dtype,
                                 ReduceOp op = ReduceOp::kSum) = 0;
  virtual RequestPtr ireduce_scatter(const void* send, void* recv, int64_t count, DType dtype,
                                     ReduceOp op = ReduceOp::kSum) = 0;
  virtual RequestPtr iall_gather(const void* send, void* recv, int64_t count, DType dtype) = 0;
  virtual RequestPtr ibroadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  virtual RequestPtr iall_to_all(const void* send, void* recv, int64_t count, DType dtype) = 0;
  virtual RequestPtr iall_to_all_v(const void* send, const int64_t* send_counts, void* recv,
                                   const int64_t* recv_counts, DType dtype) = 0;
  virtual RequestPtr isend(const void* buf, int64_t count, DType dtype, int dst, int tag) = 0;
  virtual RequestPtr irecv(void* buf, int64_t count, DType dtype, int src, int tag) = 0;
  virtual void barrier() = 0;

  // Blocking forms: start, then wait.
  void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op = ReduceOp::kSum) {
    iall_reduce(buf, count, dtype, op)->wait();
  }
  void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype,
                      ReduceOp op = ReduceOp::kSum) {
    ireduce_scatter(send, recv, count, dtype, op)->wait();
  }
  void all_gather(const void* send, void* recv, int64_t count, DType dtype) {
    iall_gather(send, recv, count, dtype)->wait();
  }
  void broadcast(void* buf, int64_t count, DType dtype, int root) {
    ibroadcast(buf, count, dtype, root)->wait();
  }
  void all_to_all(const void* send, void* recv, int64_t count, DType dtype) {
    iall_to_all(send, recv, count, dtype)->wait();
  }
  void all_to_all_v(const void* send, const int64_t* send_counts, void* recv,
                    const int64_t* recv_counts, DType dtype) {
    iall_to_all_v(send, send_counts, recv, recv_counts, dtype)->wait();
  }
  void send(const void* buf, int64_t count, DType dtype, int dst, int tag = 0) {
    isend(buf, count, dtype, dst, tag)->wait();
  }
  void recv(void* buf, int64_t count, DType dtype, int src, int tag = 0) {
    irecv(buf, count, dtype, src, tag)->wait();
  }

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 protected:
  // Adds one call moving `payload_bytes` (see modeled_bytes_sent) to stats_.
  void record(CommKind kind, int64_t payload_bytes);
  // Adds one all_to_all_v: the bytes it sends to the other ranks, exactly (Σ over peers q !=
  // rank() of send_counts[q]), which is what the uneven exchange of expert parallelism costs.
  void record_all_to_all_v(const int64_t* send_counts, int64_t element_bytes);

  CommStats stats_;
};

// The sum of one double per rank, added in rank order so that every rank gets the same bits
// (an all-gather, not an all-reduce, whose order MPI leaves to the library). Collective.
double sum_in_rank_order(Comm& comm, double value);

// The world: an MpiComm when this process was started by mpirun (OMPI_COMM_WORLD_SIZE or
// PMI_SIZE set) and lmstack was built with MPI, else a SelfComm. Initializes MPI on first
// use (MPI_THREAD_MULTIPLE required: each communicator runs its collectives on its own thread)
// and finalizes it at exit. A Comm itself is called from one thread at a time.
Comm& world();

// Ends every rank of the world now (MPI_Abort), after printing `why` with this rank's id.
[[noreturn]] void abort_all(const std::string& why, int exit_code = 1);

// True when this process was started by an MPI launcher (mpirun / srun): world() will be an
// MpiComm. Does not initialize anything.
bool launched_by_mpi();

}  // namespace lmstack::dist
