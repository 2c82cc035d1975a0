// Reshard: THE single entry point that moves a partitioned value from one
// sharding to another. Handlers call it for every operand and result; it
// picks the cheapest correct path — local dynamic-slice (more tiled),
// all-gather (less tiled), all-to-all (tiling moves to another dim),
// collective-permute (same tiling, other device order), all-reduce /
// reduce-scatter (partial sums) — and falls back to gather-everything-then-
// slice, which is always right. Uneven dims are padded at the end.
#pragma once

#include <cstdint>
#include <vector>

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

// This partition's offset along data dim `dim` of a value of `global_dims`
// tiled by `s`, as an s32 scalar (0 when the dim is not tiled).
Instruction* TileOffset(SpmdBuilder& b, const Sharding& s,
                        const std::vector<int64_t>& global_dims, int64_t dim);

// Replaces the padding of the uneven tiled dims among `dims` of `value` by
// `identity` (a scalar of the value's element type), so that reductions and
// contractions over those dims see the identity there. A no-op for even
// dims.
Instruction* MaskPadding(SpmdBuilder& b, const PartitionedValue& value,
                         const std::vector<int64_t>& dims, Instruction* identity);

// `x` is valid only on partition `device` (a `{maximal device=D}` entry
// parameter); returns it replicated on every partition (select + all-reduce).
Instruction* BroadcastFromDevice(SpmdBuilder& b, Instruction* x, int64_t device);

// True when some dim in `dims` is tiled unevenly (the tiles carry padding).
bool HasPadding(const PartitionedValue& value, const std::vector<int64_t>& dims);

}  // namespace meshsplit::spmd
