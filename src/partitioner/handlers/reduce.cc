// reduce: when the input is tiled along reduced dims, each partition reduces
// its tile (padding replaced by the init value) and an all-reduce with the
// same reducer combines the partial results over those dims; otherwise the
// input is resharded so that the reduced dims are whole and the kept dims
// are tiled like the result.
#include <algorithm>

#include "partitioner/context.h"

namespace meshsplit::spmd {

Status HandleReduce(SpmdContext& ctx, const Instruction& instr) {
  const int n_in = instr.operand_count() / 2;
  Sharding out = ctx.ShardingOf(instr);
  Sharding out0 = out.IsTuple() ? out.tuple_elements().at(0) : out;
  const Shape& in_shape = instr.operand(0)->shape();
  const std::vector<int64_t>& reduced = instr.attrs().dimensions;
  std::vector<int64_t> kept;  // input dim of each result dim
  for (int64_t d = 0; d < in_shape.rank(); ++d)
    if (std::find(reduced.begin(), reduced.end(), d) == reduced.end()) kept.push_back(d);
  std::vector<int64_t> in_to_out(in_shape.rank(), -1);
  for (size_t j = 0; j < kept.size(); ++j) in_to_out[kept[j]] = j;

  std::vector<Instruction*> inits;
  for (int i = n_in; i < instr.operand_count(); ++i)
    inits.push_back(ctx.OperandAs(instr, i, Sharding::Replicate()).hlo);

  // Partial reduction on the input's own tiling (single-input reduces).
  PartitionedValue in = ctx.Get(instr.operand(0));
  in.sharding = NormalizeForPartitioning(in.sharding);
  if (HasUnreduced(in.sharding)) in = Reshard(ctx.b, in, ReduceUnreduced(in.sharding));
  std::vector<int64_t> tiled_reduced;  // tile-assignment dims to all-reduce over
  if (in.sharding.IsTiled())
    for (int64_t d : reduced)
      if (in.sharding.TileDim(d) > 1) tiled_reduced.push_back(d);
  // In a partially manual region the groups along the reduced data dims lie
  // inside one manual subgroup each, so the same rule applies there.
  if (n_in == 1 && !tiled_reduced.empty() && !out0.IsManual()) {
    Instruction* x = MaskPadding(ctx.b, in, reduced, inits[0]);
    Sharding partial = ProjectSharding(in.sharding, kept);
    Shape local = LocalShape(instr.shape(), partial);
    Instruction* r = ctx.Clone(instr, local, {x, inits[0]});
    Computation* reducer = ctx.CloneCalled(instr.to_apply());
    {
      SpmdBuilder::ScopedCause rule(ctx.b, instr, "reduced dims sharded -> partial results combined");
      r = ctx.b.AllReduce(r, in.sharding.GroupsAlongDims(tiled_reduced), reducer);
    }
    ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), partial}, out));
    return Status::Ok();
  }
  // Variadic reduces combine their partial results by a second reduce
  // (handlers/reduce_variadic.cc).
  if (n_in > 1 && !tiled_reduced.empty() &&
      !out0.IsManual() && instr.shape().IsTuple())
    return HandleVariadicReducePartial(ctx, instr, in.sharding);
  // Reduced dims whole, kept dims tiled like the result.
  std::vector<int64_t> out_to_in_map(in_shape.rank(), -1);
  for (int64_t d = 0; d < in_shape.rank(); ++d) out_to_in_map[d] = in_to_out[d];
  Sharding in_target = ProjectSharding(out0, out_to_in_map);
  std::vector<Instruction*> operands;
  for (int i = 0; i < n_in; ++i) operands.push_back(ctx.OperandAs(instr, i, in_target).hlo);
  operands.insert(operands.end(), inits.begin(), inits.end());
  Sharding result = out0;
  if (instr.shape().IsTuple())
    result = Sharding::Tuple(std::vector<Sharding>(instr.shape().tuple_size(), out0));
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), result), operands);
  ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), result}, out));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
