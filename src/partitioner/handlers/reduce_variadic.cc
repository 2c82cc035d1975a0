// Variadic reduce (several inputs reduced together, e.g. argmax over values
// and indices) whose first input is tiled along reduced dims. A tuple
// all-reduce cannot combine the partial results (the reducer pairs values
// across inputs), so, as XLA does, each partition reduces its own tile
// (padding replaced by each input's init value), the partial results of a
// device group are all-gathered into a small dim of one element per tile,
// and a second reduce with the same reducer combines them. Only the
// partial results move, never the inputs.
#include <algorithm>

#include "partitioner/context.h"

namespace meshsplit::spmd {

Status HandleVariadicReducePartial(SpmdContext& ctx, const Instruction& instr,
                                   const Sharding& in_sharding) {
  SpmdBuilder& b = ctx.b;
  const int n_in = instr.operand_count() / 2;
  const Shape& in_shape = instr.operand(0)->shape();
  const std::vector<int64_t>& reduced = instr.attrs().dimensions;
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < in_shape.rank(); ++d)
    if (std::find(reduced.begin(), reduced.end(), d) == reduced.end()) kept.push_back(d);
  std::vector<int64_t> tiled_reduced;
  for (int64_t d : reduced)
    if (in_sharding.TileDim(d) > 1) tiled_reduced.push_back(d);

  SpmdBuilder::ScopedCause rule(b, instr,
                                "reduced dims sharded -> partial results gathered, reduced again");
  std::vector<Instruction*> inits, inputs;
  for (int i = n_in; i < instr.operand_count(); ++i)
    inits.push_back(ctx.OperandAs(instr, i, Sharding::Replicate()).hlo);
  for (int i = 0; i < n_in; ++i) {
    PartitionedValue v = ctx.OperandAs(instr, i, in_sharding);
    inputs.push_back(MaskPadding(b, v, reduced, inits[i]));
  }
  const Sharding partial = ProjectSharding(in_sharding, kept);
  const Shape local = LocalShape(instr.shape(), Sharding::Tuple(std::vector<Sharding>(
                                                    instr.shape().tuple_size(), partial)));
  std::vector<Instruction*> operands = inputs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  Computation* reducer = ctx.CloneCalled(instr.to_apply());
  Instruction* first = b.Add(Opcode::kReduce, local, operands);
  first->mutable_attrs().dimensions = reduced;
  first->set_called_computations({reducer});

  // Each partial result, with the reduced dims put back as size-1 dims, is
  // this partition's element of a value whose reduced dims have one element
  // per tile; gathering those dims gives every partition all partials.
  const Sharding gathered = PartiallyReplicateTiledShardingOnDims(in_sharding, tiled_reduced);
  std::vector<Instruction*> partials;
  for (int i = 0; i < n_in; ++i) {
    const Shape& elem = local.tuple_shapes(i);
    Instruction* gte = b.Add(Opcode::kGetTupleElement, elem, {first});
    gte->mutable_attrs().tuple_index = i;
    std::vector<int64_t> expanded = inputs[i]->shape().dimensions();
    std::vector<int64_t> global = in_shape.dimensions();
    for (int64_t d : reduced) {
      expanded[d] = 1;
      global[d] = in_sharding.TileDim(d);
    }
    Instruction* x = b.Reshape(gte, expanded);
    PartitionedValue pv{x, Shape(elem.element_type(), global), in_sharding};
    partials.push_back(Reshard(b, pv, gathered).hlo);
  }
  std::vector<Instruction*> second = partials;
  second.insert(second.end(), inits.begin(), inits.end());
  // The combining reduce is the instruction's own value (it keeps its name).
  Instruction* r = ctx.Clone(instr, local, second);
  const Sharding result =
      Sharding::Tuple(std::vector<Sharding>(instr.shape().tuple_size(), partial));
  ctx.Set(instr, Reshard(b, {r, instr.shape(), result}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
