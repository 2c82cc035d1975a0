// Data-movement ops: slice, pad, concatenate, reverse, dynamic-slice,
// dynamic-update-slice and sort, plus the generic
// "pass-through" rule for ops that work tile by tile on every dim except the
// ones they reach across (those are made whole first). Ops that shift data
// along a tiled dim fetch only the neighbours' edges (halo.h), never the
// whole dim.
#include <algorithm>
#include <numeric>

#include "partitioner/context.h"
#include "partitioner/halo.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {
namespace {

int64_t Tiles(const Sharding& s, int64_t dim) {
  return s.IsTiled() && dim < s.TiledDataRank() ? s.TileDim(dim) : 1;
}

// Shardings these handlers do not reason about (tuples, manual subgroups,
// partial sums) take the generic paths.
bool Plain(const Sharding& s) {
  return !s.IsTuple() && !s.IsManual() && !s.HasManualSubgroup() && !HasUnreduced(s);
}

// `x` (this partition's piece of a value of `global` laid out by `s`)
// replaced along `dim` by the window `w` of the global value (halo.h), for
// a result with `out_n` elements along `dim`, tiled like `s`. Skips the
// exchange when every window is exactly the partition's own tile and no
// valid result position lies past the input (where `pad` would have to
// show).
Instruction* Window(SpmdBuilder& b, Instruction* x, const Shape& global, const Sharding& s,
                    int64_t dim, HaloWindow w, Instruction* pad, int64_t out_n) {
  const int64_t n = global.dimensions(dim), k = Tiles(s, dim);
  const int64_t tile = CeilDiv(n, k);
  // When only the first result tile holds data (a slice to a few elements),
  // the other partitions' windows are free: keep them on their own tiles so
  // they fetch nothing.
  if (k > 1 && CeilDiv(out_n, k) >= out_n) w.step = tile;
  if (w.first == 0 && w.step == tile && w.size == tile && out_n <= n) return x;
  return ExchangeHaloWindow(b, {x, global, s}, dim, w, pad);
}

// Static slice with strides (SpmdBuilder::Slice is unit-stride).
Instruction* StridedSlice(SpmdBuilder& b, Instruction* x, const std::vector<int64_t>& starts,
                          const std::vector<int64_t>& limits,
                          const std::vector<int64_t>& strides) {
  bool unit = true;
  for (int64_t s : strides) unit &= s == 1;
  if (unit) return b.Slice(x, starts, limits);
  std::vector<int64_t> dims(starts.size());
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = CeilDiv(limits[d] - starts[d], strides[d]);
  Instruction* s = b.Add(Opcode::kSlice, Shape(x->shape().element_type(), dims), {x});
  for (size_t d = 0; d < dims.size(); ++d)
    s->mutable_attrs().slice.push_back({starts[d], limits[d], strides[d]});
  return s;
}

Instruction* SliceDim(SpmdBuilder& b, Instruction* x, int64_t dim, int64_t start,
                      int64_t limit, int64_t stride = 1) {
  std::vector<int64_t> starts(x->shape().rank(), 0), limits = x->shape().dimensions();
  std::vector<int64_t> strides(x->shape().rank(), 1);
  starts[dim] = start;
  limits[dim] = limit;
  strides[dim] = stride;
  return StridedSlice(b, x, starts, limits, strides);
}

// A pad of `x` by `config` (one entry per dim) with the scalar `value`.
Instruction* PadLocal(SpmdBuilder& b, Instruction* x, const PaddingConfig& config,
                      Instruction* value) {
  bool none = true;
  std::vector<int64_t> dims = x->shape().dimensions();
  for (size_t d = 0; d < dims.size(); ++d) {
    const PaddingDimension& p = config[d];
    none &= p.low == 0 && p.high == 0 && p.interior == 0;
    dims[d] += p.low + p.high + p.interior * std::max<int64_t>(dims[d] - 1, 0);
  }
  if (none) return x;
  Instruction* r = b.Add(Opcode::kPad, Shape(x->shape().element_type(), dims), {x, value});
  r->mutable_attrs().padding = config;
  return r;
}

// Global position along `dim` of every element of `x`, a local piece whose
// element 0 sits at global `offset` (an s32 scalar).
Instruction* Positions(SpmdBuilder& b, Instruction* x, int64_t dim, Instruction* offset) {
  const std::vector<int64_t>& dims = x->shape().dimensions();
  return b.Binary(Opcode::kAdd, b.Iota(PrimitiveType::S32, dims, dim),
                  b.BroadcastScalar(offset, dims));
}

// lo <= pos < hi elementwise (lo, hi: s32 scalars).
Instruction* InRange(SpmdBuilder& b, Instruction* pos, Instruction* lo, Instruction* hi) {
  const std::vector<int64_t>& dims = pos->shape().dimensions();
  return b.Binary(Opcode::kAnd,
                  b.Compare(pos, b.BroadcastScalar(lo, dims), ComparisonDirection::kGe),
                  b.Compare(pos, b.BroadcastScalar(hi, dims), ComparisonDirection::kLt));
}

// A start index clamped to [0, limit] in its own type, as dynamic-slice and
// dynamic-update-slice clamp it, then converted to s32.
Instruction* ClampedStart(SpmdBuilder& b, Instruction* start, int64_t limit) {
  const PrimitiveType t = start->shape().element_type();
  Instruction* lo = b.ScalarConstant(t, 0);
  Instruction* hi = b.ScalarConstant(t, static_cast<double>(limit));
  Instruction* c = b.Binary(Opcode::kMinimum, b.Binary(Opcode::kMaximum, start, lo), hi);
  return b.Convert(c, PrimitiveType::S32);
}

// Records `v` as instr's value. The instruction computing it takes instr's
// name when it was made for instr (not an operand's own instruction):
// verify's divergence search matches values by name.
void SetNamed(SpmdContext& ctx, const Instruction& instr, PartitionedValue v) {
  bool fresh = v.hlo->opcode() != Opcode::kParameter;
  for (const Instruction* op : instr.operands()) fresh &= ctx.Get(op).hlo != v.hlo;
  if (fresh && ctx.shared().named.insert(&instr).second) v.hlo->set_name(instr.name());
  ctx.Set(instr, std::move(v));
}

// The generic slice: sliced dims made whole, the slice run locally, the
// result resharded (for shardings the windowed path does not handle).
Status SliceOnWholeDims(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  const Shape& in_shape = instr.operand(0)->shape();
  std::vector<int64_t> sliced;
  for (int64_t d = 0; d < in_shape.rank(); ++d) {
    const SliceDimension& s = instr.attrs().slice[d];
    if (s.start != 0 || s.limit != in_shape.dimensions(d) || s.stride != 1) sliced.push_back(d);
  }
  Sharding mid = PartiallyReplicateTiledShardingOnDims(out, sliced);
  PartitionedValue operand = ctx.OperandAs(instr, 0, mid);
  Shape local = LocalShape(instr.shape(), mid);
  Instruction* r = ctx.Clone(instr, local, {operand.hlo});
  for (int64_t d = 0; d < in_shape.rank(); ++d)
    if (std::find(sliced.begin(), sliced.end(), d) == sliced.end())
      r->mutable_attrs().slice[d] = {0, local.dimensions(d), 1};
  SetNamed(ctx, instr, Reshard(ctx.b, {r, instr.shape(), mid}, out));
  return Status::Ok();
}

}  // namespace

