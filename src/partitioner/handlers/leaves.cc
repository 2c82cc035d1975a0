// Leaves: entry parameters take their per-partition shape; constants are
// materialised whole and sliced to their sharding; iota is generated locally
// and shifted by this partition's tile offset.
#include "partitioner/context.h"

namespace meshsplit::spmd {

Status HandleParameter(SpmdContext& ctx, const Instruction& instr) {
  Sharding s = ctx.ShardingOf(instr);
  Instruction* p = ctx.Clone(instr, LocalShape(instr.shape(), s), {});
  if (ctx.has_param_shardings()) {
    p->set_sharding(FlattenTupleSharding(s));
  } else if (instr.has_sharding()) {
    p->set_sharding(*instr.sharding());
  }
  // Parameters placed on one device exist only there: replicate them first.
  Instruction* value = p;
  if (instr.has_sharding() && instr.parent()->IsEntry()) {
    const Sharding& given = *instr.sharding();
    if (given.IsMaximal()) {
      value = BroadcastFromDevice(ctx.b, p, given.device());
    } else if (given.IsTuple() && instr.shape().IsTuple()) {
      std::vector<Instruction*> elems;
      bool any = false;
      for (int i = 0; i < instr.shape().tuple_size(); ++i) {
        Instruction* e = ctx.b.Add(Opcode::kGetTupleElement, p->shape().tuple_shapes(i), {p});
        e->mutable_attrs().tuple_index = i;
        const Sharding& es = ElementSharding(given, instr.shape(), i);
        if (es.IsMaximal()) {
          e = BroadcastFromDevice(ctx.b, e, es.device());
          any = true;
        }
        elems.push_back(e);
      }
      if (any) value = ctx.b.Add(Opcode::kTuple, p->shape(), elems);
    }
  }
  ctx.Set(instr, {value, instr.shape(), s});
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

// partition-id has a per-partition meaning only inside a manual region;
// elsewhere it is ambiguous whether the instruction or its data is
// replicated, and XLA's partitioner rejects it. So does meshsplit.
Status HandlePartitionId(SpmdContext& ctx, const Instruction& instr) {
  const Sharding s = ctx.ShardingOf(instr);
  if (!s.IsManual() && !s.HasManualSubgroup())
    return Status::Error("partition-id %" + instr.name() + " has sharding " + s.ToString(false) +
                             ": partition-id is only supported in a manual region (sharding "
                             "{manual}); elsewhere its meaning is ambiguous",
                         instr.loc());
  return ctx.Fallback(instr);
}

}  // namespace meshsplit::spmd
