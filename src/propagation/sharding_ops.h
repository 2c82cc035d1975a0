// Propagation's decisions over the shared sharding algebra: which of two
// shardings is more specific or strictly better, when a candidate improves an
// instruction's sharding, tuple plumbing, and the few rules whose XLA
// semantics differ from the generic ones in sharding/sharding_util.h (they
// delegate to it for the tile-assignment work, which stays symbolic for iota
// tile assignments).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/shape.h"
#include "sharding/sharding.h"
#include "sharding/sharding_util.h"

namespace meshsplit::propagation {

// --- small queries with propagation's conventions ---------------------------
// Tuples: true when every element is unknown (an empty tuple counts).
bool IsUnknownSharding(const Sharding& s);
// Tiles along data dim i; 1 when `s` is not tiled or i is not a data dim.
int64_t TileDimOr1(const Sharding& s, int64_t i);
// Data rank of a tiled sharding, 0 otherwise.
int64_t DataRankOr0(const Sharding& s);
// A tuple of the leaves of `elements` (nested tuples are flattened).
Sharding FlatTuple(std::vector<Sharding> elements);
// The CSE-prevention marker that XLA's propagation puts in a sharding's
// metadata (kept as that metadata, nothing else is).
bool HasCsePrevention(const Sharding& s);
// The dims of `unspecified_dims=[...]` in a manual/auto conversion's
// backend_config, in the order written (empty when absent). Lenient, as XLA
// reads it: numbers are picked out of the brackets; one that does not fit in
// int64 (no dim of any shape) is dropped rather than thrown on.
std::vector<int64_t> UnspecifiedDimsAsWritten(const std::string& backend_config);
void SetCsePrevention(Sharding* s, bool on);

// --- order -------------------------------------------------------------------
// The order and the merges are the sharding algebra's (sharding_util.h);
// propagation keeps only its policy around them.
using sharding_util::IsShardingMoreSpecific;
using sharding_util::MergeSharding;
using sharding_util::MergeShardingIfCompatible;

// Manual beats tile-maximal (elementwise for tuples).
bool IsShardingStrictlyBetter(const Sharding& lhs, const Sharding& rhs);
bool IsSpatiallyPartitioned(const Sharding& s);

// --- merging -----------------------------------------------------------------
// The sharding that replaces `to_improved` (nullptr = none yet) given a
// candidate `from`, or nullopt if `from` is no improvement.
std::optional<Sharding> ReturnImprovedSharding(
    Sharding from, const Sharding* to_improved, const Shape& shape,
    bool may_combine_partial_sharding, bool allow_aggressive_resharding);

// --- moving tilings between dimension spaces
// ---------------------------------- Moves the tiling of data dims `dims` into
// the replication subgroup (dims outside the data rank are ignored).
Sharding PartiallyReplicateOnDims(const Sharding& s,
                                  const std::vector<int64_t>& dims);
Sharding PartiallyReplicateOnAllDimsExcept(const Sharding& s,
                                           const std::vector<int64_t>& keep);
// Replicates every data dim, keeping manual subgroups. With data_rank >= 0
// the result has that many (size-1) data dims. Non-tiled shardings other
// than manual become replicated.
Sharding ReplicateAllDataDims(const Sharding& s, int64_t data_rank = -1);
// Removes data dims (which must have one tile).
Sharding RemoveShapeDimensions(const Sharding& s,
                               const std::vector<int64_t>& dims);
// Result data dim i is source data dim dims[i]; `dims` may also cover the
// subgroup dims (then it permutes the whole tile assignment).
Sharding TransposeSharding(const Sharding& s, const std::vector<int64_t>& dims);
// sharding_util::ProjectSharding (dst_to_src[i] = the source data dim that
// target dim i takes its tiling from, or -1; unmapped source dims are
// replicated), memoised.
Sharding ProjectSharding(const Sharding& s, const std::vector<int64_t>& dst_to_src);
using sharding_util::PropagateShardingAlongDimsAndReplicateOthers;
// XLA's reshape rules (see sharding_util.h).
std::optional<Sharding> ReshapeSharding(const Shape& source,
                                        const Shape& target, const Sharding& s);
Sharding PropagateShardingThroughReshape(const Shape& source,
                                         const Shape& target,
                                         const Sharding& s);
Sharding ReverseSharding(const Sharding& s, const std::vector<int64_t>& dims);
bool IsSubTilingOrEqualSharding(const Shape& shape, const Sharding& sub,
                                const Sharding& s);
Sharding FindCommonSharding(const std::vector<Sharding>& shardings,
                            std::optional<Sharding> default_sharding = {});
std::optional<int64_t> GetFirstTargetDimToMoveShardingTiles(const Shape& shape,
                                                            const Sharding& s,
                                                            int64_t source_dim);

// --- tuples ------------------------------------------------------------------
// Leaf count of a (possibly nested) tuple shape, and the sub-sharding of
// tuple element `index`.
int64_t LeafCount(const Shape& shape);
Sharding GetSubSharding(const Sharding& s, const Shape& shape, int64_t index);
// A sharding of the shape's tree with `leaf` on every leaf.
Sharding SingleTuple(const Shape& shape, const Sharding& leaf);
// Makes a non-tuple sharding fit a tuple shape (and vice versa for 1-leaf).
Sharding NormalizeToShape(const Sharding& s, const Shape& shape);

}  // namespace meshsplit::propagation
