// Ops that leave values unchanged and only annotate them: opt-barrier (a
// scheduling fence over a tuple) and the host-offloading custom-calls
// (MoveToHost, MoveToDevice, PinToDevice, PinToDeviceSram). They run on
// each partition's own piece, as XLA's partitioner runs them, instead of on
// whole values.
#include <string>

#include "partitioner/context.h"

namespace meshsplit::spmd {

bool IsMemoryAnnotation(const Instruction& instr) {
  if (instr.opcode() != Opcode::kCustomCall || instr.operand_count() != 1) return false;
  const std::string& t = instr.attrs().custom_call_target;
  return t == "MoveToHost" || t == "MoveToDevice" || t == "PinToDevice" ||
         t == "PinToDeviceSram";
}

// opt-barrier: the operand (a tuple, leaf by leaf) is laid out as the
// barrier's own sharding says, and the barrier runs on the local pieces. An
// unannotated barrier keeps its operand's layout: it must not move data
// just to fence it.
Status HandleOptimizationBarrier(SpmdContext& ctx, const Instruction& instr) {
  PartitionedValue v = ctx.Get(instr.operand(0));
  if (instr.has_sharding()) v = Reshard(ctx.b, v, ctx.ShardingOf(instr));
  Instruction* r = ctx.Clone(instr, v.hlo->shape(), {v.hlo});
  ctx.Set(instr, {r, instr.shape(), v.sharding});
  return Status::Ok();
}

// MoveToHost is elementwise (the operand takes the result's layout, as XLA
// does). The others run on the operand's own layout and the result is
// resharded afterwards, so that no collective sits between the value and
// its move (XLA does the same, for its host-offloader to match the
// pattern).
Status HandleMemoryAnnotation(SpmdContext& ctx, const Instruction& instr) {
  if (!instr.shape().IsArray()) return ctx.Fallback(instr, "tuple-shaped memory annotation");
  if (instr.attrs().custom_call_target == "MoveToHost") return HandleElementwise(ctx, instr);
  PartitionedValue v = ctx.Get(instr.operand(0));
  if (v.sharding.IsTuple() || HasUnreduced(v.sharding))
    v = Reshard(ctx.b, v, ctx.ShardingOf(instr));
  Instruction* r = ctx.Clone(instr, v.hlo->shape(), {v.hlo});
  ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), v.sharding}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
