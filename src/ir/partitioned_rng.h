// The record a tiled `rng` carries through SPMD partitioning so that every
// partition draws exactly the elements of its tile of the unpartitioned
// value (partition-invariant random numbers, like JAX's
// jax_threefry_partitionable). The partitioner writes it, the interpreter
// reads it; both only include this header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/instruction.h"
#include "support/status.h"

namespace meshsplit {

// A partitioned tiled rng is a custom-call with this target. Its operands
// are the rng's two distribution parameters followed by one integer scalar
// per dim: this partition's offset of its tile in the global shape (computed
// from partition-id, so the program stays SPMD). The result is the tile.
inline constexpr char kPartitionInvariantRngTarget[] = "PartitionInvariantRng";

// A partitioned rng-bit-generator whose bits are tiled: a custom-call with
// this target, operands the (whole) state and one integer offset per dim of
// the bits, result (new state, this partition's tile of the bits). The new
// state and every element of the tile equal the unpartitioned op's.
inline constexpr char kPartitionInvariantRngBitGeneratorTarget[] =
    "PartitionInvariantRngBitGenerator";

// What the custom-call records in its frontend_attributes: the original
// rng's distribution (rng-bit-generator: its algorithm), its global dims
// (rng-bit-generator: of the bits) and its name (the generator's key, so a
// uniquified copy still draws the original's stream).
struct PartitionInvariantRng {
  // rng: "rng_uniform" / "rng_normal" ("" = uniform); rng-bit-generator:
  // its algorithm.
  std::string distribution;
  std::vector<int64_t> global_dims;
  std::string name;
};

// True when `instr` is a custom-call with kPartitionInvariantRngTarget.
bool IsPartitionInvariantRng(const Instruction& instr);
// True when `instr` is a custom-call with
// kPartitionInvariantRngBitGeneratorTarget.
bool IsPartitionInvariantRngBitGenerator(const Instruction& instr);

// `frontend_attributes` text holding `record`, keeping the pairs of
// `existing` (a `{k="v",...}` text, or empty).
std::string FormatPartitionInvariantRng(const PartitionInvariantRng& record,
                                        const std::string& existing = "");

// The record of a PartitionInvariantRng custom-call; an error naming what is
// missing or malformed (the text may come from a user's file).
StatusOr<PartitionInvariantRng> ReadPartitionInvariantRng(const Instruction& instr);

}  // namespace meshsplit
