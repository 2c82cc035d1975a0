// Shape ops: broadcast, transpose and reshape carry the result's tiling back
// to the operand. (Slice, concatenate, pad, reverse, the dynamic slices and
// sort live in data_movement.cc.)
#include <algorithm>

#include "partitioner/context.h"
#include "partitioner/halo.h"

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
    std::vector<int64_t> real_in, real_out;
    for (int64_t d : g.in)
      if (in_dims[d] > 1) real_in.push_back(d);
    for (int64_t d : g.out)
      if (out_dims[d] > 1) real_out.push_back(d);
    if (real_in.empty()) return std::nullopt;
    // A size-1 dim split into several tiles (all but one empty) has no
    // operand dim to carry its tile count (it would be lost, and the tile
    // assignment would no longer cover the devices).
    for (int64_t o : tiled)
      if (out_dims[o] == 1) return std::nullopt;
    // One real dim on each side: the same dim renamed, uneven tiles are fine.
    if (real_in.size() == 1 && real_out.size() == 1) {
      in_tiles[real_in[0]] = out.TileDim(real_out[0]);
      continue;
    }
    // Several tiled dims (XLA's ReshapeSharding): the group's tiles are
    // contiguous runs of its row-major elements only when every real dim
    // before the last tiled one is tiled into single elements. That run
    // count T then tiles the operand's dims major to minor: whole dims
    // while T covers them, then one dim that T divides.
    int64_t total = 1;
    for (size_t j = 0; j < real_out.size(); ++j) {
      const int64_t o = real_out[j], t = out.TileDim(o);
      const bool later_tiled =
          std::any_of(real_out.begin() + j + 1, real_out.end(),
                      [&](int64_t x) { return out.TileDim(x) > 1; });
      if (later_tiled && t != out_dims[o]) return std::nullopt;
      if (t > 1 && out_dims[o] % t != 0) return std::nullopt;
      total *= t;
    }
    for (int64_t d : real_in) {
      if (total == 1) break;
      if (total % in_dims[d] == 0) {
        in_tiles[d] = in_dims[d];
        total /= in_dims[d];
      } else if (in_dims[d] % total == 0) {
        in_tiles[d] = total;
        total = 1;
      } else {
        return std::nullopt;
      }
    }
    if (total != 1) return std::nullopt;
  }
  std::vector<int64_t> dims = in_tiles;
  const TileAssignment& ta = out.tile_assignment();
  for (int64_t k = out.TiledDataRank(); k < ta.num_dimensions(); ++k)
    dims.push_back(ta.dim(k));
  return Sharding::Subgroup(ta.Reshape(dims), out.subgroup_types());
}

