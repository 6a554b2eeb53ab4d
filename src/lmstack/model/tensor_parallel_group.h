// The collectives a tensor-parallel Decoder calls (tp_inference.h), as plain hooks so that
// model/ needs no dist/ (DESIGN rule 2): the caller fills them from its dist::Comm (cli) or a
// LocalComm (tests).
#pragma once

#include <cstdint>
#include <functional>

namespace lmstack::model {

// One TP group as the decoder sees it. Every hook is collective: all ranks call it in the
// same order with the same counts. size 1 (the default) is a plain single-process decoder.
struct TensorParallelGroup {
  int rank = 0, size = 1;
  // buf[count] on every rank becomes the sum over ranks (the same bits on every rank).
  std::function<void(float* buf, int64_t count)> all_reduce_sum;
  // send[count] -> recv[size * count], chunk r from rank r.
  std::function<void(const float* send, float* recv, int64_t count)> all_gather;
  // buf[count] from rank 0 to every rank.
  std::function<void(int32_t* buf, int64_t count)> broadcast_i32;

  bool enabled() const { return size > 1; }
};

}  // namespace lmstack::model
