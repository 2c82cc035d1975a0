// Shardings as mesh axes. A device id is read as a mixed-radix number: an
// iota tile assignment gives each of its dims a few runs of those digits
// (TileAssignment::IndexTermsForDim: a run of `modulus` values at id stride
// `divisor`). The common refinement of the runs of several assignments is
// one set of device axes, and each sharding is then a map from axes to
// tensor dims and subgroups. In these terms the reshard planner moves axes
// between dims, the contraction planner gives every axis a role, and the
// merge of two shardings takes each dim's axes from whichever side tiles
// it. Everything here is O(rank + axes), whatever the number of devices.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sharding/sharding.h"
#include "sharding/tile_assignment.h"

namespace meshsplit {

// Axis indices; axis 0 has the largest id stride (it is the most major).
using AxisList = std::vector<int>;

class DeviceAxes {
 public:
  // The common refinement of the digit runs of `arrays` over the ids
  // 0..num_devices-1, or nullopt when an array is explicit (not iota),
  // cuts its own iota factors unevenly, or two arrays cut each other's runs
  // unevenly (consecutive run bounds must divide each other).
  static std::optional<DeviceAxes> Common(int64_t num_devices,
                                          const std::vector<const TileAssignment*>& arrays);

  int num_axes() const { return static_cast<int>(sizes_.size()); }
  int64_t num_devices() const { return num_devices_; }
  int64_t size(int axis) const { return sizes_[axis]; }
  int64_t stride(int axis) const { return strides_[axis]; }
  // Axis sizes, major first: the reshape dims of an iota over all axes.
  const std::vector<int64_t>& sizes() const { return sizes_; }
  // Product of the sizes of `axes` (1 for none).
  int64_t Product(const AxisList& axes) const;

  // The axes of every dim of `ta`, each dim's major first; nullopt when
  // `ta` is explicit or a run of its digits is not a union of these axes.
  std::optional<std::vector<AxisList>> AxesOfDims(const TileAssignment& ta) const;

 private:
  int64_t num_devices_ = 1;
  std::vector<int64_t> sizes_, strides_;
};

// A sharding of an array as device axes.
struct AxisLayout {
  std::vector<AxisList> dims;  // per tensor dim, major first
  // The axes of each kind of subgroup, in tile-assignment order.
  AxisList replicated, unreduced, manual;
};

// `s` for an array of rank `rank`: replicated (every axis replicated),
// unreduced (every axis unreduced) or tiled over axes.num_devices() devices
// with data rank `rank`. nullopt for any other sharding or when its tile
// assignment is not made of `axes`.
std::optional<AxisLayout> ToAxisLayout(const Sharding& s, int64_t rank, const DeviceAxes& axes);
// The same from a tile assignment whose first `data_rank` dims are data dims
// and whose remaining dims are subgroups of `types` (for callers that
// renumber the devices first).
std::optional<AxisLayout> ToAxisLayout(const TileAssignment& ta, int64_t data_rank,
                                       const std::vector<SubgroupType>& types,
                                       const DeviceAxes& axes);

// The sharding of `l`: its data dims, then manual, unreduced and replicated
// subgroups (the replicated axes by increasing index), normalised.
Sharding FromAxisLayout(const AxisLayout& l, const DeviceAxes& axes);

}  // namespace meshsplit
