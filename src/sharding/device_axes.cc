#include "sharding/device_axes.h"

#include <algorithm>
#include <numeric>
#include <set>

namespace meshsplit {

std::optional<DeviceAxes> DeviceAxes::Common(int64_t num_devices,
                                             const std::vector<const TileAssignment*>& arrays) {
  // Every run [stride, stride * size) contributes its two bounds; the axes
  // are the gaps between consecutive bounds.
  std::set<int64_t> bounds = {1, num_devices};
  for (const TileAssignment* ta : arrays)
    for (int64_t d = 0; d < ta->num_dimensions(); ++d) {
      auto terms = ta->IndexTermsForDim(d);
      if (!terms) return std::nullopt;
      for (const TileAssignment::IndexTerm& t : *terms) {
        bounds.insert(t.divisor);
        bounds.insert(t.divisor * t.modulus);
      }
    }
  const std::vector<int64_t> b(bounds.begin(), bounds.end());
  for (size_t i = 0; i + 1 < b.size(); ++i)
    if (b[i + 1] % b[i] != 0) return std::nullopt;
  DeviceAxes axes;
  axes.num_devices_ = num_devices;
  for (size_t i = b.size() - 1; i > 0; --i) {
    axes.sizes_.push_back(b[i] / b[i - 1]);
    axes.strides_.push_back(b[i - 1]);
  }
  return axes;
}

int64_t DeviceAxes::Product(const AxisList& axes) const {
  int64_t p = 1;
  for (int a : axes) p *= sizes_[a];
  return p;
}

std::optional<std::vector<AxisList>> DeviceAxes::AxesOfDims(const TileAssignment& ta) const {
  std::vector<AxisList> out(ta.num_dimensions());
  for (int64_t d = 0; d < ta.num_dimensions(); ++d) {
    auto terms = ta.IndexTermsForDim(d);
    if (!terms) return std::nullopt;
    for (const TileAssignment::IndexTerm& t : *terms) {
      // The axes inside the run, by decreasing stride.
      int64_t covered = 1;
      for (int a = 0; a < num_axes(); ++a)
        if (strides_[a] >= t.divisor && strides_[a] < t.divisor * t.modulus) {
          out[d].push_back(a);
          covered *= sizes_[a];
        }
      if (covered != t.modulus) return std::nullopt;
    }
  }
  return out;
}

std::optional<AxisLayout> ToAxisLayout(const Sharding& s, int64_t rank, const DeviceAxes& axes) {
  if (s.IsReplicated() || s.kind() == Sharding::Kind::kUnreduced) {
    AxisLayout l;
    l.dims.resize(rank);
    AxisList& all = s.IsReplicated() ? l.replicated : l.unreduced;
    all.resize(axes.num_axes());
    std::iota(all.begin(), all.end(), 0);
    return l;
  }
  if (!s.IsTiled() || s.TiledDataRank() != rank ||
      s.tile_assignment().num_devices() != axes.num_devices())
    return std::nullopt;
  return ToAxisLayout(s.tile_assignment(), rank, s.subgroup_types(), axes);
}

std::optional<AxisLayout> ToAxisLayout(const TileAssignment& ta, int64_t data_rank,
                                       const std::vector<SubgroupType>& types,
                                       const DeviceAxes& axes) {
  if (ta.num_dimensions() != data_rank + static_cast<int64_t>(types.size())) return std::nullopt;
  auto per_dim = axes.AxesOfDims(ta);
  if (!per_dim) return std::nullopt;
  AxisLayout l;
  l.dims.assign(per_dim->begin(), per_dim->begin() + data_rank);
  for (size_t k = 0; k < types.size(); ++k) {
    AxisList* dst = nullptr;
    switch (types[k]) {
      case SubgroupType::kReplicated: dst = &l.replicated; break;
      case SubgroupType::kUnreduced: dst = &l.unreduced; break;
      case SubgroupType::kManual: dst = &l.manual; break;
    }
    const AxisList& from = (*per_dim)[data_rank + k];
    dst->insert(dst->end(), from.begin(), from.end());
  }
  return l;
}

Sharding FromAxisLayout(const AxisLayout& l, const DeviceAxes& axes) {
  std::vector<int64_t> dims, perm;
  auto add_dim = [&](const AxisList& list) {
    int64_t n = 1;
    for (int a : list) {
      perm.push_back(a);
      n *= axes.size(a);
    }
    dims.push_back(n);
  };
  for (const AxisList& d : l.dims) add_dim(d);
  add_dim(l.manual);
  add_dim(l.unreduced);
  AxisList replicated = l.replicated;
  std::sort(replicated.begin(), replicated.end());
  add_dim(replicated);
  return Sharding::Subgroup(
      TileAssignment::Iota(dims, axes.sizes(), perm),
      {SubgroupType::kManual, SubgroupType::kUnreduced, SubgroupType::kReplicated});
}

}  // namespace meshsplit