// Slice: the operand keeps the result's tiling. Along a tiled sliced dim,
// output tile i is the input window starting at start + i * tile * stride;
// when that is the partition's own tile (aligned) nothing moves, otherwise
// only the neighbours' edges do (halo exchange), never the whole dim.
Status HandleSlice(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  if (!Plain(out)) return SliceOnWholeDims(ctx, instr);
  const Shape& in_shape = instr.operand(0)->shape();
  Instruction* x = ctx.OperandAs(instr, 0, out).hlo;
  // Untiled dims: one local slice; tiled sliced dims: one window each.
  std::vector<int64_t> starts(in_shape.rank(), 0), limits = x->shape().dimensions();
  std::vector<int64_t> strides(in_shape.rank(), 1), tiled;
  for (int64_t d = 0; d < in_shape.rank(); ++d) {
    const SliceDimension& s = instr.attrs().slice[d];
    const bool whole = s.start == 0 && s.limit == in_shape.dimensions(d) && s.stride == 1;
    if (Tiles(out, d) > 1) {
      if (!whole) tiled.push_back(d);
    } else {
      starts[d] = s.start, limits[d] = s.limit, strides[d] = s.stride;
    }
  }
  x = StridedSlice(ctx.b, x, starts, limits, strides);
  Instruction* zero = ctx.b.Zero(in_shape.element_type());
  for (int64_t d : tiled) {
    const SliceDimension& s = instr.attrs().slice[d];
    const int64_t tile = CeilDiv(instr.shape().dimensions(d), out.TileDim(d));
    HaloWindow w{s.start, tile * s.stride, (tile - 1) * s.stride + 1};
    x = Window(ctx.b, x, in_shape, out, d, w, zero, instr.shape().dimensions(d));
    if (s.stride != 1) x = SliceDim(ctx.b, x, d, 0, w.size, s.stride);
  }
  SetNamed(ctx, instr, {x, instr.shape(), out});
  return Status::Ok();
}

