// Shardings at the border of the per-stage region of a pipelined program.
// Inside the region the stage axis of the mesh is manual (each stage runs
// its own code on its own layers and microbatch); the other axes stay
// automatic, so a value keeps the tiling it had over them (data, model).
// These functions add the stage axis to such a tiling, as a manual subgroup
// (inside) or as a tiling of the leading dim (outside).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sharding/mesh.h"
#include "sharding/sharding.h"
#include "support/status.h"

namespace meshsplit {

class StageShardings {
 public:
  StageShardings(Mesh mesh, int64_t stage_axis);

  int64_t stages() const { return mesh_.axes()[stage_axis_].size; }
  int64_t num_devices() const { return mesh_.num_devices(); }
  // The stage coordinate of `device`.
  int64_t StageOf(int64_t device) const;

  // For a value whose layout over the other axes is `base` (absent =
  // replicated; it must not use the stage axis) and whose shape is `base`'s
  // with `leading` new untiled dims in front:
  // inside the region: the same tiles with the stage axis a manual subgroup;
  StatusOr<Sharding> Manual(const Sharding* base, int64_t rank, int64_t leading) const;
  // outside: dim 0 also tiled over the stages, stage-major (each stage owns
  // one contiguous 1/S of dim 0).
  StatusOr<Sharding> StageTiled(const Sharding* base, int64_t rank, int64_t leading) const;
  // Replicated over the stage axis (and as `base` elsewhere), outside.
  StatusOr<Sharding> Full(const Sharding* base, int64_t rank) const;

  // Source-target pairs sending stage s to stage s + by (same coordinates on
  // the other axes); stages with no such neighbour send nothing, unless
  // `ring`, where s + by wraps around (the last stage sends to the first).
  std::vector<std::pair<int64_t, int64_t>> ShiftPairs(int64_t by, bool ring = false) const;

 private:
  enum class Where { kManual, kStageTiled, kFull };
  StatusOr<Sharding> Place(const Sharding* base, int64_t rank, int64_t leading, Where where) const;
  StatusOr<Sharding> PlaceUncached(const Sharding* base, int64_t rank, int64_t leading,
                                   Where where) const;
  // PlaceUncached's devices in row-major order.
  StatusOr<std::vector<int64_t>> ArrangeDevices(const Sharding* base, bool replicated, int64_t tiled,
                                          int64_t replicas, Where where) const;

  Mesh mesh_;
  int64_t stage_axis_;
  std::vector<int64_t> flat_of_;   // by device id: its row-major position in the mesh
  int64_t inner_ = 1;              // row-major stride of the stage axis
  // Place's results by (base, rank, leading, where): building one walks
  // every device, and the pass asks for the same few many times.
  mutable std::map<std::tuple<std::string, int64_t, int64_t, int>, StatusOr<Sharding>> placed_;
  // ArrangeDevices' results by (base, rank, where), and ShiftPairs' by
  // (by, ring): both walk every device.
  mutable std::map<std::tuple<std::string, int64_t, int>, StatusOr<std::vector<int64_t>>>
      arranged_;
  mutable std::map<std::pair<int64_t, bool>, std::vector<std::pair<int64_t, int64_t>>> shifts_;
};

}  // namespace meshsplit
