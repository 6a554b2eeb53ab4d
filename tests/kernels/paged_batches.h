// The batch shapes both paged-attention tests (f32 pools: attention_test.cc; bf16/int8 pools:
// attention_kv_dtype_test.cc) run every variant over: pure prefill, pure decode with short and
// long contexts, and a mix with an empty-query sequence and chunked prefills.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lmstack::kernels::test_batches {

struct SeqSpec {
  int q_len;
  int context_len;
};

inline const std::vector<std::pair<std::string, std::vector<SeqSpec>>>& batches() {
  static const std::vector<std::pair<std::string, std::vector<SeqSpec>>> b = {
      {"prefill", {{37, 37}, {1, 1}, {70, 70}}},
      {"decode", {{1, 600}, {1, 1}, {1, 17}, {1, 129}}},
      {"mixed", {{5, 5}, {1, 300}, {0, 40}, {20, 75}, {1, 2}, {33, 160}}},
  };
  return b;
}

}  // namespace lmstack::kernels::test_batches