// Pad: untiled dims are padded locally. Along a tiled dim, output tile i is
// the input window starting at i * tile - low (edge padding and shifts come
// from the halo exchange, positions outside the input read the pad value).
// Interior padding dilates the fetched window locally and cuts the tile out
// of it (at a per-partition offset when the tile is not a whole number of
// strides).
Status HandlePad(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  if (!Plain(out)) return HandlePassThrough(ctx, instr);
  const Shape& in_shape = instr.operand(0)->shape();
  const PaddingConfig& pc = instr.attrs().padding;
  const int64_t rank = in_shape.rank();
  Instruction* x = ctx.OperandAs(instr, 0, out).hlo;
  Instruction* value = ctx.OperandAs(instr, 1, Sharding::Replicate()).hlo;
  PaddingConfig local(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (Tiles(out, d) == 1) local[d] = pc[d];
  x = PadLocal(ctx.b, x, local, value);
  for (int64_t d = 0; d < rank; ++d) {
    const PaddingDimension& p = pc[d];
    if (Tiles(out, d) == 1 || (p.low == 0 && p.high == 0 && p.interior == 0)) continue;
    const int64_t tile = CeilDiv(instr.shape().dimensions(d), out.TileDim(d));
    const int64_t s = p.interior + 1;
    if (s == 1) {
      x = Window(ctx.b, x, in_shape, out, d, {-p.low, tile, tile}, value,
                 instr.shape().dimensions(d));
      continue;
    }
    // Input element j lands at output j * s + low. Fetch the inputs of this
    // tile (plus one either side), dilate them, cut the tile out. With
    // tile = q * s + r, tile i starts r * i elements further into its
    // window each step, so uneven strides fetch k more elements.
    const int64_t k = out.TileDim(d), q = tile / s, r = tile % s;
    const int64_t first = FloorDiv(-p.low, s);
    const int64_t size = CeilDiv(tile, s) + 2 + (r == 0 ? 0 : k);
    x = Window(ctx.b, x, in_shape, out, d, {first, q, size}, value, instr.shape().dimensions(d));
    PaddingConfig dilate(rank);
    dilate[d].interior = p.interior;
    x = PadLocal(ctx.b, x, dilate, value);
    const int64_t skip = -(first * s + p.low);
    if (r == 0) {
      x = SliceDim(ctx.b, x, d, skip, skip + tile);
      continue;
    }
    SpmdBuilder& b = ctx.b;
    Instruction* index = b.TileIndices(out.tile_assignment())[d];
    Instruction* offset =
        b.Binary(Opcode::kAdd, b.Binary(Opcode::kMultiply, index, b.ScalarS32(r)),
                 b.ScalarS32(skip));
    std::vector<Instruction*> starts(rank, b.ScalarS32(0));
    starts[d] = offset;
    std::vector<int64_t> sizes = x->shape().dimensions();
    sizes[d] = tile;
    x = b.DynamicSlice(x, starts, sizes);
  }
  SetNamed(ctx, instr, {x, instr.shape(), out});
  return Status::Ok();
}

// Concatenate along a tiled dim: every operand, tiled like the result, gives
// the window of the result's tile it covers (a halo exchange, or an
// all-gather of that operand when its windows span all tiles, so never more
// than one all-gather of the result); a select by position merges them.
Status HandleConcatenate(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  const int64_t dim = instr.attrs().dimensions.at(0);
  if (!Plain(out) || Tiles(out, dim) == 1) {
    Sharding mid = Plain(out) ? out : PartiallyReplicateTiledShardingOnDims(out, {dim});
    std::vector<Instruction*> operands;
    for (int i = 0; i < instr.operand_count(); ++i)
      operands.push_back(ctx.OperandAs(instr, i, mid).hlo);
    Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), mid), operands);
    SetNamed(ctx, instr, Reshard(ctx.b, {r, instr.shape(), mid}, out));
    return Status::Ok();
  }
  const int64_t tile = CeilDiv(instr.shape().dimensions(dim), out.TileDim(dim));
  Instruction* zero = ctx.b.Zero(instr.shape().element_type());
  Instruction* offset = TileOffset(ctx.b, out, instr.shape().dimensions(), dim);
  Instruction* result = nullptr;
  int64_t start = 0;
  for (int i = 0; i < instr.operand_count(); ++i) {
    const Shape& shape = instr.operand(i)->shape();
    const int64_t n = shape.dimensions(dim);
    if (n == 0) continue;
    Instruction* x = ctx.OperandAs(instr, i, out).hlo;
    Instruction* piece = Window(ctx.b, x, shape, out, dim, {-start, tile, tile}, zero,
                                instr.shape().dimensions(dim));
    if (result == nullptr) {
      result = piece;
    } else {
      // Later operands own every position from their start on.
      Instruction* pos = Positions(ctx.b, piece, dim, offset);
      const std::vector<int64_t>& dims = piece->shape().dimensions();
      Instruction* mine = ctx.b.Compare(pos, ctx.b.BroadcastScalar(ctx.b.ScalarS32(start), dims),
                                        ComparisonDirection::kGe);
      result = ctx.b.Select(mine, piece, result);
    }
    start += n;
  }
  if (result == nullptr) return HandlePassThrough(ctx, instr);
  SetNamed(ctx, instr, {result, instr.shape(), out});
  return Status::Ok();
}

