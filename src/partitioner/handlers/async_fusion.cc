// fusion and the asynchronous pairs. A fusion is partitioned like a call:
// its fused computation runs on each partition's pieces. async-start
// partitions its wrapped computation the same way and keeps the pair
// asynchronous; update and done forward the start's tuple. The collective
// starts run as written on whole values, as sync collectives in the input
// do (handlers/collectives.cc). copy-start / copy-done keep the operand's
// layout: each partition copies its own piece.
#include "partitioner/context.h"

namespace meshsplit::spmd {
namespace {

// The sharding the wrapped computation's result gets: the start's own
// annotation of tuple element 1, else the sharding of the done that ends
// the chain, else replicated.
Sharding AsyncResultSharding(SpmdContext& ctx, const Instruction& start) {
  if (start.has_sharding()) {
    Sharding nested = NestTupleSharding(*start.sharding(), start.shape());
    if (!nested.IsTuple()) return NormalizeForPartitioning(nested);
    if (nested.tuple_elements().size() >= 2)
      return NormalizeForPartitioning(nested.tuple_elements()[1]);
  }
  const Instruction* at = &start;
  for (int steps = 0; steps < 64; ++steps) {
    const Instruction* next = nullptr;
    for (const Instruction* u : at->users()) {
      if (u->opcode() == Opcode::kAsyncDone) return ctx.ShardingOf(*u);
      if (u->opcode() == Opcode::kAsyncUpdate) next = u;
    }
    if (next == nullptr) break;
    at = next;
  }
  return Sharding::Replicate();
}

// update / done: the partitioned start (or update) they read, and the
// computation its clone calls, which they must name too when the input
// names one.
std::vector<Computation*> CalledLikeOperand(const Instruction& instr,
                                            const PartitionedValue& v) {
  if (instr.called_computations().empty()) return {};
  return v.hlo->called_computations();
}

}  // namespace

Status HandleFusion(SpmdContext& ctx, const Instruction& instr) {
  return HandleCall(ctx, instr);  // same contract: operands in, root out
}

Status HandleAsyncStart(SpmdContext& ctx, const Instruction& instr) {
  const auto& called = instr.called_computations();
  const Shape& shape = instr.shape();
  if (called.size() != 1 || !shape.IsTuple() || shape.tuple_size() < 2)
    return ctx.Fallback(instr, "async-start without one wrapped computation");
  std::vector<Sharding> params;
  std::vector<Instruction*> operands;
  std::vector<Shape> local_operands;
  for (int i = 0; i < instr.operand_count(); ++i) {
    PartitionedValue v = ctx.Get(instr.operand(i));
    // Partial sums are summed before they cross into the wrapped computation.
    if (HasUnreduced(v.sharding)) v = Reshard(ctx.b, v, ReduceUnreduced(v.sharding));
    params.push_back(v.sharding);
    operands.push_back(v.hlo);
    local_operands.push_back(v.hlo->shape());
  }
  const Sharding rs = AsyncResultSharding(ctx, instr);
  MS_ASSIGN_OR_RETURN(Computation* callee, ctx.PartitionCalled(called[0], params, rs));
  std::vector<Shape> elems = {Shape::Tuple(local_operands), LocalShape(shape.tuple_shapes(1), rs)};
  std::vector<Sharding> shardings = {Sharding::Tuple(params), rs};
  for (int i = 2; i < shape.tuple_size(); ++i) {
    elems.push_back(shape.tuple_shapes(i));
    shardings.push_back(Sharding::Replicate());
  }
  Instruction* c = ctx.CloneWithCalled(instr, Shape::Tuple(elems), operands, {callee});
  ctx.Set(instr, {c, shape, Sharding::Tuple(shardings)});
  return Status::Ok();
}

Status HandleAsyncUpdate(SpmdContext& ctx, const Instruction& instr) {
  const PartitionedValue& v = ctx.Get(instr.operand(0));
  Instruction* c = ctx.CloneWithCalled(instr, v.hlo->shape(), {v.hlo}, CalledLikeOperand(instr, v));
  ctx.Set(instr, {c, instr.shape(), v.sharding});
  return Status::Ok();
}

// async-done, all-gather-done, collective-permute-done (element 1 of the
// start) and copy-done (element 0).
Status HandleDone(SpmdContext& ctx, const Instruction& instr) {
  const PartitionedValue& v = ctx.Get(instr.operand(0));
  const int64_t index = instr.opcode() == Opcode::kCopyDone ? 0 : 1;
  const Shape& local = v.hlo->shape();
  if (!local.IsTuple() || local.tuple_size() <= index) return ctx.Fallback(instr);
  Instruction* c = ctx.CloneWithCalled(instr, local.tuple_shapes(index), {v.hlo},
                                       CalledLikeOperand(instr, v));
  PartitionedValue out{c, instr.shape(), ElementSharding(v.sharding, v.shape, index)};
  if (instr.has_sharding() && !out.sharding.IsManual())
    out = Reshard(ctx.b, out, ctx.ShardingOf(instr));
  ctx.Set(instr, out);
  return Status::Ok();
}

Status HandleCopyStart(SpmdContext& ctx, const Instruction& instr) {
  const Shape& shape = instr.shape();
  if (!shape.IsTuple() || shape.tuple_size() < 2) return ctx.Fallback(instr);
  PartitionedValue v = ctx.Get(instr.operand(0));
  if (HasUnreduced(v.sharding)) v = Reshard(ctx.b, v, ReduceUnreduced(v.sharding));
  // An annotated destination (tuple element 0) picks the layout.
  if (instr.has_sharding()) {
    Sharding nested = NestTupleSharding(*instr.sharding(), shape);
    Sharding dest = nested.IsTuple() && !nested.tuple_elements().empty()
                        ? nested.tuple_elements()[0]
                        : nested;
    v = Reshard(ctx.b, v, NormalizeForPartitioning(dest));
  }
  std::vector<Shape> elems = {v.hlo->shape(), v.hlo->shape()};
  std::vector<Sharding> shardings = {v.sharding, v.sharding};
  for (int i = 2; i < shape.tuple_size(); ++i) {
    elems.push_back(shape.tuple_shapes(i));
    shardings.push_back(Sharding::Replicate());
  }
  Instruction* c = ctx.Clone(instr, Shape::Tuple(elems), {v.hlo});
  ctx.Set(instr, {c, shape, Sharding::Tuple(shardings)});
  return Status::Ok();
}

namespace {

bool AnyManual(const Sharding& s) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements())
      if (AnyManual(e)) return true;
    return false;
  }
  return s.IsManual() || (s.IsTiled() && s.HasManualSubgroup());
}

