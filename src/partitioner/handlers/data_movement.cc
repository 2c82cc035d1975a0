// Data-movement ops: slice, pad, concatenate, reverse, dynamic-slice,
// dynamic-update-slice and sort, plus the generic "pass-through" rule for ops
// that work tile by tile on every dim except the ones they reach across
// (those are made whole first).
#include <algorithm>

#include "partitioner/context.h"

namespace meshsplit::spmd {

Status HandleSlice(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  const Shape& in_shape = instr.operand(0)->shape();
  std::vector<int64_t> sliced;
  for (int64_t d = 0; d < in_shape.rank(); ++d) {
    const SliceDimension& s = instr.attrs().slice[d];
    if (s.start != 0 || s.limit != in_shape.dimensions(d) || s.stride != 1) sliced.push_back(d);
  }
  Sharding mid = ReplicateDims(out, sliced);
  PartitionedValue operand = ctx.OperandAs(instr, 0, mid);
  Shape local = LocalShape(instr.shape(), mid);
  Instruction* r = ctx.Clone(instr, local, {operand.hlo});
  for (int64_t d = 0; d < in_shape.rank(); ++d)
    if (std::find(sliced.begin(), sliced.end(), d) == sliced.end())
      r->mutable_attrs().slice[d] = {0, local.dimensions(d), 1};
  ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), mid}, out));
  return Status::Ok();
}

Status HandleConcatenate(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  Sharding mid = ReplicateDims(out, {instr.attrs().dimensions.at(0)});
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i)
    operands.push_back(ctx.OperandAs(instr, i, mid).hlo);
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), mid), operands);
  ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), mid}, out));
  return Status::Ok();
}

Status HandlePassThrough(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  const Shape& first = instr.shape().IsTuple() ? instr.shape().tuple_shapes(0) : instr.shape();
  Sharding out0 = out.IsTuple() ? out.tuple_elements().at(0) : out;
  if (!first.IsArray() || out0.IsTuple()) return ctx.Fallback(instr);
  const Shape& in0 = instr.operand(0)->shape();
  // Dims the op reaches across; every other dim is independent.
  std::vector<int64_t> full;
  const Attributes& a = instr.attrs();
  switch (instr.opcode()) {
    case Opcode::kPad:
      for (int64_t d = 0; d < in0.rank(); ++d)
        if (a.padding[d].low != 0 || a.padding[d].high != 0 || a.padding[d].interior != 0)
          full.push_back(d);
      break;
    case Opcode::kReverse:
      full = a.dimensions;
      break;
    case Opcode::kSort:
      full = a.dimensions;
      break;
    case Opcode::kDynamicSlice:
      for (int64_t d = 0; d < in0.rank(); ++d)
        if (a.dynamic_slice_sizes[d] != in0.dimensions(d)) full.push_back(d);
      break;
    case Opcode::kDynamicUpdateSlice: {
      const Shape& update = instr.operand(1)->shape();
      for (int64_t d = 0; d < in0.rank(); ++d)
        if (update.dimensions(d) != in0.dimensions(d)) full.push_back(d);
      break;
    }
    case Opcode::kReduceWindow:
      if (!a.window) return ctx.Fallback(instr);
      for (int64_t d = 0; d < in0.rank(); ++d) {
        const WindowDimension& w = (*a.window)[d];
        if (w.size != 1 || w.stride != 1 || w.padding_low != 0 || w.padding_high != 0 ||
            w.base_dilation != 1 || w.window_dilation != 1)
          full.push_back(d);
      }
      break;
    case Opcode::kMap:
      break;
    default:
      return ctx.Fallback(instr);
  }
  Sharding mid = ReplicateDims(out0, full);
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i) {
    const Shape& s = instr.operand(i)->shape();
    bool tiled_like_result = s.IsArray() && s.rank() == first.rank() && s.rank() > 0;
    operands.push_back(
        ctx.OperandAs(instr, i, tiled_like_result ? mid : Sharding::Replicate()).hlo);
  }
  Sharding mid_all = mid;
  if (instr.shape().IsTuple())
    mid_all = Sharding::Tuple(std::vector<Sharding>(instr.shape().tuple_size(), mid));
  Shape local = LocalShape(instr.shape(), mid_all);
  Instruction* r = ctx.Clone(instr, local, operands);
  if (instr.opcode() == Opcode::kDynamicSlice) r->mutable_attrs().dynamic_slice_sizes = local.dimensions();
  ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), mid_all}, out));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