// Reverse along tiled dims: the mirrored shard holds the data, so one
// collective-permute plus a local reverse. With uneven tiles the padding,
// which sits at the end of the last tile, lands at the front of the first
// one; a halo of that size from the next shard shifts it back out.
Status HandleReverse(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  if (!Plain(out)) return HandlePassThrough(ctx, instr);
  const std::vector<int64_t>& rev = instr.attrs().dimensions;
  std::vector<int64_t> tiled;
  for (int64_t d : rev)
    if (Tiles(out, d) > 1) tiled.push_back(d);
  // The operand laid out by the result's tiling mirrored along the tiled
  // reversed dims: the partition of result tile i holds input tile n-1-i.
  // Reshard gets there by one collective-permute, or nothing when the
  // operand is laid out that way already.
  Sharding mirrored = out;
  if (!tiled.empty()) {
    const TileAssignment& ta = out.tile_assignment();
    const std::vector<int64_t> devices = ta.Devices();
    const std::vector<int64_t>& dims = ta.dims();
    std::vector<int64_t> mirror_devices(devices.size());
    for (int64_t flat = 0; flat < static_cast<int64_t>(devices.size()); ++flat) {
      int64_t rest = flat, mirror = 0, stride = 1;
      for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
        int64_t i = rest % dims[d];
        rest /= dims[d];
        if (std::find(tiled.begin(), tiled.end(), d) != tiled.end()) i = dims[d] - 1 - i;
        mirror += i * stride;
        stride *= dims[d];
      }
      mirror_devices[flat] = devices[mirror];
    }
    mirrored = Sharding::Subgroup(TileAssignment::FromDevices(dims, mirror_devices),
                                  out.subgroup_types());
  }
  Instruction* x = ctx.OperandAs(instr, 0, mirrored).hlo;
  Instruction* r = ctx.b.Add(Opcode::kReverse, x->shape(), {x});
  r->mutable_attrs().dimensions = rev;
  x = r;
  Instruction* zero = ctx.b.Zero(instr.shape().element_type());
  for (int64_t d : tiled) {
    const int64_t k = out.TileDim(d), n = instr.shape().dimensions(d);
    const int64_t tile = CeilDiv(n, k), shift = k * tile - n;
    if (shift == 0) continue;
    Shape padded = instr.shape();
    padded.mutable_dimensions()[d] = k * tile;
    x = ExchangeHaloWindow(ctx.b, {x, padded, out}, d, {shift, tile, tile}, zero);
  }
  SetNamed(ctx, instr, {x, instr.shape(), out});
  return Status::Ok();
}

