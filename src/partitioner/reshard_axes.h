// The mesh-axis planner behind Reshard's general case. Both shardings are
// read as assignments of "axes" — factors of the device-id space that both
// tile assignments cut along — to tensor dims and to unreduced, manual and
// replicated subgroups. The value then moves axis by axis: partial sums are
// reduced (reduce-scatter into a dim that needs those axes next, else
// all-reduce), axes leaving a dim go by all-to-all to a dim that needs them
// next or are all-gathered, missing axes are sliced locally, and new partial
// sums keep the value on one member of each group. Collectives run only over
// the axes that move, so manual subgroups stay untouched and nothing is
// gathered that the target does not need whole.
#pragma once

#include <optional>

#include "partitioner/reshard.h"

namespace meshsplit::spmd {

// `v` laid out by `dst`, or nullopt when the planner does not apply: a
// maximal, manual, tuple or unknown sharding on either side, a tile
// assignment that names fewer devices than the module has partitions, or
// two tile assignments that cut the device ids along incompatible factors
// (explicit device lists are renumbered first, so a permutation shared by
// both sides is fine). Records ReshardPath::kAxisPlan on success.
// REQUIRES: v.sharding != dst; both normalised; v.shape is an array.
std::optional<PartitionedValue> TryAxisReshard(SpmdBuilder& b, const PartitionedValue& v,
                                               const Sharding& dst);

// True when TryAxisReshard would apply to a value of `shape` (emits
// nothing).
bool AxisReshardApplies(SpmdBuilder& b, const Shape& shape, const Sharding& src,
                        const Sharding& dst);

// While one lives on this thread, reshards are estimates (EstimateReshard):
// they are neither counted nor logged.
class ScopedReshardEstimate {
 public:
  ScopedReshardEstimate();
  ~ScopedReshardEstimate();
  ScopedReshardEstimate(const ScopedReshardEstimate&) = delete;
  ScopedReshardEstimate& operator=(const ScopedReshardEstimate&) = delete;
};

// Counts one array reshard between different shardings.
void CountReshardCall();
// Records one use of `path` (and logs fallbacks under MESHSPLIT_DEBUG).
void RecordReshardPath(ReshardPath path, const PartitionedValue& v, const Sharding& dst);

}  // namespace meshsplit::spmd
