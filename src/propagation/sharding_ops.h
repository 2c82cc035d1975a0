// Sharding algebra used by propagation: ordering (more specific / strictly
// better), merging of compatible partial shardings, partial replication,
// transposes and projections between dimension spaces, reshape, reverse and
// the "improve an existing sharding" decision. Semantics follow XLA's
// hlo_sharding_util; these are our own implementations over PSharding.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/shape.h"
#include "propagation/psharding.h"

namespace meshsplit::propagation {

// True if `lhs` has more tiles (or is tiled where `rhs` is not, or manual
// where `rhs` is tile-maximal). Tuples: none worse, one better.
bool IsShardingMoreSpecific(const PSharding& lhs, const PSharding& rhs);
// Manual beats tile-maximal (elementwise for tuples).
bool IsShardingStrictlyBetter(const PSharding& lhs, const PSharding& rhs);

// Merges `to_merge` into `*dst` when both are partially replicated over the
// same devices and their tilings are compatible (tile one dim from each).
// Returns true if `*dst` ends up more specific than before.
bool MergeSharding(const PSharding& to_merge, PSharding* dst,
                   bool may_combine_partial_sharding);
// Combines the tilings of `to_merge` and `*dst` if the device groups agree and
// the result has at least `minimum_tiles` tiles.
bool MergeShardingIfCompatible(const PSharding& to_merge, int64_t minimum_tiles,
                               PSharding* dst);
bool MergeShardingIfCompatible(const PSharding& to_merge, PSharding* dst);

// The sharding that replaces `to_improved` (nullptr = none yet) given a
// candidate `from`, or nullopt if `from` is no improvement.
std::optional<PSharding> ReturnImprovedSharding(
    PSharding from, const PSharding* to_improved, const Shape& shape,
    bool may_combine_partial_sharding, bool allow_aggressive_resharding);

bool IsSpatiallyPartitioned(const PSharding& s);

// Moves the tiling of data dims `dims` into the replication subgroup.
PSharding PartiallyReplicateOnDims(const PSharding& s,
                                   const std::vector<int64_t>& dims);
PSharding PartiallyReplicateOnAllDimsExcept(const PSharding& s,
                                            const std::vector<int64_t>& keep);
// Replicates every data dim, keeping manual subgroups. With data_rank >= 0 the
// result has that many (size-1) data dims.
PSharding ReplicateAllDataDims(const PSharding& s, int64_t data_rank = -1);
// Removes data dims (which must have one tile).
PSharding RemoveShapeDimensions(const PSharding& s,
                                const std::vector<int64_t>& dims);
// Result data dim i is source data dim dims[i]; `dims` may also cover the
// subgroup dims.
PSharding TransposeSharding(const PSharding& s, const std::vector<int64_t>& dims);
// Maps source data dims to target data dims (-1 = no counterpart); unmapped
// source dims must have one tile, else nullopt.
std::optional<PSharding> TransposeShardingWithCollapsedDims(
    const PSharding& s, const std::vector<int64_t>& src_to_tgt,
    const std::vector<int64_t>& tgt_to_src);
// Replicates source dims without a counterpart, then maps the rest.
PSharding ProjectSharding(const PSharding& s, const std::vector<int64_t>& src_to_tgt,
                          int64_t target_rank);
// Keeps the tiling of source_dims[i] on target_dims[i], replicates the rest.
PSharding PropagateAlongDimsAndReplicateOthers(
    const PSharding& s, const std::vector<int64_t>& source_dims,
    const std::vector<int64_t>& target_dims, int64_t target_rank);
std::optional<PSharding> ReshapeSharding(const Shape& source, const Shape& target,
                                         const PSharding& s);
// Best-effort reshape: shards the target along every interval of source dims
// that reshapes cleanly.
PSharding PropagateShardingThroughReshape(const Shape& source,
                                          const Shape& target,
                                          const PSharding& s);
PSharding ReverseSharding(const PSharding& s, const std::vector<int64_t>& dims);
bool IsSubTilingOrEqualSharding(const Shape& shape, const PSharding& sub,
                                const PSharding& s);
PSharding FindCommonSharding(const std::vector<PSharding>& shardings,
                             std::optional<PSharding> default_sharding = {});
std::optional<int64_t> GetFirstTargetDimToMoveShardingTiles(
    const Shape& shape, const PSharding& s, int64_t source_dim);

// Tuple helpers. Leaf count of a (possibly nested) tuple shape, and the
// sub-sharding of tuple element `index`.
int64_t LeafCount(const Shape& shape);
PSharding GetSubSharding(const PSharding& s, const Shape& shape, int64_t index);
// A sharding of the shape's tree with `leaf` on every leaf.
PSharding SingleTuple(const Shape& shape, const PSharding& leaf);
// Makes a non-tuple sharding fit a tuple shape (and vice versa for 1-leaf).
PSharding NormalizeToShape(const PSharding& s, const Shape& shape);

}  // namespace meshsplit::propagation
