// The partitioner's view of shardings: resolving partial sums, tuple nesting
// and local shapes. The shape-free algebra itself (projection, partial
// replication, transpose, reshape) lives in sharding/sharding_util.h; the
// parts the handlers use most are named here. Everything stays in iota form
// when the input is.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/shape.h"
#include "sharding/sharding.h"
#include "sharding/sharding_util.h"

namespace meshsplit::spmd {

// Projection onto other dims (dot operands, broadcast, transpose, reshape).
using sharding_util::ProjectSharding;
// Moving the tiling of some data dims into the replicated subgroup.
using sharding_util::PartiallyReplicateTiledShardingOnDims;
// Tiles per data dim.
using sharding_util::TileDims;

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
