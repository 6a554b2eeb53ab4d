// Flat parameter layout (see flat_params.h).
#include "lmstack/train/flat_params.h"

#include <algorithm>

#include "lmstack/core/error.h"

namespace lmstack::train {

FlatLayout FlatLayout::build(const std::vector<ParamRef>& params, int num_layers, int world,
                             int64_t bucket_bytes, bool one_group_per_unit,
                             const std::function<bool(const std::string&)>& exclude) {
  LMSTACK_CHECK(world >= 1, "world {}", world);
  FlatLayout layout;
  layout.world = world;
  layout.num_groups = num_layers + 2;
  layout.unit_of_group.assign(static_cast<size_t>(layout.num_groups), -1);
  std::vector<std::vector<size_t>> by_group(static_cast<size_t>(layout.num_groups));
  for (size_t i = 0; i < params.size(); ++i)
    if (!exclude || !exclude(params[i].name))
      by_group[static_cast<size_t>(param_group(params[i].name, num_layers))].push_back(i);
  FlatUnit unit;
  auto close = [&] {
    if (unit.groups.empty()) return;
    unit.padded = (unit.numel + world - 1) / world * world;
    unit.chunk = unit.padded / world;
    layout.units.push_back(std::move(unit));
    unit = FlatUnit();
  };
  for (int g = layout.num_groups - 1; g >= 0; --g) {  // backward order
    const auto& members = by_group[static_cast<size_t>(g)];
    if (members.empty()) continue;
    for (size_t i : members) {
      const ParamRef& p = params[i];
      unit.params.push_back(
          {i, p.name, p.value->shape(), g, unit.numel, p.value->numel(), p.decay});
      unit.numel += p.value->numel();
    }
    unit.groups.push_back(g);
    layout.unit_of_group[static_cast<size_t>(g)] = static_cast<int>(layout.units.size());
    if (one_group_per_unit || bucket_bytes <= 0 ||
        unit.numel * static_cast<int64_t>(sizeof(float)) >= bucket_bytes)
      close();
  }
  close();
  return layout;
}

int64_t FlatLayout::total_padded() const {
  int64_t n = 0;
  for (const FlatUnit& u : units) n += u.padded;
  return n;
}

std::vector<ParamSlice> params_in_range(const FlatUnit& unit, int64_t lo, int64_t hi) {
  std::vector<ParamSlice> out;
  for (const FlatParam& p : unit.params) {
    const int64_t b = std::max(lo, p.offset), e = std::min(hi, p.offset + p.numel);
    if (b < e) out.push_back({&p, b - p.offset, e - p.offset, b});
  }
  return out;
}

}  // namespace lmstack::train
