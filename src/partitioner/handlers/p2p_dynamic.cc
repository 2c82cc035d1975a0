// send / recv and their -done ops, collective-broadcast, ragged-all-to-all,
// set-dimension-size and dynamic-reshape. XLA's partitioner has no rule of
// its own for the transfers and collectives (they are not spatially
// partitioned): they run on whole values, as collectives written in the
// input do, so every partition exchanges exactly what the unpartitioned
// program exchanged, and as written in a manual region; a transfer with a
// replicated or tiled sharding is refused, as XLA refuses side-effecting
// ops spread over partitions.
// set-dimension-size keeps its operand's layout except along the dimension
// it sizes, which is made whole so that the size stays the global one (as
// get-dimension-size returns the global size).
// dynamic-reshape runs on whole values (our shapes are static bounds, so it
// is a reshape of the bounds; like XLA we have no partitioned form).
#include <algorithm>
#include <string>
#include <vector>

#include "partitioner/context.h"

namespace meshsplit::spmd {

namespace {

// Whether every element of `s` satisfies `pred` (s itself when not a tuple).
template <typename Pred>
bool AllElements(const Sharding& s, Pred pred) {
  return pred(s) || (s.IsTuple() && std::all_of(s.tuple_elements().begin(),
                                                s.tuple_elements().end(), pred));
}

// In a (fully) manual region an op runs as written on each partition's own
// values: its operands are manual too, so no layout changes. False (nothing
// emitted) when `instr` is not manual.
bool RunAsWrittenIfManual(SpmdContext& ctx, const Instruction& instr) {
  if (!instr.has_sharding() ||
      !AllElements(*instr.sharding(), [](const Sharding& e) { return e.IsManual(); }))
    return false;
  std::vector<Instruction*> operands;
  for (const Instruction* o : instr.operands()) operands.push_back(ctx.Get(o).hlo);
  Instruction* r = ctx.Clone(instr, instr.shape(), operands);
  ctx.Set(instr, {r, instr.shape(), *instr.sharding()});
  return true;
}

}  // namespace

Status HandleGroupCollective(SpmdContext& ctx, const Instruction& instr) {
  if (RunAsWrittenIfManual(ctx, instr)) return Status::Ok();
  return HandleInputCollective(ctx, instr);  // handlers/collectives.cc
}

Status HandleSendRecv(SpmdContext& ctx, const Instruction& instr) {
  // Transfers have side effects: like XLA, refuse a sharding that spreads
  // one over several partitions (replicated or tiled), since each would
  // repeat it. Maximal and manual ones, and unannotated ones, run.
  if (RunAsWrittenIfManual(ctx, instr)) return Status::Ok();
  if (instr.has_sharding()) {
    const Sharding& s = *instr.sharding();
    if (!AllElements(s, [](const Sharding& e) { return e.IsMaximal() || e.IsManual(); }))
      return Status::Error(std::string(OpcodeName(instr.opcode())) + " %" + instr.name() +
                               " has sharding " + s.ToString(false) +
                               ": side-effecting ops cannot be replicated or tiled (give them "
                               "a {maximal device=N} or {manual} sharding)",
                           instr.loc());
  }
  return ctx.Fallback(instr, "a point-to-point transfer runs on whole values");
}

Status HandleSetDimensionSize(SpmdContext& ctx, const Instruction& instr) {
  const std::vector<int64_t>& d = instr.attrs().dimensions;
  const PartitionedValue& v = ctx.Get(instr.operand(0));
  if (!v.shape.IsArray() || d.size() != 1 || d[0] < 0 || d[0] >= v.shape.rank() ||
      v.sharding.IsTuple())
    return ctx.Fallback(instr);
  Sharding target = v.sharding;
  if (target.IsTiled() && d[0] < target.TiledDataRank() && target.TileDim(d[0]) > 1)
    target = PartiallyReplicateTiledShardingOnDims(target, {d[0]});
  PartitionedValue x = Reshard(ctx.b, v, target);
  Instruction* size = ctx.OperandAs(instr, 1, Sharding::Replicate()).hlo;
  Shape local = x.hlo->shape();
  std::vector<bool> dynamic = local.dynamic_dimensions();
  dynamic.resize(local.rank(), false);
  dynamic[d[0]] = true;
  local.set_dynamic_dimensions(std::move(dynamic));
  Instruction* r = ctx.Clone(instr, local, {x.hlo, size});
  ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), x.sharding}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

Status HandleDynamicReshape(SpmdContext& ctx, const Instruction& instr) {
  return ctx.Fallback(instr, "dynamic-reshape runs on whole values");
}

}  // namespace meshsplit::spmd
