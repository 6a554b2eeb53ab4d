// Which world ranks form each TP, DP and PP group of a tp x pp x dp layout, in Megatron's
// order (TP innermost, then DP, then PP: rank = tp + T·(dp + D·pp)); what `calc train` prints
// and what `lmstack train --tp --pp` prints at start (dist/mesh.h computes the same from the
// same formula; both are tested against Megatron-LM's documented example).
#pragma once

#include <string>
#include <vector>

namespace lmstack::calc {

// kind: "tp", "dp" or "pp"; groups in order of their first member.
std::vector<std::vector<int>> parallel_groups(int tp, int pp, int dp, const std::string& kind);

// "[0 1] [2 3] [4 5] [6 7]", the first `max_groups` groups then "... (N groups)".
std::string format_groups(const std::vector<std::vector<int>>& groups, size_t max_groups = 8);

}  // namespace lmstack::calc
