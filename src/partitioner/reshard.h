// Reshard: THE single entry point that moves a partitioned value from one
// sharding to another. Handlers call it for every operand and result; it
// picks the cheapest correct path — local dynamic-slice (more tiled),
// all-gather (less tiled), all-to-all (tiling moves to another dim),
// collective-permute (same tiling, other device order), all-reduce /
// reduce-scatter (partial sums) — then the mesh-axis planner
// (reshard_axes.h: collectives over just the axes that move, also for
// partial sums and within manual subgroups), a collective-permute onto a
// related device order plus the planner, and only then gather-then-slice,
// which is always right. Uneven dims are padded at the end. Manual values
// are never moved: leaving a manual (sub)group for a tiled layout is an
// error, reading them whole ({replicated}) takes the local data as is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost_model.h"
#include "ir/instruction.h"
#include "partitioner/spmd_builder.h"
#include "sharding/sharding.h"

namespace meshsplit::spmd {

// A value of the partitioned program: `hlo` computes this partition's piece
// (shape LocalShape(shape, sharding), padded at the end of uneven dims) of a
// global value of `shape` laid out by `sharding`. Padding holds arbitrary
// values. A sharding with an unreduced subgroup means the pieces of one
// group still have to be summed.
struct PartitionedValue {
  Instruction* hlo = nullptr;
  Shape shape;
  Sharding sharding;
};

// Returns `value` laid out by `target` (tuples element by element).
PartitionedValue Reshard(SpmdBuilder& b, const PartitionedValue& value,
                         const Sharding& target);

// What Reshard would cost to move a value of `shape` from `from` to `to` on
// `num_partitions` partitions, found by running Reshard's own ladder into a
// scratch computation (nothing reaches the program, the path statistics or
// the debug log): the elements one partition sends or receives, summed over
// the collectives it would emit with the cost model's wire formula
// (CollectiveWireBytes) over the element size. A move by local ops only (a
// slice) costs 1e-3 of the local result, so that among otherwise equal
// choices the one that moves nothing wins. Infinity when there is no path.
// The one reshard cost the handlers weigh their candidate layouts with.
double EstimateReshard(const Shape& shape, const Sharding& from, const Sharding& to,
                       int64_t num_partitions);

// The collectives behind EstimateReshard, for planners that price each one
// (latency, per-axis rates): what Reshard emits for the move, run the same
// way, each as the cost model counts it (CostOfCollective; instr cleared),
// their mesh axes named when `mesh` is given and has num_partitions devices.
struct ReshardPlan {
  bool possible = true;   // Reshard found a path
  bool emitted = false;   // any instruction (a slice alone is a local move)
  std::vector<CollectiveCost> collectives;
  double wire_elements = 0;     // summed over the collectives
  int64_t result_elements = 0;  // of the moved value, per partition
};
ReshardPlan PlanReshard(const Shape& shape, const Sharding& from, const Sharding& to,
                        int64_t num_partitions, const Mesh* mesh = nullptr);

// This partition's offset along data dim `dim` of a value of `global_dims`
// tiled by `s`, as an s32 scalar (0 when the dim is not tiled).
Instruction* TileOffset(SpmdBuilder& b, const Sharding& s,
                        const std::vector<int64_t>& global_dims, int64_t dim);

// Replaces the padding of the uneven tiled dims among `dims` of `value` by
// `identity` (a scalar), so that reductions and contractions over those dims
// see the identity there. An identity of another element type is converted
// to the value's (an op's operands and init may differ in float precision,
// as XLA allows: f64 elements reduced with an f32 init, f16 activations
// with an f32 kernel); identities (0, 1, +-inf) convert exactly. A no-op
// for even dims.
Instruction* MaskPadding(SpmdBuilder& b, const PartitionedValue& value,
                         const std::vector<int64_t>& dims, Instruction* identity);

// `x` is valid only on partition `device` (a `{maximal device=D}` entry
// parameter); returns it replicated on every partition (select + all-reduce).
Instruction* BroadcastFromDevice(SpmdBuilder& b, Instruction* x, int64_t device);

// How often each path of Reshard was taken since the last reset,
// process-wide. The gather-then-slice fallbacks are the ones to keep rare:
// they move more data than the layouts require. With `MESHSPLIT_DEBUG`
// containing "reshard", every fallback is logged on stderr (shape, source
// and target sharding) and a summary is printed at exit.
enum class ReshardPath {
  kSlice,              // local dynamic-slice (target more tiled)
  kAllGather,          // all-gather of the dims the target does not tile
  kAllToAll,           // tiling moved between dims
  kCollectivePermute,  // same tiling, other devices
  kAllReduce,          // partial sums reduced (all-reduce)
  kReduceScatter,      // partial sums reduced into a tiled dim
  kToUnreduced,        // into partial sums (zero on all but one member)
  kManualGroups,       // resharded within each manual subgroup
  kAxisPlan,           // per-mesh-axis plan (gathers, all-to-alls, slices)
  kFallbackGatherSome, // gather the differing dims, then slice
  kFallbackGatherAll,  // gather everything, then slice
  kNumPaths,
};
const char* ReshardPathName(ReshardPath p);
struct ReshardStats {
  int64_t calls = 0;  // array reshards between different shardings
  int64_t paths[static_cast<int>(ReshardPath::kNumPaths)] = {};
  int64_t count(ReshardPath p) const { return paths[static_cast<int>(p)]; }
  int64_t fallbacks() const {
    return count(ReshardPath::kFallbackGatherSome) + count(ReshardPath::kFallbackGatherAll);
  }
  // "calls=12 slice=3 ... fallback_gather_all=1".
  std::string ToString() const;
};
ReshardStats GetReshardStats();
void ResetReshardStats();

// True when some dim in `dims` is tiled unevenly (the tiles carry padding).
bool HasPadding(const PartitionedValue& value, const std::vector<int64_t>& dims);

}  // namespace meshsplit::spmd
