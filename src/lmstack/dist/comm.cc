// The backend-independent part of comm.h: the byte cost model behind CommStats and the dtype
// and reduction helpers of comm_util.h. Cost model (Patarasuk & Yuan 2009 for the ring;
// nccl-tests' PERFORMANCE.md uses the same factors for its bus bandwidth): a ring all-reduce
// of S bytes sends 2(n-1)/n S per rank, reduce-scatter / all-gather / all-to-all (n-1)/n S,
// broadcast and send S.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"
#include "lmstack/dist/comm_util.h"

namespace lmstack::dist {

int64_t modeled_bytes_sent(CommKind kind, int64_t payload_bytes, int n) {
  if (n <= 1) return 0;
  switch (kind) {
    case CommKind::kAllReduce:
      return 2 * (n - 1) * payload_bytes / n;
    case CommKind::kReduceScatter:
    case CommKind::kAllGather:
    case CommKind::kAllToAll:
      return (n - 1) * payload_bytes / n;
    case CommKind::kBroadcast:
    case CommKind::kP2p:
      return payload_bytes;
  }
  return 0;
}

void Comm::record(CommKind kind, int64_t payload_bytes) {
  int64_t* const fields[] = {&stats_.all_reduce_bytes, &stats_.reduce_scatter_bytes,
                             &stats_.all_gather_bytes, &stats_.broadcast_bytes,
                             &stats_.p2p_bytes,        &stats_.all_to_all_bytes};  // CommKind order
  *fields[static_cast<size_t>(kind)] += modeled_bytes_sent(kind, payload_bytes, size());
  ++stats_.calls;
}

void Comm::record_all_to_all_v(const int64_t* send_counts, int64_t element_bytes) {
  for (int q = 0; q < size(); ++q)
    if (q != rank()) stats_.all_to_all_bytes += send_counts[q] * element_bytes;
  ++stats_.calls;
}

double sum_in_rank_order(Comm& comm, double value) {
  std::vector<double> all(static_cast<size_t>(comm.size()));
  comm.all_gather(&value, all.data(), sizeof(double), DType::kI8);
  double sum = 0;
  for (double v : all) sum += v;
  return sum;
}

void wait_unwaited(Request& request, bool abort_on_error) noexcept {
  try {
    request.wait();
  } catch (const std::exception& e) {
    if (abort_on_error) abort_all(std::string("an unwaited request failed: ") + e.what());
  }
}

int64_t comm_element_bytes(DType dtype, const char* op) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kI8:
      return 1;
    default:
      throw_error<DistError>("{}: dtype {} is not supported (f32, bf16, i32, i8)", op,
                             dtype_name(dtype));
  }
}

DType reduction_dtype(DType dtype) { return dtype == DType::kBF16 ? DType::kF32 : dtype; }

namespace {

template <class T>
void reduce_typed(T* acc, const T* x, int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] + x[i]);
      return;
    case ReduceOp::kMax:
      for (int64_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], x[i]);
      return;
    case ReduceOp::kMin:
      for (int64_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], x[i]);
      return;
  }
}

}  // namespace

void reduce_into(void* acc, const void* x, int64_t n, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kF32:
      return reduce_typed(static_cast<float*>(acc), static_cast<const float*>(x), n, op);
    case DType::kI32:
      return reduce_typed(static_cast<int32_t*>(acc), static_cast<const int32_t*>(x), n, op);
    case DType::kI8:
      return reduce_typed(static_cast<int8_t*>(acc), static_cast<const int8_t*>(x), n, op);
    default:
      LMSTACK_CHECK(false, "reduce_into: dtype {} is not a reduction dtype", dtype_name(dtype));
  }
}

std::vector<float> bf16_to_f32_scratch(const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  convert_bf16_to_f32(static_cast<const uint16_t*>(src), out.data(), n);
  return out;
}

void f32_to_bf16_into(const float* src, void* dst, int64_t n) {
  convert_f32_to_bf16(src, static_cast<uint16_t*>(dst), n);
}

}  // namespace lmstack::dist
