// Random-number ops. A replicated (or unannotated, or maximal) rng is drawn
// on one device and broadcast, as XLA does. A tiled rng is
// partition-invariant: each partition draws exactly its tile of the values
// the unpartitioned program draws (ir/partitioned_rng.h), so the partitioned
// program computes the same numbers and needs no collective.
#include <memory>
#include <string>
#include <vector>

#include "ir/partitioned_rng.h"
#include "partitioner/context.h"

namespace meshsplit::spmd {
namespace {

// Adds the custom-call `target` that stands in for `instr` on one partition:
// result `local`, the given operands (inputs, then tile offsets), and a
// frontend attribute recording `kind` (distribution or algorithm) and the
// global dims so the runtime draws exactly this tile. Other attributes are
// kept. The first copy of an input instruction keeps its name (as Clone
// does), so tools can match the tile to the original op.
Instruction* AddPartitionInvariantCall(SpmdContext& ctx, const Instruction& instr,
                                       const char* target, const Shape& local,
                                       const std::string& kind,
                                       const std::vector<int64_t>& global,
                                       const std::vector<Instruction*>& operands) {
  SpmdBuilder& b = ctx.b;
  std::string name = ctx.shared().named.insert(&instr).second
                         ? instr.name()
                         : b.module()->UniqueInstructionName(instr.name());
  auto cc = std::make_unique<Instruction>(Opcode::kCustomCall, name, local);
  Attributes& a = cc->mutable_attrs();
  a.custom_call_target = target;
  std::string frontend;
  for (const auto& kv : instr.attrs().extra) {
    if (kv.first == "frontend_attributes") frontend = kv.second;
    else a.extra.push_back(kv);
  }
  a.extra.emplace_back("frontend_attributes",
                       FormatPartitionInvariantRng({kind, global, instr.name()}, frontend));
  cc->set_loc(instr.loc());
  for (Instruction* o : operands) cc->AppendOperand(o);
  return b.AddInstruction(std::move(cc));
}

}  // namespace

Status HandleRng(SpmdContext& ctx, const Instruction& instr) {
  const Sharding given = instr.has_sharding() ? *instr.sharding() : Sharding::Maximal(0);
  if (!instr.shape().IsArray() || given.IsTuple() || given.IsManual() ||
      given.HasManualSubgroup() || HasUnreduced(given))
    return ctx.Fallback(instr);
  SpmdBuilder& b = ctx.b;
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i)
    operands.push_back(ctx.OperandAs(instr, i, Sharding::Replicate()).hlo);
  if (!given.IsTiled()) {
    // Replicated values must agree on every partition: device 0 (or the
    // named device) draws them and broadcasts (select + all-reduce).
    const int64_t device = given.IsMaximal() ? given.device() : 0;
    Instruction* whole = BroadcastFromDevice(b, ctx.Clone(instr, instr.shape(), operands), device);
    ctx.Set(instr, Reshard(b, {whole, instr.shape(), Sharding::Replicate()}, ctx.ShardingOf(instr)));
    return Status::Ok();
  }
  // Tiled: the rng becomes a PartitionInvariantRng custom-call on the tile,
  // told where the tile starts (offsets from partition-id). The members of
  // a partially replicated group hold the same tile, so they draw the same
  // values without XLA's draw-on-one-member-and-all-reduce.
  const Sharding s = ctx.ShardingOf(instr);
  const std::vector<int64_t>& global = instr.shape().dimensions();
  for (int64_t d = 0; d < instr.shape().rank(); ++d) operands.push_back(TileOffset(b, s, global, d));
  Instruction* r = AddPartitionInvariantCall(ctx, instr, kPartitionInvariantRngTarget,
                                             LocalShape(instr.shape(), s),
                                             instr.attrs().rng_distribution, global, operands);
  ctx.Set(instr, {r, instr.shape(), s});
  return Status::Ok();
}

// Rng-bit-generator is a deterministic function of its (tiny, replicated)
// state. With tiled bits each partition draws only its tile
// (PartitionInvariantRngBitGenerator, same values as the whole op) and
// the new state; otherwise every partition computes the whole value and
// keeps its piece. Exact either way, and no data moves.
Status HandleRngBitGenerator(SpmdContext& ctx, const Instruction& instr) {
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i)
    operands.push_back(ctx.OperandAs(instr, i, Sharding::Replicate()).hlo);
  const Sharding out = ctx.ShardingOf(instr);
  const Shape& shape = instr.shape();
  if (shape.IsTuple() && shape.tuple_size() == 2 && shape.tuple_shapes(1).IsArray() &&
      shape.tuple_shapes(1).rank() > 0 && operands.size() == 1 && out.IsTuple() &&
      out.tuple_elements().size() == 2) {
    const Shape& bits = shape.tuple_shapes(1);
    const Sharding s = out.tuple_elements()[1];
    const int64_t count = bits.ElementCount();
    const int64_t size = count > 0 ? bits.ByteSize() / count : 0;
    if (s.IsTiled() && !s.HasManualSubgroup() && !HasUnreduced(s) && size > 0 &&
        size * count == bits.ByteSize() && 8 % size == 0) {
      SpmdBuilder& b = ctx.b;
      for (int64_t d = 0; d < bits.rank(); ++d)
        operands.push_back(TileOffset(b, s, bits.dimensions(), d));
      Shape local = Shape::Tuple({shape.tuple_shapes(0), LocalShape(bits, s)});
      Instruction* r = AddPartitionInvariantCall(ctx, instr,
                                                 kPartitionInvariantRngBitGeneratorTarget, local,
                                                 instr.attrs().rng_algorithm, bits.dimensions(),
                                                 operands);
      const Sharding drawn = Sharding::Tuple({Sharding::Replicate(), s});
      ctx.Set(instr, Reshard(b, {r, shape, drawn}, out));
      return Status::Ok();
    }
  }
  Instruction* whole = ctx.Clone(instr, instr.shape(), operands);
  Sharding replicated = Sharding::Replicate();
  if (instr.shape().IsTuple())
    replicated = Sharding::Tuple(std::vector<Sharding>(instr.shape().tuple_size(), replicated));
  ctx.Set(instr, Reshard(ctx.b, {whole, instr.shape(), replicated}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
