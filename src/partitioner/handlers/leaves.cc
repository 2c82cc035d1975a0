// Leaves: entry parameters take their per-partition shape; constants are
// materialised whole and sliced to their sharding; iota is generated locally
// and shifted by this partition's tile offset.
#include "partitioner/context.h"

namespace meshsplit::spmd {

Status HandleParameter(SpmdContext& ctx, const Instruction& instr) {
  Sharding s = ctx.ShardingOf(instr);
  Instruction* p = ctx.Clone(instr, LocalShape(instr.shape(), s), {});
  if (instr.has_sharding()) p->set_sharding(*instr.sharding());
  ctx.Set(instr, {p, instr.shape(), s});
  return Status::Ok();
}

Status HandleConstant(SpmdContext& ctx, const Instruction& instr) {
  Instruction* c = ctx.Clone(instr, instr.shape(), {});
  PartitionedValue whole{c, instr.shape(), Sharding::Replicate()};
  ctx.Set(instr, Reshard(ctx.b, whole, ctx.ShardingOf(instr)));
  return Status::Ok();
}

Status HandleIota(SpmdContext& ctx, const Instruction& instr) {
  Sharding s = ctx.ShardingOf(instr);
  if (s.IsTuple()) return ctx.Fallback(instr);
  Shape local = LocalShape(instr.shape(), s);
  Instruction* iota = ctx.Clone(instr, local, {});
  const int64_t dim = instr.attrs().iota_dimension;
  if (s.IsTiled() && s.TileDim(dim) > 1) {
    Instruction* offset = TileOffset(ctx.b, s, instr.shape().dimensions(), dim);
    offset = ctx.b.Convert(offset, local.element_type());
    iota = ctx.b.Binary(Opcode::kAdd, iota,
                        ctx.b.BroadcastScalar(offset, local.dimensions()));
  }
  ctx.Set(instr, {iota, instr.shape(), s});
  return Status::Ok();
}

}  // namespace meshsplit::spmd
