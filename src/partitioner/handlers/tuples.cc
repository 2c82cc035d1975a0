// Tuples, get-tuple-element and custom-calls: tuples carry their elements'
// shardings through; Sharding custom-calls reshard; SPMDFullToShardShape /
// SPMDShardToFullShape enter and leave manual regions by reinterpreting the
// local value. Other custom-calls run replicated.
#include <algorithm>

#include "partitioner/context.h"

namespace meshsplit::spmd {

Status HandleTuple(SpmdContext& ctx, const Instruction& instr) {
  std::vector<Instruction*> elems;
  std::vector<Sharding> shardings;
  std::vector<Shape> local;
  Sharding target = ctx.ShardingOf(instr);
  for (int i = 0; i < instr.operand_count(); ++i) {
    PartitionedValue v = ctx.Get(instr.operand(i));
    if (instr.has_sharding()) v = Reshard(ctx.b, v, ElementSharding(target, instr.shape(), i));
    elems.push_back(v.hlo);
    shardings.push_back(v.sharding);
    local.push_back(v.hlo->shape());
  }
  Instruction* t = ctx.Clone(instr, Shape::Tuple(local), elems);
  ctx.Set(instr, {t, instr.shape(), Sharding::Tuple(shardings)});
  return Status::Ok();
}

Status HandleGetTupleElement(SpmdContext& ctx, const Instruction& instr) {
  const PartitionedValue& v = ctx.Get(instr.operand(0));
  const int64_t i = instr.attrs().tuple_index;
  Instruction* gte = ctx.Clone(instr, v.hlo->shape().tuple_shapes(i), {v.hlo});
  PartitionedValue out{gte, instr.shape(), ElementSharding(v.sharding, v.shape, i)};
  if (instr.has_sharding()) out = Reshard(ctx.b, out, ctx.ShardingOf(instr));
  ctx.Set(instr, out);
  return Status::Ok();
}

Status HandleCustomCall(SpmdContext& ctx, const Instruction& instr) {
  const std::string& target = instr.attrs().custom_call_target;
  if (target == "Sharding" && instr.operand_count() == 1) {
    ctx.Set(instr, ctx.OperandAs(instr, 0, ctx.ShardingOf(instr)));
    return Status::Ok();
  }
  if ((target == "SPMDFullToShardShape" || target == "SPMDShardToFullShape") &&
      instr.operand_count() == 1 && instr.shape().IsArray()) {
    const PartitionedValue& v = ctx.Get(instr.operand(0));
    Sharding s = ctx.ShardingOf(instr);
    // Full-to-shard: the local tile becomes a manual value of the shard
    // shape. Shard-to-full: the manual local value is the tile of the
    // result's sharding. Either way the data stays where it is.
    Shape local = LocalShape(instr.shape(), s);
    if (!local.Compatible(v.hlo->shape()))
      return ctx.Fallback(instr, "manual region whose local shapes do not line up");
    Instruction* data = v.hlo;
    // Entering a manual region exposes the padding of uneven tiles as data:
    // it reads as zeros there (as in XLA).
    if (target == "SPMDFullToShardShape" && v.shape.IsArray()) {
      std::vector<int64_t> all(v.shape.rank());
      for (size_t d = 0; d < all.size(); ++d) all[d] = d;
      if (HasPadding(v, all))
        data = MaskPadding(ctx.b, v, all, ctx.b.Zero(v.shape.element_type()));
    }
    Instruction* copy = ctx.b.Add(Opcode::kCopy, v.hlo->shape(), {data}, instr.name());
    ctx.Set(instr, {copy, instr.shape(), s});
    return Status::Ok();
  }
  if (IsBlockScaledDot(instr)) return HandleBlockScaledDot(ctx, instr);
  if (target == "TopK") return HandleTopK(ctx, instr);  // handlers/linalg.cc
  if (IsMemoryAnnotation(instr)) return HandleMemoryAnnotation(ctx, instr);  // annotations.cc
  // XLA runs a side-effecting op only on one device (unannotated ones are
  // placed on device 0) and rejects one whose sharding spreads it over
  // several, since every partition would repeat the effect.
  const std::string* side_effect = instr.attrs().FindExtra("custom_call_has_side_effect");
  if (side_effect != nullptr && *side_effect == "true" && instr.has_sharding()) {
    const Sharding& s = *instr.sharding();
    const bool one_device = s.IsMaximal() || s.IsManual() ||
                            (s.IsTuple() && std::all_of(s.tuple_elements().begin(),
                                                        s.tuple_elements().end(),
                                                        [](const Sharding& e) {
                                                          return e.IsMaximal() || e.IsManual();
                                                        }));
    if (!one_device)
      return Status::Error("custom-call %" + instr.name() + " has side effects and sharding " +
                               s.ToString(false) +
                               ": side-effecting ops cannot be replicated or tiled (give them "
                               "a {maximal device=N} or {manual} sharding)",
                           instr.loc());
  }
  return ctx.Fallback(instr, "custom-call target '" + target + "'");
}

}  // namespace meshsplit::spmd
