// Control flow: while, conditional and call run their called computations
// partitioned rather than replicated. The caller picks the layout of the
// values crossing the call boundary (the while's own sharding for the loop
// state, each branch operand's current sharding, each call argument's), the
// callee is partitioned with its parameters laid out that way, and its root
// is resharded to the layout the caller expects back.
#include "partitioner/context.h"

namespace meshsplit::spmd {

namespace {

bool HasUnreducedPart(const Sharding& s) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements())
      if (HasUnreducedPart(e)) return true;
    return false;
  }
  if (s.IsUnreduced()) return true;
  return s.IsTiled() && s.SubgroupSize(SubgroupType::kUnreduced) > 1;
}

// A value with an unreduced part is still to be summed; it is summed (laid
// out by its instruction's own sharding) before it crosses into another
// computation, whose parameter must hold plain values.
Sharding BoundarySharding(SpmdContext& ctx, const Instruction& operand,
                          const PartitionedValue& v) {
  if (HasUnreducedPart(v.sharding)) return ctx.ShardingOf(operand);
  return v.sharding;
}

}  // namespace

Status HandleWhile(SpmdContext& ctx, const Instruction& instr) {
  if (instr.operand_count() != 1 || instr.called_computations().size() != 2)
    return ctx.Fallback(instr, "while without one operand, a condition and a body");
  // The loop state keeps one layout across iterations: the while's sharding
  // is the layout of the body parameter and root and of the condition
  // parameter.
  Sharding s = ctx.ShardingOf(instr);
  PartitionedValue init = ctx.OperandAs(instr, 0, s);
  const Computation* cond = instr.called_computations()[0];
  const Computation* body = instr.called_computations()[1];
  std::vector<Sharding> params = {s};
  MS_ASSIGN_OR_RETURN(Computation* new_cond,
                      ctx.PartitionCalled(cond, params, Sharding::Replicate()));
  MS_ASSIGN_OR_RETURN(Computation* new_body, ctx.PartitionCalled(body, params, s));
  Instruction* w = ctx.CloneWithCalled(instr, LocalShape(instr.shape(), s), {init.hlo},
                                       {new_cond, new_body});
  ctx.Set(instr, {w, instr.shape(), s});
  return Status::Ok();
}

Status HandleConditional(SpmdContext& ctx, const Instruction& instr) {
  const auto& branches = instr.called_computations();
  if (instr.operand_count() != static_cast<int>(branches.size()) + 1)
    return ctx.Fallback(instr, "conditional whose operands do not match its branches");
  // Every partition must take the same branch: the predicate / index is
  // made replicated. In a manual region (a pipeline stage) each manual
  // group takes its own branch: a manual predicate, replicated over the
  // automatic axes, already agrees within the group, and is kept.
  const Sharding& given = ctx.Get(instr.operand(0)).sharding;
  const bool per_group = given.IsManual() || given.HasManualSubgroup();
  PartitionedValue index =
      ctx.OperandAs(instr, 0, per_group ? given : Sharding::Replicate());
  Sharding s = ctx.ShardingOf(instr);
  std::vector<Instruction*> operands = {index.hlo};
  std::vector<Computation*> called;
  for (size_t i = 0; i < branches.size(); ++i) {
    const Instruction* operand = instr.operand(static_cast<int>(i) + 1);
    const PartitionedValue& v = ctx.Get(operand);
    Sharding ps = BoundarySharding(ctx, *operand, v);
    operands.push_back(Reshard(ctx.b, v, ps).hlo);
    MS_ASSIGN_OR_RETURN(Computation* c, ctx.PartitionCalled(branches[i], {ps}, s));
    called.push_back(c);
  }
  Instruction* c = ctx.CloneWithCalled(instr, LocalShape(instr.shape(), s), operands,
                                       called);
  ctx.Set(instr, {c, instr.shape(), s});
  return Status::Ok();
}

Status HandleCall(SpmdContext& ctx, const Instruction& instr) {
  if (instr.called_computations().size() != 1)
    return ctx.Fallback(instr, "call without exactly one callee");
  Sharding s = ctx.ShardingOf(instr);
  std::vector<Sharding> params;
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i) {
    const PartitionedValue& v = ctx.Get(instr.operand(i));
    Sharding ps = BoundarySharding(ctx, *instr.operand(i), v);
    operands.push_back(Reshard(ctx.b, v, ps).hlo);
    params.push_back(ps);
  }
  MS_ASSIGN_OR_RETURN(Computation* callee,
                      ctx.PartitionCalled(instr.called_computations()[0], params, s));
  Instruction* c = ctx.CloneWithCalled(instr, LocalShape(instr.shape(), s), operands,
                                       {callee});
  ctx.Set(instr, {c, instr.shape(), s});
  return Status::Ok();
}

}  // namespace meshsplit::spmd