// Dynamic-slice of a dim the operand tiles: rather than gathering the
// operand, each partition slices what it holds of the window (a clamped
// local dynamic-slice of its zero-padded tile) and the pieces are summed
// (partial sums resolved by Reshard: all-reduce or reduce-scatter of the
// result). Used when the result is at most half the dim; else gather.
Status HandleDynamicSlice(SpmdContext& ctx, const Instruction& instr) {
  const PartitionedValue& operand = ctx.Get(instr.operand(0));
  const Sharding& in = operand.sharding;
  const Shape& in_shape = instr.operand(0)->shape();
  const std::vector<int64_t>& sizes = instr.attrs().dynamic_slice_sizes;
  const int64_t rank = in_shape.rank();
  std::vector<int64_t> masked;
  bool cheap = Plain(in) && Plain(ctx.ShardingOf(instr)) && in.IsTiled();
  for (int64_t d = 0; cheap && d < rank; ++d) {
    if (sizes[d] == in_shape.dimensions(d) || Tiles(in, d) == 1) continue;
    masked.push_back(d);
    cheap &= 2 * sizes[d] <= in_shape.dimensions(d);
  }
  if (!cheap || masked.empty()) return HandlePassThrough(ctx, instr);
  SpmdBuilder& b = ctx.b;
  PaddingConfig around(rank);
  std::vector<Instruction*> starts;
  std::vector<int64_t> local = operand.hlo->shape().dimensions();
  for (int64_t d = 0; d < rank; ++d) {
    Instruction* start = ctx.OperandAs(instr, 1 + d, Sharding::Replicate()).hlo;
    Instruction* s = ClampedStart(b, start, in_shape.dimensions(d) - sizes[d]);
    if (std::find(masked.begin(), masked.end(), d) != masked.end()) {
      // Offset of the window in the tile padded by `size` zeros each side;
      // dynamic-slice clamps windows that miss the tile onto the zeros.
      around[d].low = around[d].high = sizes[d];
      Instruction* tile_start = TileOffset(b, in, in_shape.dimensions(), d);
      s = b.Binary(Opcode::kAdd, b.Binary(Opcode::kSubtract, s, tile_start),
                   b.ScalarS32(sizes[d]));
      local[d] = sizes[d];
    } else if (sizes[d] != in_shape.dimensions(d)) {
      local[d] = sizes[d];
    }
    starts.push_back(s);
  }
  Instruction* x = PadLocal(b, operand.hlo, around, b.Zero(in_shape.element_type()));
  Instruction* piece = b.DynamicSlice(x, starts, local);
  std::vector<int64_t> keep(rank);
  std::iota(keep.begin(), keep.end(), 0);
  for (int64_t d : masked) keep[d] = -1;
  Sharding partial = ProjectSharding(in, keep, SubgroupType::kUnreduced);
  SetNamed(ctx, instr, Reshard(b, {piece, instr.shape(), partial}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

// Dynamic-update-slice along tiled dims: the update is made whole along
// them (it is the small side) and each partition writes the part that falls
// in its tile: a clamped dynamic-slice of the zero-padded update aligned to
// the tile, selected where the global position is inside the update. The
// operand never moves.
Status HandleDynamicUpdateSlice(SpmdContext& ctx, const Instruction& instr) {
  Sharding out = ctx.ShardingOf(instr);
  const Shape& in_shape = instr.operand(0)->shape();
  const Shape& upd_shape = instr.operand(1)->shape();
  const int64_t rank = in_shape.rank();
  std::vector<int64_t> masked;
  for (int64_t d = 0; d < rank; ++d)
    if (upd_shape.dimensions(d) != in_shape.dimensions(d) && Tiles(out, d) > 1)
      masked.push_back(d);
  if (!Plain(out) || masked.empty()) return HandlePassThrough(ctx, instr);
  SpmdBuilder& b = ctx.b;
  Instruction* x = ctx.OperandAs(instr, 0, out).hlo;
  Instruction* upd =
      ctx.OperandAs(instr, 1, PartiallyReplicateTiledShardingOnDims(out, masked)).hlo;
  PaddingConfig around(rank);
  std::vector<Instruction*> window_starts, write_starts;
  std::vector<int64_t> window = upd->shape().dimensions();
  Instruction* mask = nullptr;
  Instruction* zero = b.ScalarS32(0);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t u = upd_shape.dimensions(d), n = in_shape.dimensions(d);
    Instruction* start = ctx.OperandAs(instr, 2 + d, Sharding::Replicate()).hlo;
    Instruction* s = ClampedStart(b, start, n - u);
    if (std::find(masked.begin(), masked.end(), d) == masked.end()) {
      window_starts.push_back(zero);
      write_starts.push_back(u == n ? zero : s);
      continue;
    }
    const int64_t tile = x->shape().dimensions(d);
    Instruction* tile_start = TileOffset(b, out, in_shape.dimensions(), d);
    around[d].low = around[d].high = tile;
    // Update element tile_start + p - s sits at tile position p.
    window_starts.push_back(b.Binary(
        Opcode::kAdd, b.Binary(Opcode::kSubtract, tile_start, s), b.ScalarS32(tile)));
    write_starts.push_back(zero);
    window[d] = tile;
    Instruction* inside = InRange(b, Positions(b, x, d, tile_start), s,
                                  b.Binary(Opcode::kAdd, s, b.ScalarS32(u)));
    mask = mask == nullptr ? inside : b.Binary(Opcode::kAnd, mask, inside);
  }
  Instruction* padded = PadLocal(b, upd, around, b.Zero(upd_shape.element_type()));
  Instruction* aligned = b.DynamicSlice(padded, window_starts, window);
  std::vector<Instruction*> operands = {x, aligned};
  operands.insert(operands.end(), write_starts.begin(), write_starts.end());
  Instruction* written = b.Add(Opcode::kDynamicUpdateSlice, x->shape(), operands);
  SetNamed(ctx, instr, {b.Select(mask, written, x), instr.shape(), out});
  return Status::Ok();
}

namespace {

// XLA's TopK-shaped sort: a sort of (values, iota along the sort dim) whose
// only users take the first k elements along the sort dim of each result
// (get-tuple-element then slice [0:k], other dims whole), with the values
// tiled evenly along the sort dim. Each partition sorts its own tile (the
// iota carries the global positions), keeps its first k, the candidates
// are all-gathered along the sort dim and sorted again. Only the first k
// positions of the sort's value are meaningful afterwards (the rest are
// zeros), which is all its users read. Returns false when the pattern does
// not match.
bool TryTopKShapedSort(SpmdContext& ctx, const Instruction& instr) {
  if (instr.operand_count() != 2 || !instr.shape().IsTuple() || instr.users().empty() ||
      instr.IsRoot() || instr.attrs().dimensions.size() != 1)
    return false;
  const int64_t dim = instr.attrs().dimensions[0];
  const Instruction* iota = instr.operand(1);
  if (iota->opcode() != Opcode::kIota || iota->attrs().iota_dimension != dim) return false;
  const std::vector<int64_t> dims = instr.operand(0)->shape().dimensions();
  const int64_t n = dims[dim];
  int64_t k = -1;
  for (const Instruction* gte : instr.users()) {
    if (gte->opcode() != Opcode::kGetTupleElement || gte->users().empty() || gte->IsRoot())
      return false;
    for (const Instruction* s : gte->users()) {
      if (s->opcode() != Opcode::kSlice || s->attrs().slice.size() != dims.size()) return false;
      for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
        const SliceDimension& sd = s->attrs().slice[d];
        if (sd.start != 0 || sd.stride != 1) return false;
        if (d == dim) {
          if (k >= 0 && sd.limit != k) return false;
          k = sd.limit;
        } else if (sd.limit != dims[d]) {
          return false;
        }
      }
    }
  }
  if (k <= 0 || k >= n) return false;
  const Sharding s = NormalizeForPartitioning(ctx.Get(instr.operand(0)).sharding);
  if (!Plain(s) || Tiles(s, dim) <= 1 || n % Tiles(s, dim) != 0) return false;
  const int64_t p = Tiles(s, dim), tile = n / p, kk = std::min(k, tile);
  SpmdBuilder& b = ctx.b;
  SpmdBuilder::ScopedCause rule(b, instr, "TopK-shaped sort: per-partition top k, then merged");
  PartitionedValue values = ctx.OperandAs(instr, 0, s);
  PartitionedValue index = ctx.OperandAs(instr, 1, s);
  auto local_tuple = [&](const std::vector<int64_t>& d) {
    return Shape::Tuple({Shape(instr.shape().tuple_shapes(0).element_type(), d),
                         Shape(instr.shape().tuple_shapes(1).element_type(), d)});
  };
  auto element = [&](Instruction* t, int64_t i) {
    Instruction* g = b.Add(Opcode::kGetTupleElement, t->shape().tuple_shapes(i), {t});
    g->mutable_attrs().tuple_index = i;
    return g;
  };
  std::vector<int64_t> ldims = values.hlo->shape().dimensions();
  Instruction* local = ctx.Clone(instr, local_tuple(ldims), {values.hlo, index.hlo});
  // Each partition's first kk, gathered along the sort dim.
  const Sharding gathered = PartiallyReplicateTiledShardingOnDims(s, {dim});
  std::vector<int64_t> cand_global = dims;
  cand_global[dim] = kk * p;
  std::vector<int64_t> start(dims.size(), 0), limit = ldims;
  limit[dim] = kk;
  std::vector<Instruction*> cands;
  for (int64_t i = 0; i < 2; ++i) {
    Instruction* top = b.Slice(element(local, i), start, limit);
    Shape g(top->shape().element_type(), cand_global);
    cands.push_back(Reshard(b, {top, g, s}, gathered).hlo);
  }
  std::vector<int64_t> cdims = cands[0]->shape().dimensions();
  Instruction* merged = ctx.Clone(instr, local_tuple(cdims), cands);
  // The first k of the merged candidates, at full length along the sort
  // dim (positions past k are never read).
  std::vector<int64_t> klimit = cdims, high(cdims.size(), 0);
  klimit[dim] = k;
  high[dim] = n - k;
  std::vector<Instruction*> elems;
  std::vector<Shape> shapes;
  for (int64_t i = 0; i < 2; ++i) {
    Instruction* e = b.PadHigh(b.Slice(element(merged, i), start, klimit), high);
    elems.push_back(e);
    shapes.push_back(e->shape());
  }
  Instruction* t = b.Add(Opcode::kTuple, Shape::Tuple(shapes), elems);
  SetNamed(ctx, instr, {t, instr.shape(), Sharding::Tuple({gathered, gathered})});
  return true;
}

}  // namespace

// Sort along a tiled dim: as XLA, move that tiling to a free dim that it
// divides (all-to-all), sort locally, move it back; with no such dim the
// sort dim is made whole.
Status HandleSort(SpmdContext& ctx, const Instruction& instr) {
  if (TryTopKShapedSort(ctx, instr)) return Status::Ok();
  Sharding out = ctx.ShardingOf(instr);
  const Sharding out0 = out.IsTuple() ? out.tuple_elements().at(0) : out;
  if (!Plain(out0)) return HandlePassThrough(ctx, instr);
  const int64_t dim = instr.attrs().dimensions.at(0);
  const std::vector<int64_t>& dims = instr.operand(0)->shape().dimensions();
  Sharding mid = out0;
  if (Tiles(out0, dim) > 1) {
    const int64_t k = out0.TileDim(dim);
    int64_t free = -1;
    for (int64_t e = 0; e < static_cast<int64_t>(dims.size()); ++e)
      if (e != dim && Tiles(out0, e) == 1 && dims[e] % k == 0 &&
          (free < 0 || dims[e] > dims[free]))
        free = e;
    // Else a tiled dim that can take k times more tiles (XLA merges into
    // it too).
    int64_t merge = -1;
    for (int64_t e = 0; free < 0 && e < static_cast<int64_t>(dims.size()); ++e)
      if (e != dim && Tiles(out0, e) > 1 && dims[e] % (Tiles(out0, e) * k) == 0 &&
          (merge < 0 || dims[e] > dims[merge]))
        merge = e;
    const TileAssignment& ta = out0.tile_assignment();
    if (free >= 0) {
      std::vector<int64_t> perm(ta.num_dimensions());
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(perm[dim], perm[free]);
      mid = Sharding::Subgroup(ta.Transpose(perm), out0.subgroup_types());
    } else if (merge >= 0) {
      // The sort dim's tiles become the minor part of `merge`'s tiles.
      std::vector<int64_t> perm, merged = ta.dims();
      for (int64_t i = 0; i < ta.num_dimensions(); ++i) {
        if (i == dim) continue;
        perm.push_back(i);
        if (i == merge) perm.push_back(dim);
      }
      merged[merge] *= k;
      merged[dim] = 1;
      mid = Sharding::Subgroup(ta.Transpose(perm).Reshape(merged), out0.subgroup_types());
    } else {
      mid = PartiallyReplicateTiledShardingOnDims(out0, {dim});
    }
  }
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i)
    operands.push_back(ctx.OperandAs(instr, i, mid).hlo);
  Sharding mid_all = instr.shape().IsTuple()
      ? Sharding::Tuple(std::vector<Sharding>(instr.shape().tuple_size(), mid))
      : mid;
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), mid_all), operands);
  SetNamed(ctx, instr, Reshard(ctx.b, {r, instr.shape(), mid_all}, out));
  return Status::Ok();
}

// The generic rule: the dims the op reaches across are made whole, every
// other dim keeps the result's tiling.
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
    case Opcode::kMap:
      break;
    default:
      return ctx.Fallback(instr);
  }
  Sharding mid = PartiallyReplicateTiledShardingOnDims(out0, full);
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
  SetNamed(ctx, instr, Reshard(ctx.b, {r, instr.shape(), mid_all}, out));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
