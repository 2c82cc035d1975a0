// Infeed and outfeed: every partition infeeds / outfeeds its own piece of
// the data (padded to the tile shape), laid out by the op's sharding (which
// covers the data leaves, optionally followed by the token). Shardings the
// partitioned program reads as replicated (replicated, maximal) and manual
// ones keep the whole-value fallback.
#include "partitioner/context.h"

namespace meshsplit::spmd {
namespace {

int64_t CountLeaves(const Shape& shape) {
  if (!shape.IsTuple()) return 1;
  int64_t n = 0;
  for (const Shape& e : shape.tuple_shapes()) n += CountLeaves(e);
  return n;
}

// The sharding of an outfeed's data operand of `data` shape, read from the
// instruction's own sharding; nullopt when it cannot be read leaf by leaf
// (nested tuples, too few elements).
std::optional<Sharding> OutfeedDataSharding(const Shape& data, const Sharding& s) {
  if (!s.IsTuple()) {
    if (!data.IsTuple()) return NormalizeForPartitioning(s);
    std::vector<Sharding> leaves(data.tuple_size(), NormalizeForPartitioning(s));
    return Sharding::Tuple(std::move(leaves));
  }
  if (!data.IsTuple()) {
    if (s.tuple_elements().empty()) return std::nullopt;
    return NormalizeForPartitioning(s.tuple_elements()[0]);
  }
  if (s.tuple_elements().size() < static_cast<size_t>(data.tuple_size())) return std::nullopt;
  std::vector<Sharding> leaves;
  for (int64_t i = 0; i < data.tuple_size(); ++i) {
    if (data.tuple_shapes(i).IsTuple()) return std::nullopt;
    leaves.push_back(NormalizeForPartitioning(s.tuple_elements()[i]));
  }
  return Sharding::Tuple(std::move(leaves));
}

}  // namespace

Status HandleOutfeed(SpmdContext& ctx, const Instruction& instr) {
  if (instr.operand_count() != 2 || !instr.has_sharding()) return ctx.Fallback(instr);
  // Maximal shardings mean "this device outfeeds"; the fallback (every
  // device outfeeds the whole value) already satisfies that.
  // Only the data leaves count: a trailing element for the token (often
  // `{maximal device=0}`) says nothing about who outfeeds what.
  const Sharding& given = *instr.sharding();
  if (given.IsMaximal()) return ctx.Fallback(instr);
  const Shape& data_shape = instr.operand(0)->shape();
  std::optional<Sharding> s = OutfeedDataSharding(data_shape, given);
  if (!s.has_value() || IsTriviallyReplicated(*s)) return ctx.Fallback(instr);
  if (given.IsTuple()) {
    const size_t leaves = data_shape.IsTuple() ? data_shape.tuple_size() : 1;
    for (size_t i = 0; i < leaves && i < given.tuple_elements().size(); ++i)
      if (given.tuple_elements()[i].IsMaximal()) return ctx.Fallback(instr);
  }

  SpmdBuilder::ScopedCause rule(ctx.b, instr, "outfeed of each partition's piece");
  PartitionedValue data = ctx.OperandAs(instr, 0, *s);
  Instruction* token = ctx.Get(instr.operand(1)).hlo;
  Instruction* out = ctx.Clone(instr, instr.shape(), {data.hlo, token});
  // The outfeed_shape attribute names what is outfed: the local piece.
  for (auto& kv : out->mutable_attrs().extra)
    if (kv.first == "outfeed_shape") kv.second = data.hlo->shape().ToString();
  ctx.Set(instr, {out, instr.shape(), Sharding::Replicate()});
  return Status::Ok();
}

// Infeed: XLA infeeds each partition's shard (its unpadded shape, one
// conditional branch per distinct shape); here each partition infeeds its
// padded tile, the runtime's convention for partitioned infeeds.
Status HandleInfeed(SpmdContext& ctx, const Instruction& instr) {
  const Shape& shape = instr.shape();
  if (!instr.has_sharding() || !shape.IsTuple() || shape.tuple_size() != 2 ||
      instr.operand_count() != 1)
    return ctx.Fallback(instr);
  const Sharding& given = *instr.sharding();
  if (given.IsMaximal() || given.IsManual()) return ctx.Fallback(instr);
  const Shape& data_shape = shape.tuple_shapes(0);
  const int64_t leaves = CountLeaves(data_shape);
  if (given.IsTuple()) {
    if (static_cast<int64_t>(given.tuple_elements().size()) < leaves) return ctx.Fallback(instr);
    for (int64_t i = 0; i < leaves; ++i) {
      const Sharding& e = given.tuple_elements()[i];
      if (e.IsMaximal() || e.IsManual() || e.HasManualSubgroup() || e.IsTuple())
        return ctx.Fallback(instr);
    }
  }
  const Sharding data = ElementSharding(ctx.ShardingOf(instr), shape, 0);
  if (IsTriviallyReplicated(data) || HasUnreduced(data)) return ctx.Fallback(instr);
  SpmdBuilder::ScopedCause rule(ctx.b, instr, "infeed of each partition's piece");
  Instruction* token = ctx.Get(instr.operand(0)).hlo;
  const Shape local = Shape::Tuple({LocalShape(data_shape, data), shape.tuple_shapes(1)});
  Instruction* r = ctx.Clone(instr, local, {token});
  ctx.Set(instr, {r, shape, Sharding::Tuple({data, Sharding::Replicate()})});
  return Status::Ok();
}

}  // namespace meshsplit::spmd