bool AllManual(const Sharding& s) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements())
      if (!AllManual(e)) return false;
    return true;
  }
  return s.IsManual();
}

// A collective start as written: inside a manual region on each
// partition's (already local) values, elsewhere on whole values. Unlike the
// general fallback it stays one instruction, so its done can name it.
Status HandleCollectiveStart(SpmdContext& ctx, const Instruction& instr) {
  const Sharding s = ctx.ShardingOf(instr);
  const bool manual = AnyManual(s);
  // Partially manual: checked and run by the general rule.
  if (manual && !AllManual(s)) return HandleInputCollective(ctx, instr);
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i)
    operands.push_back(manual ? ctx.Get(instr.operand(i)).hlo
                              : ctx.OperandAs(instr, i, Sharding::Replicate()).hlo);
  Instruction* c = ctx.Clone(instr, instr.shape(), operands);
  ctx.Set(instr, {c, instr.shape(), manual ? Sharding::Manual() : Sharding::Replicate()});
  return Status::Ok();
}

// all-reduce-done: the start's value as it is.
Status HandleAllReduceDone(SpmdContext& ctx, const Instruction& instr) {
  const PartitionedValue& v = ctx.Get(instr.operand(0));
  Instruction* c = ctx.Clone(instr, v.hlo->shape(), {v.hlo});
  PartitionedValue out{c, instr.shape(), v.sharding};
  if (instr.has_sharding() && !AnyManual(v.sharding))
    out = Reshard(ctx.b, out, ctx.ShardingOf(instr));
  ctx.Set(instr, out);
  return Status::Ok();
}

}  // namespace

Status HandleAsyncCollective(SpmdContext& ctx, const Instruction& instr) {
  switch (instr.opcode()) {
    case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteDone:
      return HandleDone(ctx, instr);
    case Opcode::kAllReduceDone:
      return HandleAllReduceDone(ctx, instr);
    default:
      return HandleCollectiveStart(ctx, instr);
  }
}

}  // namespace meshsplit::spmd
