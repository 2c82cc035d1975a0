// add-dependency and get-dimension-size. add-dependency keeps its value's
// layout (the token only orders, so each partition orders its own piece);
// get-dimension-size of a static shape is the global size on every
// partition, never the size of a local (possibly padded) piece.
#include "partitioner/context.h"

namespace meshsplit::spmd {

Status HandleAddDependency(SpmdContext& ctx, const Instruction& instr) {
  PartitionedValue v = ctx.Get(instr.operand(0));
  if (instr.has_sharding()) v = Reshard(ctx.b, v, ctx.ShardingOf(instr));
  Instruction* token = ctx.Get(instr.operand(1)).hlo;
  Instruction* r = ctx.Clone(instr, v.hlo->shape(), {v.hlo, token});
  ctx.Set(instr, {r, instr.shape(), v.sharding});
  return Status::Ok();
}

Status HandleGetDimensionSize(SpmdContext& ctx, const Instruction& instr) {
  const Shape& x = instr.operand(0)->shape();
  const std::vector<int64_t>& d = instr.attrs().dimensions;
  if (!x.IsArray() || d.size() != 1 || d[0] < 0 || d[0] >= x.rank())
    return ctx.Fallback(instr);
  Instruction* size = ctx.b.ScalarConstant(PrimitiveType::S32,
                                           static_cast<double>(x.dimensions(d[0])));
  ctx.Set(instr, Reshard(ctx.b, {size, instr.shape(), Sharding::Replicate()},
                         ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
