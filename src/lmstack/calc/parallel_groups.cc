// Megatron rank grouping (see parallel_groups.h).
#include "lmstack/calc/parallel_groups.h"

#include <fmt/format.h>

#include "lmstack/core/error.h"

namespace lmstack::calc {

std::vector<std::vector<int>> parallel_groups(int tp, int pp, int dp, const std::string& kind) {
  LMSTACK_CHECK(kind == "tp" || kind == "dp" || kind == "pp", "group kind {}", kind);
  const int world = tp * pp * dp;
  const int size = kind == "tp" ? tp : kind == "dp" ? dp : pp;
  std::vector<std::vector<int>> groups(static_cast<size_t>(world / size));
  for (int r = 0; r < world; ++r) {
    const int t = r % tp, d = (r / tp) % dp, p = r / (tp * dp);
    const int index = kind == "tp" ? d + dp * p : kind == "dp" ? t + tp * p : t + tp * d;
    groups[static_cast<size_t>(index)].push_back(r);
  }
  return groups;
}

std::string format_groups(const std::vector<std::vector<int>>& groups, size_t max_groups) {
  std::string out;
  for (size_t i = 0; i < groups.size() && i < max_groups; ++i) {
    out += i ? " [" : "[";
    for (size_t j = 0; j < groups[i].size(); ++j)
      out += (j ? " " : "") + std::to_string(groups[i][j]);
    out += "]";
  }
  if (groups.size() > max_groups) out += fmt::format(" ... ({} groups)", groups.size());
  return out;
}

}  // namespace lmstack::calc
