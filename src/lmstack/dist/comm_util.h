// Pieces every Comm backend shares: which dtypes a collective accepts, the dtype a reduction
// travels and accumulates in (bf16 -> f32, see comm.h), and the element-wise reduction used
// by the in-process backend. Internal to dist/.
#pragma once

#include <cstdint>
#include <vector>

#include "lmstack/core/dtype.h"
#include "lmstack/dist/comm.h"

namespace lmstack::dist {

// Bytes per element of a dtype a Comm accepts (f32, bf16, i32, i8); throws DistError naming
// `op` and the dtype for any other.
int64_t comm_element_bytes(DType dtype, const char* op);

// The dtype a reduction of `dtype` is carried and accumulated in: f32 for bf16, else itself.
DType reduction_dtype(DType dtype);

// acc[i] = op(acc[i], x[i]) for i < n; both in `dtype` (f32, i32 or i8; checked).
void reduce_into(void* acc, const void* x, int64_t n, DType dtype, ReduceOp op);

// A Request's destructor: waits for it (comm.h: a buffer is never freed under a transfer in
// flight). An error there reaches no caller: abort_on_error ends every rank (abort_all), else
// it is dropped (an in-process group's abort, reported by the rank that caused it).
void wait_unwaited(Request& request, bool abort_on_error) noexcept;

// bf16 <-> f32 for a reduction buffer (thin names over core/half.h's converters).
std::vector<float> bf16_to_f32_scratch(const void* src, int64_t n);
void f32_to_bf16_into(const float* src, void* dst, int64_t n);

}  // namespace lmstack::dist
