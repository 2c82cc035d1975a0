// Elementwise ops (unary, binary, select, clamp, compare, convert, copy):
// every operand is resharded to the result's sharding and the op runs on
// the local tiles. Padding stays padding, so no masking is needed.
#include "partitioner/context.h"

namespace meshsplit::spmd {

Status HandleElementwise(SpmdContext& ctx, const Instruction& instr) {
  Sharding target = ctx.ShardingOf(instr);
  if (target.IsTuple()) {
    // A copy of a tuple (sharding propagation adds one at an entry root)
    // copies every leaf where it lies, with no need to make it whole.
    if (instr.opcode() != Opcode::kCopy || instr.operand_count() != 1)
      return ctx.Fallback(instr, "tuple-shaped elementwise op");
    PartitionedValue v = ctx.OperandAs(instr, 0, target);
    Instruction* out = ctx.Clone(instr, LocalShape(instr.shape(), target), {v.hlo});
    ctx.Set(instr, {out, instr.shape(), target});
    return Status::Ok();
  }
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i) {
    const Shape& s = instr.operand(i)->shape();
    // Scalar operands of select/clamp broadcast implicitly: keep them whole.
    bool scalar = s.IsArray() && s.rank() == 0 && instr.shape().rank() > 0;
    operands.push_back(
        ctx.OperandAs(instr, i, scalar ? Sharding::Replicate() : target).hlo);
  }
  Shape local = LocalShape(instr.shape(), target);
  Instruction* out = ctx.Clone(instr, local, operands);
  ctx.Set(instr, {out, instr.shape(), target});
  return Status::Ok();
}

}  // namespace meshsplit::spmd
