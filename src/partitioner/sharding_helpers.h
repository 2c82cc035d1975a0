// Sharding algebra the partitioner needs: projecting a sharding onto other
// dims (dot operands, broadcast, transpose, reshape), moving tiled dims into
// the replicated subgroup, and resolving partial sums. Everything stays in
// iota form when the input is. (Kept here rather than in src/sharding so
// the partitioner does not depend on helpers still being written there.)
#pragma once

#include <cstdint>
#include <vector>

#include "ir/shape.h"
#include "sharding/sharding.h"

namespace meshsplit::spmd {

// A sharding of a rank-dst_to_src.size() value whose data dim i is tiled like
// data dim dst_to_src[i] of `src` (-1: untiled). Tiled src data dims nobody
// maps to become subgroup dims of `dropped_type`. Src subgroups are kept.
// Non-tiled `src` is returned unchanged.
// REQUIRES: no src dim appears twice in dst_to_src.
Sharding ProjectSharding(const Sharding& src, const std::vector<int64_t>& dst_to_src,
                         SubgroupType dropped_type = SubgroupType::kReplicated);

// The tiling of data dims `dims` moved into the replicated subgroup.
Sharding ReplicateDims(const Sharding& s, const std::vector<int64_t>& dims);

// Tiles per data dim (all ones when not tiled).
std::vector<int64_t> TileCounts(const Sharding& s, int64_t rank);

// True when the sharding holds partial sums (unreduced kind or subgroup).
bool HasUnreduced(const Sharding& s);
// The same sharding with its partial sums reduced (unreduced -> replicated).
Sharding ReduceUnreduced(const Sharding& s);

// Maximal and unknown shardings behave as replicated in the partitioned
// program (every partition computes the value).
Sharding NormalizeForPartitioning(const Sharding& s);

// The sharding of `s` for a value of `shape` (tuple shardings applied to
// tuple shapes; a non-tuple sharding on a tuple applies to every leaf).
Sharding ElementSharding(const Sharding& s, const Shape& shape, int64_t index);

// XLA writes the sharding of a nested tuple as the flat list of its leaves;
// the partitioner works on the nested form (one element per tuple element,
// tuple elements of nested tuples). NestTupleSharding turns a flat leaf list
// that fits `shape` into the nested form (anything else is returned as is);
// FlattenTupleSharding turns a nested one back into the flat list, for text
// other tools read.
Sharding NestTupleSharding(const Sharding& s, const Shape& shape);
Sharding FlattenTupleSharding(const Sharding& s);

// Per-device shape of a global shape under a sharding (tuples leafwise).
Shape LocalShape(const Shape& global, const Sharding& s);

}  // namespace meshsplit::spmd
