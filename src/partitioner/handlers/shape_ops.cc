// Shape ops: broadcast, transpose and reshape carry the result's tiling back
// to the operand. (Slice, concatenate, pad, reverse, the dynamic slices and
// sort live in data_movement.cc.)
#include <algorithm>

#include "partitioner/context.h"

namespace meshsplit::spmd {
namespace {

// Groups of consecutive input and output dims of a reshape whose sizes have
// equal products (size-1 dims join the group before them).
struct DimGroup {
  std::vector<int64_t> in, out;
};

std::optional<std::vector<DimGroup>> ReshapeGroups(const std::vector<int64_t>& a,
                                                   const std::vector<int64_t>& b) {
  std::vector<DimGroup> groups;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    DimGroup g;
    int64_t pa = 1, pb = 1;
    if (i < a.size()) { g.in.push_back(i); pa = a[i++]; }
    if (j < b.size()) { g.out.push_back(j); pb = b[j++]; }
    while (pa != pb) {
      if (pa < pb && i < a.size()) { g.in.push_back(i); pa *= a[i++]; }
      else if (pb < pa && j < b.size()) { g.out.push_back(j); pb *= b[j++]; }
      else return std::nullopt;
    }
    // Trailing size-1 dims belong to this group.
    while (i < a.size() && a[i] == 1 && (j >= b.size() || b[j] != 1)) g.in.push_back(i++);
    while (j < b.size() && b[j] == 1 && (i >= a.size() || a[i] != 1)) g.out.push_back(j++);
    groups.push_back(std::move(g));
  }
  return groups;
}

// The operand sharding under which reshape maps whole tiles of the operand
// onto whole tiles of a result sharded by `out`, or nullopt.
std::optional<Sharding> ReshapeOperandSharding(const std::vector<int64_t>& in_dims,
                                               const std::vector<int64_t>& out_dims,
                                               const Sharding& out) {
  if (!out.IsTiled()) return out;
  auto groups = ReshapeGroups(in_dims, out_dims);
  if (!groups) return std::nullopt;
  std::vector<int64_t> in_tiles(in_dims.size(), 1);
  for (const DimGroup& g : *groups) {
    std::vector<int64_t> tiled;
    for (int64_t o : g.out)
      if (out.TileDim(o) > 1) tiled.push_back(o);
    if (tiled.empty()) continue;
    if (tiled.size() > 1) return std::nullopt;
    auto first_big = [](const std::vector<int64_t>& dims, const std::vector<int64_t>& sizes) {
      for (int64_t d : dims)
        if (sizes[d] > 1) return d;
      return dims.empty() ? int64_t{-1} : dims[0];
    };
    int64_t o = tiled[0];
    int64_t in = first_big(g.in, in_dims);
    if (o != first_big(g.out, out_dims) || in < 0) return std::nullopt;
    const int64_t t = out.TileDim(o);
    int64_t big_in = 0, big_out = 0;
    for (int64_t d : g.in) big_in += in_dims[d] > 1;
    for (int64_t d : g.out) big_out += out_dims[d] > 1;
    // One real dim on each side: the same dim renamed, uneven tiles are fine.
    bool same_dim = big_in == 1 && big_out == 1;
    if (!same_dim && (out_dims[o] % t != 0 || in_dims[in] % t != 0)) return std::nullopt;
    in_tiles[in] = t;
  }
  std::vector<int64_t> dims = in_tiles;
  const TileAssignment& ta = out.tile_assignment();
  for (int64_t k = out.TiledDataRank(); k < ta.num_dimensions(); ++k)
    dims.push_back(ta.dim(k));
  return Sharding::Subgroup(ta.Reshape(dims), out.subgroup_types());
}

}  // namespace

Status HandleBroadcast(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  const std::vector<int64_t>& bdims = instr.attrs().dimensions;
  Sharding in = ProjectSharding(out, bdims);
  PartitionedValue operand = ctx.OperandAs(instr, 0, in);
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), out), {operand.hlo});
  ctx.Set(instr, {r, instr.shape(), out});
  return Status::Ok();
}

Status HandleTranspose(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  const std::vector<int64_t>& perm = instr.attrs().dimensions;
  std::vector<int64_t> inverse(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) inverse[perm[j]] = j;
  PartitionedValue operand = ctx.OperandAs(instr, 0, ProjectSharding(out, inverse));
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), out), {operand.hlo});
  ctx.Set(instr, {r, instr.shape(), out});
  return Status::Ok();
}

