// Planning a contraction (dot, convolution) over the mesh: the shardings of
// both operands and the result are decomposed into common mesh axes
// (factors of the device iota), and every axis is given one role in the
// contraction's iteration space — a batch, lhs-free, rhs-free or contracting
// dim, or replication — so that a device subgroup handles one kind of dim
// and the remaining axes are planned recursively inside it. The cheapest
// plan by bytes moved wins. Shared by handlers/dot.cc and
// handlers/windowed_einsum.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ir/instruction.h"
#include "partitioner/context.h"
#include "rules/op_rules.h"

namespace meshsplit::spmd {

// The iteration space of a contraction: each operand / result dim maps to an
// iteration dim, or to -1 when the op reaches across it (a convolution's
// spatial dims), which must then be whole. Iteration dims no result dim maps
// to are contracting (summed over).
struct ContractionSpace {
  std::vector<int64_t> lhs_to_iter, rhs_to_iter, out_to_iter;
  int64_t n_iter = 0;
  // Size of every iteration dim.
  std::vector<int64_t> iter_sizes;
  // True for iteration dims that are summed over.
  std::vector<bool> contracting;
};

ContractionSpace MakeContractionSpace(const Instruction& instr,
                                      const std::vector<int64_t>& lhs_to_iter,
                                      const std::vector<int64_t>& rhs_to_iter,
                                      const std::vector<int64_t>& out_to_iter, int64_t n_iter);

// The contraction space of dot-like factors of `instr`'s sharding rule
// (GetOpShardingRule; operand 0 is the lhs, 1 the rhs): iteration dim i is
// factors[i], summed over when the result lacks it. Dims no factor names
// are taken whole.
ContractionSpace ContractionSpaceOf(const std::vector<Factor>& factors, const Instruction& instr);

// The dims of operand `side` (0 = lhs, 1 = rhs) that lie on contracting
// iteration dims, in iteration-dim order.
std::vector<int64_t> ContractingDims(const ContractionSpace& space, int side);

// The shared core of dot, convolution and the block-scaled dot
// (handlers/dot.cc): `instr` partitioned in `space`, its contracting dims'
// padding zeroed on both sides. `make_local`, when given, emits the local
// op from the resharded lhs and rhs and the local result shape instead of a
// clone of `instr` (for dot-like ops with more operands, e.g. the
// block-scaled dot's scales); windowed einsum is then not tried.
using LocalContraction = std::function<Instruction*(
    const PartitionedValue& lhs, const PartitionedValue& rhs, const Shape& local_shape)>;
Status PartitionContraction(SpmdContext& ctx, const Instruction& instr,
                            const ContractionSpace& space,
                            const LocalContraction& make_local = nullptr);

// The iteration-space sharding (data dims = iteration dims, then manual
// and replicated subgroups) chosen by the mesh-axis search, or nullopt when
// the three shardings do not decompose into common mesh axes (explicit
// device arrays, tilings that cut each other's factors, unreduced
// subgroups, a device count other than `num_partitions`) or do not share
// one manual subgroup; the caller then falls back to whole-sharding
// candidates. In a partially manual region (`out` has a manual subgroup,
// each operand the same one or none when replicated) the manual axes keep
// their role and only the others are planned, so the contraction is
// partitioned inside every manual subgroup and its collectives stay there.
// REQUIRES: lhs, rhs and out are normalised (NormalizeForPartitioning).
std::optional<Sharding> PlanByMeshAxes(const ContractionSpace& space, const Shape& lhs_shape,
                                       const Shape& rhs_shape, const Shape& out_shape,
                                       const Sharding& lhs, const Sharding& rhs,
                                       const Sharding& out, int64_t num_partitions);

// Windowed einsum (collective matmul). When reaching the planned layout
// would all-gather operand `gathered` (0 = lhs, 1 = rhs) along exactly one
// data dim and that gather moves more than
// options.windowed_einsum_threshold_bytes, emits a while loop that keeps
// the operand's shards moving around the ring by collective-permute and
// computes one block of the result per iteration (dynamic-update-slice when
// the gathered dim reaches the result, accumulation when it is
// contracting). Returns the local partial result laid out by
// `partial` (the same value the plain dot would produce), or nullptr when
// the windowed form does not apply (the caller then gathers as usual).
// `make_other` returns the other operand resharded (and masked) to its
// planned sharding; it is called only once the windowed form applies.
Instruction* TryWindowedEinsum(SpmdContext& ctx, const Instruction& instr,
                               const ContractionSpace& space, int gathered,
                               const PartitionedValue& operand, const Sharding& target,
                               const std::function<PartitionedValue()>& make_other,
                               const Sharding& partial);

// The reduce-scatter loop of windowed einsum (handlers/windowed_einsum.cc):
// when the dot's local partial sums (`partial`, operands `lhs` / `rhs`
// already laid out and masked for it) would be reduce-scattered along one
// result dim to reach `out`, the running sum of each result block travels
// the ring instead. Returns the result laid out by `out`, or nullptr when
// the form does not apply or is not enabled (PartitionOptions).
Instruction* TryWindowedReduceScatter(SpmdContext& ctx, const Instruction& instr,
                                      const ContractionSpace& space, const PartitionedValue& lhs,
                                      const PartitionedValue& rhs, const Sharding& partial,
                                      const Sharding& out);

}  // namespace meshsplit::spmd