// XLA's halo reshape: the result tiles one dim `o` k ways, the major real
// dim of its reshape group, and the operand dim `i` leading the same group
// splits into `o` and finer dims (A = B * f) or merges with finer dims into
// `o` (B = A * f), with tiles that do not line up (uneven). The operand is
// tiled k ways along `i` with the result's device order; a halo window
// along `i` (split: each result tile's f-times-longer run of rows) or along
// `o` after a local reshape (merge: the local tiles reshaped into a
// longer-tiled temporary) moves only the misaligned edges. nullptr when the
// shapes or shardings are not of that form.
Instruction* HaloReshape(SpmdContext& ctx, const Instruction& instr, const Sharding& out) {
  const Shape& in_shape = instr.operand(0)->shape();
  const Shape& out_shape = instr.shape();
  if (!out.IsTiled() || out.HasManualSubgroup() || HasUnreduced(out)) return nullptr;
  const std::vector<int64_t>& in_dims = in_shape.dimensions();
  const std::vector<int64_t>& out_dims = out_shape.dimensions();
  int64_t o = -1;
  for (int64_t d = 0; d < out.TiledDataRank(); ++d) {
    if (out.TileDim(d) == 1) continue;
    if (o >= 0) return nullptr;  // one tiled dim only
    o = d;
  }
  if (o < 0) return nullptr;
  auto groups = ReshapeGroups(in_dims, out_dims);
  if (!groups) return nullptr;
  const DimGroup* g = nullptr;
  for (const DimGroup& grp : *groups)
    if (std::find(grp.out.begin(), grp.out.end(), o) != grp.out.end()) g = &grp;
  if (g == nullptr) return nullptr;
  // `o` and `i` lead their group (size-1 dims before them aside).
  int64_t i = -1;
  for (int64_t d : g->in)
    if (in_dims[d] > 1) { i = d; break; }
  for (int64_t d : g->out) {
    if (d == o) break;
    if (out_dims[d] > 1) return nullptr;
  }
  if (i < 0) return nullptr;
  const int64_t k = out.TileDim(o), a = in_dims[i], bsz = out_dims[o];
  const bool split = a % bsz == 0, merge = bsz % a == 0;
  if (!split && !merge) return nullptr;
  // The operand, tiled k ways along `i` with the result's devices.
  std::vector<int64_t> in_tiles(in_dims.size(), 1);
  in_tiles[i] = k;
  const TileAssignment& ta = out.tile_assignment();
  for (int64_t t = out.TiledDataRank(); t < ta.num_dimensions(); ++t) in_tiles.push_back(ta.dim(t));
  const Sharding in_s = Sharding::Subgroup(ta.Reshape(in_tiles), out.subgroup_types());
  SpmdBuilder& b = ctx.b;
  SpmdBuilder::ScopedCause rule(b, instr, "reshape of an uneven tiled dim by halo exchange");
  PartitionedValue x = ctx.OperandAs(instr, 0, in_s);
  Instruction* zero = b.Zero(in_shape.element_type());
  const int64_t tile_out = (bsz + k - 1) / k;
  const Shape local_out = LocalShape(out_shape, out);
  if (split) {
    const int64_t f = a / bsz;
    Instruction* w = ExchangeHaloWindow(b, x, i, {0, tile_out * f, tile_out * f}, zero);
    return ctx.Clone(instr, local_out, {w});
  }
  // Merge: reshape the local tiles (sA rows of `i` -> sA * f of `o`), then
  // window the temporary, whose tiles are sA * f long, to the result's.
  const int64_t f = bsz / a, tile_in = x.hlo->shape().dimensions(i);
  std::vector<int64_t> tmp_local = local_out.dimensions();
  tmp_local[o] = tile_in * f;
  Instruction* tmp = b.Reshape(x.hlo, tmp_local);
  std::vector<int64_t> tmp_global = out_dims;
  tmp_global[o] = k * tile_in * f;
  PartitionedValue t{tmp, Shape(out_shape.element_type(), tmp_global), out};
  Instruction* w = ExchangeHaloWindow(b, t, o, {0, tile_out, tile_out}, zero);
  if (ctx.shared().named.insert(&instr).second) w->set_name(instr.name());
  return w;
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
  // One uneven tiled dim split or merged: halo exchange.
  if (Instruction* h = HaloReshape(ctx, instr, out)) {
    ctx.Set(instr, {h, instr.shape(), out});
    return Status::Ok();
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
      in_mid = op.IsTiled() ? PartiallyReplicateTiledShardingOnDims(op, {rank}) : op;
    } else {
      std::vector<int64_t> with_piece_dim = common;
      with_piece_dim.push_back(-1);
      in_mid = ProjectSharding(ctx.ShardingOf(instr), with_piece_dim);
    }
    out_mid = ProjectSharding(in_mid, common);
  } else {
    Sharding out = ctx.ShardingOf(instr);
    if (!usable(out)) out = Sharding::Replicate();
    out_mid = out.IsTiled() ? PartiallyReplicateTiledShardingOnDims(out, {rank}) : out;
    in_mid = ProjectSharding(out_mid, common);
  }
  SpmdBuilder::ScopedCause rule(ctx.b, instr, "element-piece dim whole, other dims tiled");
  PartitionedValue operand = ctx.OperandAs(instr, 0, in_mid);
  Instruction* r = ctx.Clone(instr, LocalShape(out_shape, out_mid), {operand.hlo});
  ctx.Set(instr, Reshard(ctx.b, {r, out_shape, out_mid}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
