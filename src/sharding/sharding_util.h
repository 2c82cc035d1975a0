// Sharding algebra for propagation and the partitioner: how a sharding moves
// through transpose, reshape, reverse, broadcast and reduce, partial
// replication, merging of compatible partial shardings and the "more
// specific" order. Semantics follow XLA's hlo_sharding_util; tile
// assignments stay in iota form wherever the operation allows.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sharding/sharding.h"

namespace meshsplit::sharding_util {

// Tiles per data dim (rank = TiledDataRank); all ones for non-tiled
// shardings of rank `rank`.
std::vector<int64_t> TileDims(const Sharding& s, int64_t rank);

// Sharding of transpose(x, dims) given x's sharding: result data dim i is
// source data dim dims[i]. Tile-maximal / manual / unknown shardings are
// returned unchanged. REQUIRES: dims is a permutation of the data dims.
Sharding TransposeSharding(const Sharding& s, const std::vector<int64_t>& dims);

// Sharding of reverse(x, dims): the tile order along `dims` flips.
// (Produces an explicit device array for iota inputs.)
Sharding ReverseSharding(const Sharding& s, const std::vector<int64_t>& dims);

// Sharding of reshape(x) from `from` dims to `to` dims that keeps every tile
// whole and contiguous, or nullopt when no such sharding exists. Uneven
// dims pass through only when they map to a target dim of the same size.
// Tile-maximal / manual shardings are returned unchanged.
std::optional<Sharding> ReshapeSharding(const std::vector<int64_t>& from,
                                        const std::vector<int64_t>& to,
                                        const Sharding& s);
// Best effort: the exact reshape when it exists, else the sharding that
// keeps as much of the tiling as can be kept (the rest becomes partial
// replication), down to replicated.
Sharding ReshapeShardingBestEffort(const std::vector<int64_t>& from,
                                   const std::vector<int64_t>& to,
                                   const Sharding& s);

// XLA's exact reshape rule (hlo_sharding_util::ReshapeSharding): walks the
// source and target dims from the minor end, splitting tiled dims by gcd;
// a tiled size-1 source dim is replicated. nullopt when no target dim ends
// up tiled or the tiles do not fit. Differs from ReshapeSharding above in
// the partial results it accepts; propagation uses this one.
std::optional<Sharding> ReshapeShardingXla(const std::vector<int64_t>& from,
                                           const std::vector<int64_t>& to,
                                           const Sharding& s);
// XLA's best-effort reshape (PropagateShardingThroughReshape): merges the
// exact reshapes of the longest runs of source dims, major first, as
// partial shardings; manual groups are reshaped alike. Non-tiled shardings
// are returned unchanged.
Sharding PropagateShardingThroughReshape(const std::vector<int64_t>& from,
                                         const std::vector<int64_t>& to,
                                         const Sharding& s);

// Splits data dim `dim` (t tiles) into (keep, t / keep) and moves the minor
// part into the replicated subgroup: the tiling coarsened to `keep` tiles
// on that dim. REQUIRES: IsTiled(), keep divides t.
Sharding KeepTilesOnDim(const Sharding& s, int64_t dim, int64_t keep);

// Moves the tiling of data dims `dims` into the replicated subgroup.
Sharding PartiallyReplicateTiledShardingOnDims(const Sharding& s,
                                               const std::vector<int64_t>& dims);
Sharding PartiallyReplicateTiledShardingOnAllDimsExcept(
    const Sharding& s, const std::vector<int64_t>& dims_to_keep);
// Replicates every data dim but keeps a manual subgroup. With data_rank >= 0
// the result has that many (untiled) data dims.
Sharding ReplicateAllDataDims(const Sharding& s, int64_t data_rank = -1);

// Removes data dims; dims that are tiled are first partially replicated.
Sharding RemoveShapeDimensions(const Sharding& s,
                               const std::vector<int64_t>& dims_to_remove);
// Inserts `num_dims` untiled data dims before data dim `index`.
Sharding InsertShapeDimensions(const Sharding& s, int64_t index,
                               int64_t num_dims);

// A sharding of a rank-dst_to_src.size() value whose data dim i is tiled like
// data dim dst_to_src[i] of `s` (-1: untiled). Tiled source data dims that no
// dim maps to become subgroups of `dropped_type`; source subgroups are kept.
// Non-tiled `s` is returned unchanged. Metadata is kept.
// REQUIRES: no source dim appears twice in dst_to_src.
Sharding ProjectSharding(const Sharding& s, const std::vector<int64_t>& dst_to_src,
                         SubgroupType dropped_type = SubgroupType::kReplicated);

// Keeps the tiling of source data dims source_dims[k], placing it on target
// dim target_dims[k] of a rank-`target_rank` value, and replicates every
// other source dim. Covers broadcast (operand -> output), reduce (kept
// dims), and gather/scatter pass-through dims.
Sharding PropagateShardingAlongDimsAndReplicateOthers(
    const Sharding& s, const std::vector<int64_t>& source_dims,
    const std::vector<int64_t>& target_dims, int64_t target_rank);

// Moves the tiles of data dim `source_dim` into data dim `target_dim`
// (target tiles become target*source, source becomes 1; source is minor).
Sharding MoveAndMergeShardingTiles(const Sharding& s, int64_t source_dim,
                                   int64_t target_dim);

// XLA's order: manual beats tile-maximal; otherwise more tiles is more
// specific; any tiled beats maximal; maximal beats replicated (and unknown
// is beaten by anything but tile-maximal). Tuples: no element worse and one
// better; a tuple and a non-tuple, or tuples of different sizes, are never
// ordered.
bool IsShardingMoreSpecific(const Sharding& lhs, const Sharding& rhs);

// Combines `to_merge` into `*dst` when both are partially replicated, they
// tile disjoint dims (or a dim equally) and the replication groups meet in
// exactly the devices the combined tile needs; the result must have at
// least `minimum_tiles` tiles. Returns whether `*dst` changed. O(devices).
bool MergePartialTilings(const Sharding& to_merge, int64_t minimum_tiles, Sharding* dst);
// Propagation's merge: MergePartialTilings for a partially replicated
// `*dst` (metadata dropped), and a replicated or unknown `*dst` takes a tiled
// `to_merge` whole; never for tuples, manual or maximal shardings. The
// two-argument form asks for more tiles than `*dst` has.
bool MergeShardingIfCompatible(const Sharding& to_merge, int64_t minimum_tiles,
                               Sharding* dst);
bool MergeShardingIfCompatible(const Sharding& to_merge, Sharding* dst);
// XLA's MergeSharding: tries the compatible merge (when
// may_combine_partial_sharding), and returns whether `*dst` is now more
// specific than `to_merge` (i.e. whether keeping `*dst` is an improvement).
// Tuples merge element by element; a tuple against a non-tuple never.
bool MergeSharding(const Sharding& to_merge, Sharding* dst,
                   bool may_combine_partial_sharding);

// True if every tile of `sub` (on a value of `dims`) lies inside the tile of
// `s` held by the same device. Manual shardings are never sub-tilings.
bool IsSubTilingOrEqualSharding(const std::vector<int64_t>& dims,
                                const Sharding& sub, const Sharding& s);

// --- gather / scatter (dimension numbers as plain vectors) -----------------
// Gather: output dims not in `offset_dims` are the batch dims; they follow
// the indices dims other than `index_vector_dim` in order (index_vector_dim
// may equal the indices rank: an implicit trailing dim).

// Output sharding from the indices sharding: batch dims keep the indices'
// tiling, offset dims are replicated.
Sharding GatherOutputShardingFromIndex(const Sharding& index_sharding,
                                       int64_t index_vector_dim,
                                       const std::vector<int64_t>& offset_dims,
                                       int64_t output_rank);
// Indices sharding from the output sharding (inverse of the above).
Sharding GatherIndexShardingFromOutput(const Sharding& output_sharding,
                                       int64_t index_vector_dim,
                                       const std::vector<int64_t>& offset_dims,
                                       int64_t indices_rank);
// Output sharding from the operand sharding through the pass-through dims:
// operand dims not in `collapsed_slice_dims` (nor `operand_batching_dims`)
// whose slice is the whole dim map, in order, to `offset_dims`. nullopt if
// no tiled dim passes through.
std::optional<Sharding> GatherOutputShardingFromOperandPassthrough(
    const Sharding& operand_sharding, const std::vector<int64_t>& operand_dims,
    const std::vector<int64_t>& slice_sizes,
    const std::vector<int64_t>& offset_dims,
    const std::vector<int64_t>& collapsed_slice_dims,
    const std::vector<int64_t>& operand_batching_dims, int64_t output_rank);
// Operand sharding from the output sharding through the same dims.
std::optional<Sharding> GatherOperandShardingFromOutputPassthrough(
    const Sharding& output_sharding, const std::vector<int64_t>& operand_dims,
    const std::vector<int64_t>& slice_sizes,
    const std::vector<int64_t>& offset_dims,
    const std::vector<int64_t>& collapsed_slice_dims,
    const std::vector<int64_t>& operand_batching_dims);

// Scatter: update dims not in `update_window_dims` are the scatter dims;
// they follow the indices dims other than `index_vector_dim`.
Sharding ScatterUpdateShardingFromIndex(
    const Sharding& index_sharding, int64_t index_vector_dim,
    const std::vector<int64_t>& update_window_dims, int64_t update_rank);
Sharding ScatterIndexShardingFromUpdate(
    const Sharding& update_sharding, int64_t index_vector_dim,
    const std::vector<int64_t>& update_window_dims, int64_t indices_rank);
// Update sharding from the operand/output sharding through pass-through
// dims: operand dims not in `inserted_window_dims` (nor
// `input_batching_dims`) map in order to `update_window_dims`; only dims
// whose update window covers the whole operand dim keep their tiling.
std::optional<Sharding> ScatterUpdateShardingFromOutputPassthrough(
    const Sharding& output_sharding, const std::vector<int64_t>& operand_dims,
    const std::vector<int64_t>& update_dims,
    const std::vector<int64_t>& update_window_dims,
    const std::vector<int64_t>& inserted_window_dims,
    const std::vector<int64_t>& input_batching_dims);

}  // namespace meshsplit::sharding_util