Status HandleReshape(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  const Shape& in_shape = instr.operand(0)->shape();
  std::optional<Sharding> in =
      ReshapeOperandSharding(in_shape.dimensions(), instr.shape().dimensions(), out);
  if (in) {
    PartitionedValue operand = ctx.OperandAs(instr, 0, *in);
    Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), out), {operand.hlo});
    ctx.Set(instr, {r, instr.shape(), out});
    return Status::Ok();
  }
  // The result's tiling does not survive the reshape; the operand's own
  // may (XLA tries both directions): reshape the local tiles, then reshard
  // the result, which usually moves much less than gathering the operand.
  const Sharding op_s = NormalizeForPartitioning(ctx.Get(instr.operand(0)).sharding);
  if (op_s.IsTiled() && !op_s.HasManualSubgroup() && !HasUnreduced(op_s)) {
    std::optional<Sharding> r =
        ReshapeOperandSharding(instr.shape().dimensions(), in_shape.dimensions(), op_s);
    // Only when reading it back gives the operand's tiling: then every
    // partition's tile reshapes into its tile of `r`.
    if (r && r->IsTiled() &&
        ReshapeOperandSharding(in_shape.dimensions(), instr.shape().dimensions(), *r) == op_s) {
      SpmdBuilder::ScopedCause rule(ctx.b, instr, "reshape on the operand's tiling, then reshard");
      PartitionedValue operand = ctx.OperandAs(instr, 0, op_s);
      Instruction* x = ctx.Clone(instr, LocalShape(instr.shape(), *r), {operand.hlo});
      ctx.Set(instr, Reshard(ctx.b, {x, instr.shape(), *r}, out));
      return Status::Ok();
    }
  }
  // Neither tiling survives the reshape: reshape whole, then slice.
  PartitionedValue operand = ctx.OperandAs(instr, 0, Sharding::Replicate());
  Instruction* r = ctx.Clone(instr, instr.shape(), {operand.hlo});
  ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), Sharding::Replicate()}, out));
  return Status::Ok();
}

// bitcast-convert between equal widths is elementwise. Between widths it
// adds (narrowing) or removes (widening) a trailing dim that indexes the
// pieces of one element; that dim must be whole, every other dim keeps its
// tiling (XLA's rule): widening keeps the operand's layout, narrowing
// computes in the result's.
Status HandleBitcastConvert(SpmdContext& ctx, const Instruction& instr) {
  const Shape& in_shape = instr.operand(0)->shape();
  const Shape& out_shape = instr.shape();
  if (!in_shape.IsArray() || !out_shape.IsArray())
    return ctx.Fallback(instr, "bitcast-convert of a non-array");
  if (in_shape.rank() == out_shape.rank()) return HandleElementwise(ctx, instr);
  const bool widening = in_shape.rank() == out_shape.rank() + 1;
  if (!widening && out_shape.rank() != in_shape.rank() + 1)
    return ctx.Fallback(instr, "ranks differ by more than one");
  const int64_t rank = std::min(in_shape.rank(), out_shape.rank());
  std::vector<int64_t> common(rank);
  for (int64_t d = 0; d < rank; ++d) common[d] = d;
  auto usable = [](const Sharding& s) { return !s.IsTuple() && !HasUnreduced(s); };
  Sharding in_mid, out_mid;
  if (widening) {
    const Sharding op = ctx.Get(instr.operand(0)).sharding;
    if (usable(op)) {
      in_mid = op.IsTiled() ? ReplicateDims(op, {rank}) : op;
    } else {
      std::vector<int64_t> with_piece_dim = common;
      with_piece_dim.push_back(-1);
      in_mid = ProjectSharding(ctx.ShardingOf(instr), with_piece_dim);
    }
    out_mid = ProjectSharding(in_mid, common);
  } else {
    Sharding out = ctx.ShardingOf(instr);
    if (!usable(out)) out = Sharding::Replicate();
    out_mid = out.IsTiled() ? ReplicateDims(out, {rank}) : out;
    in_mid = ProjectSharding(out_mid, common);
  }
  SpmdBuilder::ScopedCause rule(ctx.b, instr, "element-piece dim whole, other dims tiled");
  PartitionedValue operand = ctx.OperandAs(instr, 0, in_mid);
  Instruction* r = ctx.Clone(instr, LocalShape(out_shape, out_mid), {operand.hlo});
  ctx.Set(instr, Reshard(ctx.b, {r, out_shape, out_mid}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
