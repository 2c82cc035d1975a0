// gather and scatter. Gather: output batch dims tiled like the indices,
// offset dims whose slice spans the whole operand dim tiled like the operand
// (pass-through), explicit batching dims tiled alike on operand, indices and
// output; each partition gathers locally with no communication. Otherwise,
// when the operand is tiled along an indexed dim with unit slices, each
// partition gathers from its own tile with shifted indices, zeroes what its
// tile does not hold, and an all-reduce sums the pieces. Scatter: updates and
// operand tiled along pass-through window dims (and batching dims) scatter
// locally; updates tiled along scatter dims need an `add` combiner: they are
// scattered into zeros, summed across partitions, and added to the operand;
// with a `min` / `max` combiner each partition scatters into its copy of the
// operand and an all-reduce of the same op combines the copies.
// Operands tiled along indexed dims with unit windows scatter into their own
// tile with shifted indices. A variadic scatter scatters all its operands
// the same way (pass-through and batching dims only). Everything else runs
// replicated (Fallback).
#include <limits>
#include <optional>

#include "partitioner/context.h"
#include "partitioner/handlers/dot_plan.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {
namespace {

bool Plain(const Sharding& s) {
  return s.IsTiled() && !s.HasManualSubgroup() && !HasUnreduced(s);
}

// The data dims of `s` (rank `rank`) tiled more than once.
std::vector<int64_t> TiledDims(const Sharding& s, int64_t rank) {
  std::vector<int64_t> out;
  std::vector<int64_t> t = TileDims(s, rank);
  for (int64_t d = 0; d < rank; ++d)
    if (t[d] > 1) out.push_back(d);
  return out;
}

// Keeps only the tiling of `keep` dims of `s` (rank `rank`).
Sharding KeepDims(const Sharding& s, int64_t rank, const std::vector<int64_t>& keep) {
  std::vector<int64_t> drop;
  for (int64_t d : TiledDims(s, rank))
    if (!Contains(keep, d)) drop.push_back(d);
  return PartiallyReplicateTiledShardingOnDims(s, drop);
}

// True when `c` computes the sum of its two parameters.
bool IsAddCombiner(const Computation* c) {
  if (c == nullptr || c->root() == nullptr) return false;
  const Instruction* r = c->root();
  return r->opcode() == Opcode::kAdd && r->operand_count() == 2 &&
         r->operand(0)->opcode() == Opcode::kParameter &&
         r->operand(1)->opcode() == Opcode::kParameter &&
         r->operand(0) != r->operand(1);
}

// The combiner's opcode when it is min or max of its two parameters on a
// float or <= 32-bit integer type: combining a value twice changes nothing,
// so partitions may scatter into copies of the operand and combine the
// copies with an all-reduce of the same op. nullopt otherwise.
std::optional<Opcode> IdempotentCombiner(const Computation* c, PrimitiveType ty) {
  if (c == nullptr || c->root() == nullptr) return std::nullopt;
  const Instruction* r = c->root();
  if (r->opcode() != Opcode::kMinimum && r->opcode() != Opcode::kMaximum) return std::nullopt;
  if (r->operand_count() != 2 || r->operand(0)->opcode() != Opcode::kParameter ||
      r->operand(1)->opcode() != Opcode::kParameter || r->operand(0) == r->operand(1))
    return std::nullopt;
  switch (ty) {
    case PrimitiveType::F16: case PrimitiveType::BF16: case PrimitiveType::F32:
    case PrimitiveType::F64: case PrimitiveType::S8: case PrimitiveType::S16:
    case PrimitiveType::S32: case PrimitiveType::U8: case PrimitiveType::U32:
      return r->opcode();
    default: return std::nullopt;
  }
}

// The value `op` ignores: +inf / the largest value for min, -inf / the
// lowest for max.
double CombinerIdentity(Opcode op, PrimitiveType ty) {
  const bool is_float = ty == PrimitiveType::F16 || ty == PrimitiveType::BF16 ||
                        ty == PrimitiveType::F32 || ty == PrimitiveType::F64;
  const bool is_min = op == Opcode::kMinimum;
  if (is_float) return is_min ? std::numeric_limits<double>::infinity()
                              : -std::numeric_limits<double>::infinity();
  double lo = 0, hi = 0;
  switch (ty) {
    case PrimitiveType::S8: lo = -128; hi = 127; break;
    case PrimitiveType::S16: lo = -32768; hi = 32767; break;
    case PrimitiveType::S32: lo = -2147483648.0; hi = 2147483647.0; break;
    case PrimitiveType::U8: lo = 0; hi = 255; break;
    default: lo = 0; hi = 4294967295.0; break;  // U32
  }
  return is_min ? hi : lo;
}

// Indices as s32 with an explicit index vector dim (appended when the
// indices have none).
Instruction* IndicesWithVectorDim(SpmdBuilder& b, Instruction* idx, int64_t ivd) {
  std::vector<int64_t> idims = idx->shape().dimensions();
  if (ivd == static_cast<int64_t>(idims.size())) {
    idims.push_back(1);
    idx = b.Reshape(idx, idims);
  }
  if (idx->shape().element_type() != PrimitiveType::S32) idx = b.Convert(idx, PrimitiveType::S32);
  return idx;
}

// Indices as s32 with an explicit vector dim, split into their components
// along it (component k indexes operand dim `component_dims[k]`);
// `rewrite(component, d, comp_dims)` returns each component's new value and
// the results are concatenated back along the vector dim.
template <typename Rewrite>
Instruction* RewriteIndexComponents(SpmdBuilder& b, Instruction* idx, int64_t ivd,
                                    const std::vector<int64_t>& component_dims,
                                    Rewrite rewrite) {
  idx = IndicesWithVectorDim(b, idx, ivd);
  const std::vector<int64_t> idims = idx->shape().dimensions();
  std::vector<int64_t> comp_dims = idims;
  comp_dims[ivd] = 1;
  std::vector<Instruction*> parts;
  for (size_t k = 0; k < component_dims.size(); ++k) {
    std::vector<int64_t> start(idims.size(), 0), limit = idims;
    start[ivd] = k;
    limit[ivd] = k + 1;
    parts.push_back(rewrite(b.Slice(idx, start, limit), component_dims[k], comp_dims));
  }
  if (parts.size() == 1) return parts[0];
  Shape s = idx->shape();
  s.mutable_dimensions()[ivd] = static_cast<int64_t>(parts.size());
  Instruction* joined = b.Add(Opcode::kConcatenate, s, parts);
  joined->mutable_attrs().dimensions = {ivd};
  return joined;
}

// Scatter indices shifted into each partition's tile of the operand
// (sharded `op_s`) along the `sliced` operand dims; the other components are
// left as they are.
Instruction* ShiftScatterIndices(SpmdBuilder& b, Instruction* idx,
                                 const ScatterDimensionNumbers& dn,
                                 const std::vector<int64_t>& sliced, const Sharding& op_s,
                                 const Shape& op_shape) {
  return RewriteIndexComponents(
      b, idx, dn.index_vector_dim, dn.scatter_dims_to_operand_dims,
      [&](Instruction* comp, int64_t d, const std::vector<int64_t>& comp_dims) {
        if (!Contains(sliced, d)) return comp;
        Instruction* off = TileOffset(b, op_s, op_shape.dimensions(), d);
        return b.Binary(Opcode::kSubtract, comp, b.BroadcastScalar(off, comp_dims));
      });
}

// Gather indices along the `sliced` operand dims (indexed with unit slices)
// clamped as the global gather clamps them, then shifted into each
// partition's tile of the operand (sharded `op_s`, local dims
// `local_op_dims`). `*valid` becomes true where the row lies inside this
// partition's tile (null when nothing is sliced).
Instruction* ShiftGatherIndices(SpmdBuilder& b, Instruction* idx,
                                const GatherDimensionNumbers& dn,
                                const std::vector<int64_t>& sliced, const Sharding& op_s,
                                const Shape& op_shape,
                                const std::vector<int64_t>& local_op_dims,
                                Instruction** valid) {
  *valid = nullptr;
  return RewriteIndexComponents(
      b, idx, dn.index_vector_dim, dn.start_index_map,
      [&](Instruction* c, int64_t d, const std::vector<int64_t>& comp_dims) {
        if (!Contains(sliced, d)) return c;
        Instruction* lo = b.BroadcastScalar(b.ScalarS32(0), comp_dims);
        Instruction* hi = b.BroadcastScalar(b.ScalarS32(op_shape.dimensions(d) - 1), comp_dims);
        c = b.Binary(Opcode::kMinimum, b.Binary(Opcode::kMaximum, c, lo), hi);
        Instruction* off = TileOffset(b, op_s, op_shape.dimensions(), d);
        c = b.Binary(Opcode::kSubtract, c, b.BroadcastScalar(off, comp_dims));
        Instruction* in_lo = b.Compare(c, lo, ComparisonDirection::kGe);
        Instruction* in_hi =
            b.Compare(c, b.BroadcastScalar(b.ScalarS32(local_op_dims[d]), comp_dims),
                      ComparisonDirection::kLt);
        Instruction* v = b.Binary(Opcode::kAnd, in_lo, in_hi);
        *valid = *valid == nullptr ? v : b.Binary(Opcode::kAnd, *valid, v);
        return c;
      });
}

// Gather with the operand tiled along indexed dims whose slices are one
// element wide: partition-local gathers with shifted indices, out-of-tile
// rows zeroed, summed by an all-reduce. Returns false when it does not apply.
bool TrySlicedOperandGather(SpmdContext& ctx, const Instruction& instr) {
  const GatherDimensionNumbers& dn = *instr.attrs().gather_dnums;
  const Shape& op_shape = instr.operand(0)->shape();
  const std::vector<int64_t>& slice = instr.attrs().gather_slice_sizes;
  PartitionedValue operand = ctx.Get(instr.operand(0));
  Sharding os = NormalizeForPartitioning(operand.sharding);
  if (!Plain(os) || !op_shape.IsArray() || op_shape.rank() == 0) return false;
  PrimitiveType ty = op_shape.element_type();
  if (ty == PrimitiveType::PRED) return false;
  std::vector<int64_t> sliced;  // operand dims tiled and indexed with unit slices
  for (int64_t d : TiledDims(os, op_shape.rank())) {
    if (Contains(dn.start_index_map, d) && slice[d] == 1) sliced.push_back(d);
  }
  if (sliced.empty()) return false;
  os = KeepDims(os, op_shape.rank(), sliced);
  operand = Reshard(ctx.b, operand, os);
  PartitionedValue indices = ctx.OperandAs(instr, 1, Sharding::Replicate());
  SpmdBuilder& b = ctx.b;
  // Per component: clamp like the global gather would, then shift by the
  // tile offset; remember whether the row lies inside this tile.
  Instruction* valid = nullptr;
  Instruction* shifted = ShiftGatherIndices(b, indices.hlo, dn, sliced, os, op_shape,
                                            operand.hlo->shape().dimensions(), &valid);
  const std::vector<int64_t> idims = shifted->shape().dimensions();
  const int64_t ivd = dn.index_vector_dim;
  // Padding rows of the operand tile are never read: in-tile positions are
  // below the tile's real extent only when the row exists globally (the
  // clamp keeps them in range), so no operand masking is needed.
  Instruction* g = ctx.Clone(instr, instr.shape(), {operand.hlo, shifted});
  // valid has the indices' batch dims (with a unit index-vector dim); move
  // it onto the output's batch dims.
  std::vector<int64_t> batch_dims;  // indices dims without the vector dim
  for (int64_t d = 0; d < static_cast<int64_t>(idims.size()); ++d)
    if (d != ivd) batch_dims.push_back(idims[d]);
  Instruction* vb = b.Reshape(valid, batch_dims);
  std::vector<int64_t> out_batch;
  for (int64_t d = 0; d < instr.shape().rank(); ++d)
    if (!Contains(dn.offset_dims, d)) out_batch.push_back(d);
  Instruction* mask = b.Broadcast(vb, instr.shape().dimensions(), out_batch);
  g = b.Select(mask, g, b.BroadcastScalar(b.Zero(ty), instr.shape().dimensions()));
  g = b.AllReduce(g, os.GroupsAlongDims(sliced), b.Reducer(Opcode::kAdd, ty));
  ctx.Set(instr, Reshard(b, {g, instr.shape(), Sharding::Replicate()}, ctx.ShardingOf(instr)));
  return true;
}

// Scatter into an operand tiled along indexed dims whose update windows are
// one element wide: each partition scatters into its own tile with indices
// shifted by the tile offset; updates that land outside the tile are out of
// bounds there and skipped by scatter itself, so any combiner works.
bool TrySlicedOperandScatter(SpmdContext& ctx, const Instruction& instr,
                             const std::vector<int64_t>& upd_to_op) {
  const ScatterDimensionNumbers& dn = *instr.attrs().scatter_dnums;
  const Shape& op_shape = instr.operand(0)->shape();
  const Shape& upd_shape = instr.operand(2)->shape();
  Sharding os = NormalizeForPartitioning(ctx.Get(instr.operand(0)).sharding);
  Sharding out = ctx.ShardingOf(instr);
  if (!Plain(os) && Plain(out)) os = out;
  if (!Plain(os)) return false;
  std::vector<int64_t> sliced;
  for (int64_t d : TiledDims(os, op_shape.rank())) {
    if (!Contains(dn.scatter_dims_to_operand_dims, d) || Contains(dn.input_batching_dims, d))
      continue;
    bool unit = Contains(dn.inserted_window_dims, d);
    for (size_t u = 0; u < upd_to_op.size(); ++u)
      if (upd_to_op[u] == d && upd_shape.dimensions(u) == 1) unit = true;
    if (unit) sliced.push_back(d);
  }
  if (sliced.empty()) return false;
  os = KeepDims(os, op_shape.rank(), sliced);
  SpmdBuilder& b = ctx.b;
  PartitionedValue operand = ctx.OperandAs(instr, 0, os);
  Instruction* idx = ctx.OperandAs(instr, 1, Sharding::Replicate()).hlo;
  Instruction* upd = ctx.OperandAs(instr, 2, Sharding::Replicate()).hlo;
  Instruction* shifted = ShiftScatterIndices(b, idx, dn, sliced, os, op_shape);
  // A global index past the end lands in the last tile's padding at most,
  // which holds arbitrary values anyway.
  Instruction* r = ctx.Clone(instr, operand.hlo->shape(), {operand.hlo, shifted, upd});
  ctx.Set(instr, Reshard(b, {r, instr.shape(), os}, out));
  return true;
}


bool UsableForPlan(const Sharding& s) { return s.IsReplicated() || Plain(s); }

std::vector<int64_t> InvertMap(const std::vector<int64_t>& to_iter, int64_t n_iter) {
  std::vector<int64_t> inv(n_iter, -1);
  for (size_t d = 0; d < to_iter.size(); ++d)
    if (to_iter[d] >= 0) inv[to_iter[d]] = d;
  return inv;
}

// The iteration-space sharding of a gather / scatter seen as a contraction
// of two inputs (`a`, `b`) into `out`: first the mesh-axis plan of the dot
// handler (XLA's recursive grouping: each mesh axis takes one role, so
// operand pass-through, index-parallel and trivially sliced dims combine),
// else the cheapest of the three values' own layouts. nullopt when no
// candidate tiles anything.
std::optional<Sharding> PlanIteration(const ContractionSpace& space, const Shape& a_shape,
                                      const Shape& b_shape, const Shape& out_shape,
                                      const Sharding& a, const Sharding& b, const Sharding& out,
                                      int64_t num_partitions) {
  if (!UsableForPlan(a) || !UsableForPlan(b) || !UsableForPlan(out)) return std::nullopt;
  std::optional<Sharding> it =
      PlanByMeshAxes(space, a_shape, b_shape, out_shape, a, b, out, num_partitions);
  if (!it) {
    const Sharding cands[3] = {ProjectSharding(out, InvertMap(space.out_to_iter, space.n_iter)),
                               ProjectSharding(a, InvertMap(space.lhs_to_iter, space.n_iter)),
                               ProjectSharding(b, InvertMap(space.rhs_to_iter, space.n_iter))};
    double best = 0;
    for (const Sharding& c : cands) {
      if (!UsableForPlan(c)) continue;
      double cost =
          EstimateReshard(a_shape, a, ProjectSharding(c, space.lhs_to_iter), num_partitions) +
          EstimateReshard(b_shape, b, ProjectSharding(c, space.rhs_to_iter), num_partitions) +
          EstimateReshard(out_shape,
                          ProjectSharding(c, space.out_to_iter, SubgroupType::kUnreduced), out,
                          num_partitions);
      if (!it || cost < best) {
        it = c;
        best = cost;
      }
    }
  }
  if (!it || !it->IsTiled() || TiledDims(*it, space.n_iter).empty()) return std::nullopt;
  return it;
}


// Gather planned in its iteration space: the output dims that can stay
// tiled (batch dims, offset dims whose slice spans the operand dim) plus
// one summed dim per operand dim indexed with unit slices (trivial
// slicing). A sharding of that space fixes the operand's layout
// (pass-through, batching and sliced dims), the indices' (batch dims) and
// the local result's (sliced dims become partial sums: rows outside a
// partition's tile are zeroed and Reshard sums them). Returns false when
// the plan tiles nothing, so the caller's simpler paths run.
bool TryPlannedGather(SpmdContext& ctx, const Instruction& instr,
                      const std::vector<int64_t>& out_to_op,
                      const std::vector<int64_t>& out_to_idx) {
  const GatherDimensionNumbers& dn = *instr.attrs().gather_dnums;
  const Shape& op_shape = instr.operand(0)->shape();
  const Shape& idx_shape = instr.operand(1)->shape();
  const std::vector<int64_t>& slice = instr.attrs().gather_slice_sizes;
  const int64_t out_rank = instr.shape().rank(), op_rank = op_shape.rank();
  const PrimitiveType ty = op_shape.element_type();
  std::vector<int64_t> out_to_iter(out_rank, -1), op_to_iter(op_rank, -1),
      idx_to_iter(idx_shape.rank(), -1);
  for (int64_t o = 0; o < out_rank; ++o) {
    if (out_to_idx[o] >= 0) {
      out_to_iter[o] = o;
      idx_to_iter[out_to_idx[o]] = o;
    } else if (out_to_op[o] >= 0 && slice[out_to_op[o]] == op_shape.dimensions(out_to_op[o])) {
      out_to_iter[o] = o;
      op_to_iter[out_to_op[o]] = o;
    }
  }
  for (size_t k = 0; k < dn.operand_batching_dims.size(); ++k) {
    const int64_t i = dn.start_indices_batching_dims[k];
    if (i < static_cast<int64_t>(idx_to_iter.size()) && idx_to_iter[i] >= 0)
      op_to_iter[dn.operand_batching_dims[k]] = idx_to_iter[i];
  }
  // Trivially sliced dims: summed over (not for pred, which cannot be).
  int64_t n_iter = out_rank;
  std::vector<int64_t> sliced_candidates;
  for (int64_t d = 0; d < op_rank; ++d) {
    if (op_to_iter[d] >= 0 || !Contains(dn.start_index_map, d) || slice[d] != 1 ||
        op_shape.dimensions(d) <= 1 || ty == PrimitiveType::PRED)
      continue;
    op_to_iter[d] = n_iter++;
    sliced_candidates.push_back(d);
  }
  ContractionSpace space =
      MakeContractionSpace(instr, op_to_iter, idx_to_iter, out_to_iter, n_iter);
  const Sharding os = NormalizeForPartitioning(ctx.Get(instr.operand(0)).sharding);
  const Sharding is = NormalizeForPartitioning(ctx.Get(instr.operand(1)).sharding);
  const Sharding out = ctx.ShardingOf(instr);
  std::optional<Sharding> it = PlanIteration(space, op_shape, idx_shape, instr.shape(), os, is,
                                             out, ctx.num_partitions);
  if (!it) return false;
  const Sharding op_s = ProjectSharding(*it, op_to_iter);
  const Sharding idx_s = ProjectSharding(*it, idx_to_iter);
  const Sharding partial = ProjectSharding(*it, out_to_iter, SubgroupType::kUnreduced);
  std::vector<int64_t> sliced;
  const std::vector<int64_t> op_tiles = TileDims(op_s, op_rank);
  for (int64_t d : sliced_candidates)
    if (op_tiles[d] > 1) sliced.push_back(d);
  SpmdBuilder& b = ctx.b;
  SpmdBuilder::ScopedCause rule(
      b, instr, sliced.empty() ? "pass-through / index-parallel dims kept tiled"
                               : "trivially sliced operand dims -> partial sums");
  PartitionedValue operand = ctx.OperandAs(instr, 0, op_s);
  PartitionedValue indices = ctx.OperandAs(instr, 1, idx_s);
  const Shape local_out = LocalShape(instr.shape(), partial);
  Instruction* idx = indices.hlo;
  Instruction* valid = nullptr;
  const int64_t ivd = dn.index_vector_dim;
  if (!sliced.empty())
    idx = ShiftGatherIndices(b, idx, dn, sliced, op_s, op_shape,
                             operand.hlo->shape().dimensions(), &valid);
  Instruction* g = ctx.Clone(instr, local_out, {operand.hlo, idx});
  std::vector<int64_t>& ls = g->mutable_attrs().gather_slice_sizes;
  for (int64_t d = 0; d < op_rank; ++d)
    if (slice[d] == op_shape.dimensions(d)) ls[d] = operand.hlo->shape().dimensions(d);
  if (valid != nullptr) {
    // `valid` has the local indices' batch dims (and a unit vector dim);
    // the output's batch dims are those dims in order.
    std::vector<int64_t> batch_dims, out_batch;
    const std::vector<int64_t>& vdims = valid->shape().dimensions();
    for (int64_t d = 0; d < static_cast<int64_t>(vdims.size()); ++d)
      if (d != ivd) batch_dims.push_back(vdims[d]);
    for (int64_t d = 0; d < out_rank; ++d)
      if (!Contains(dn.offset_dims, d)) out_batch.push_back(d);
    Instruction* mask = b.Broadcast(b.Reshape(valid, batch_dims), local_out.dimensions(), out_batch);
    g = b.Select(mask, g, b.BroadcastScalar(b.Zero(ty), local_out.dimensions()));
  }
  ctx.Set(instr, Reshard(b, {g, instr.shape(), partial}, out));
  return true;
}


// Scatter planned in an iteration space of the updates' dims plus one dim
// per operand dim indexed with unit windows (trivial slicing): pass-through
// window dims and batching dims are shared by operand, updates and indices;
// update scatter dims (indices batch dims) may be tiled when the combiner
// allows the partitions' pieces to be combined afterwards (add: partial
// sums; min / max: an all-reduce of the same op over copies of the
// operand); trivially sliced operand dims are tiled on the operand alone,
// each partition scattering into its tile with shifted indices (updates
// outside the tile are out of bounds there and skipped). The mesh-axis plan
// combines them as XLA's recursive grouping does. Returns false when the
// plan tiles nothing.
bool TryPlannedScatter(SpmdContext& ctx, const Instruction& instr, int64_t k,
                       const std::vector<int64_t>& upd_to_op,
                       const std::vector<int64_t>& upd_to_idx, bool add,
                       std::optional<Opcode> idempotent) {
  const ScatterDimensionNumbers& dn = *instr.attrs().scatter_dnums;
  const Shape& op_shape = instr.operand(0)->shape();
  const Shape& idx_shape = instr.operand(k)->shape();
  const Shape& upd_shape = instr.operand(k + 1)->shape();
  const int64_t op_rank = op_shape.rank(), upd_rank = upd_shape.rank();
  const bool variadic = k > 1;
  const PrimitiveType ty = op_shape.element_type();
  const Sharding out_all = ctx.ShardingOf(instr);
  const Sharding out = variadic ? out_all.tuple_elements()[0] : out_all;
  const bool summable = !variadic && (add || idempotent.has_value());
  // Iteration dims: the update dims first, then the sliced operand dims.
  std::vector<int64_t> upd_to_iter(upd_rank, -1), idx_to_iter(idx_shape.rank(), -1),
      op_to_iter(op_rank, -1);
  std::vector<int64_t> summed_iters;  // update scatter dims that are summed over
  for (int64_t u = 0; u < upd_rank; ++u) {
    const int64_t d = upd_to_op[u];
    if (d >= 0 && upd_shape.dimensions(u) == op_shape.dimensions(d)) {
      upd_to_iter[u] = u;
      op_to_iter[d] = u;
    }
  }
  for (int64_t u = 0; u < upd_rank; ++u) {
    if (upd_to_idx[u] < 0) continue;
    const int64_t i = upd_to_idx[u];
    int64_t batching_op_dim = -1;
    for (size_t j = 0; j < dn.scatter_indices_batching_dims.size(); ++j)
      if (dn.scatter_indices_batching_dims[j] == i) batching_op_dim = dn.input_batching_dims[j];
    if (batching_op_dim >= 0) {
      op_to_iter[batching_op_dim] = u;
    } else if (!summable) {
      continue;  // must stay whole
    } else {
      summed_iters.push_back(u);
    }
    upd_to_iter[u] = u;
    idx_to_iter[i] = u;
  }
  int64_t n_iter = upd_rank;
  std::vector<int64_t> sliced_candidates;
  for (int64_t d = 0; d < op_rank; ++d) {
    if (op_to_iter[d] >= 0 || op_shape.dimensions(d) <= 1 ||
        !Contains(dn.scatter_dims_to_operand_dims, d) || Contains(dn.input_batching_dims, d))
      continue;
    bool unit = Contains(dn.inserted_window_dims, d);
    for (int64_t u = 0; u < upd_rank; ++u)
      if (upd_to_op[u] == d && upd_shape.dimensions(u) == 1) unit = true;
    if (!unit) continue;
    op_to_iter[d] = n_iter++;
    sliced_candidates.push_back(d);
  }
  ContractionSpace space;
  space.lhs_to_iter = upd_to_iter;
  space.rhs_to_iter = idx_to_iter;
  space.out_to_iter = op_to_iter;
  space.n_iter = n_iter;
  space.iter_sizes.assign(n_iter, 1);
  space.contracting.assign(n_iter, false);
  for (int64_t u = 0; u < upd_rank; ++u) space.iter_sizes[u] = upd_shape.dimensions(u);
  for (size_t j = 0; j < sliced_candidates.size(); ++j)
    space.iter_sizes[upd_rank + j] = op_shape.dimensions(sliced_candidates[j]);
  for (int64_t u : summed_iters) space.contracting[u] = true;
  // The result's layout steers the plan; when it tiles nothing, the
  // operand's (the result is resharded afterwards).
  Sharding target = NormalizeForPartitioning(out);
  if (!Plain(target))
    target = NormalizeForPartitioning(ctx.Get(instr.operand(0)).sharding);
  const Sharding us = NormalizeForPartitioning(ctx.Get(instr.operand(k + 1)).sharding);
  const Sharding is = NormalizeForPartitioning(ctx.Get(instr.operand(k)).sharding);
  std::optional<Sharding> it = PlanIteration(space, upd_shape, idx_shape, op_shape, us, is,
                                             target, ctx.num_partitions);
  if (!it) return false;
  const std::vector<int64_t> it_tiles = TileDims(*it, n_iter);
  std::vector<int64_t> summed, summed_upd;
  for (int64_t u : summed_iters)
    if (it_tiles[u] > 1) {
      summed.push_back(u);
      summed_upd.push_back(u);
    }
  if (variadic && !summed.empty()) return false;
  const Sharding op_s = ProjectSharding(*it, op_to_iter);
  const Sharding idx_s = ProjectSharding(*it, idx_to_iter);
  const Sharding upd_s = ProjectSharding(*it, upd_to_iter);
  std::vector<int64_t> sliced;
  const std::vector<int64_t> op_tiles = TileDims(op_s, op_rank);
  for (int64_t d : sliced_candidates)
    if (op_tiles[d] > 1) sliced.push_back(d);
  SpmdBuilder& b = ctx.b;
  SpmdBuilder::ScopedCause rule(
      b, instr, !summed.empty() ? "update scatter dims tiled -> pieces combined"
                                : "pass-through / sliced dims kept tiled");
  Instruction* idx = ctx.OperandAs(instr, k, idx_s).hlo;
  if (!sliced.empty()) idx = ShiftScatterIndices(b, idx, dn, sliced, op_s, op_shape);
  const Shape local_op = LocalShape(op_shape, op_s);
  if (variadic) {
    std::vector<Instruction*> operands;
    for (int64_t j = 0; j < k; ++j) operands.push_back(ctx.OperandAs(instr, j, op_s).hlo);
    operands.push_back(idx);
    for (int64_t j = 0; j < k; ++j)
      operands.push_back(ctx.OperandAs(instr, k + 1 + j, upd_s).hlo);
    std::vector<Shape> locals;
    for (int64_t j = 0; j < k; ++j)
      locals.push_back(LocalShape(instr.shape().tuple_shapes(j), op_s));
    Instruction* s = ctx.Clone(instr, Shape::Tuple(locals), operands);
    ctx.Set(instr, Reshard(b, {s, instr.shape(), Sharding::SingleTuple(k, op_s)}, out_all));
    return true;
  }
  PartitionedValue updates = ctx.OperandAs(instr, 2, upd_s);
  if (summed.empty()) {
    PartitionedValue operand = ctx.OperandAs(instr, 0, op_s);
    Instruction* s = ctx.Clone(instr, local_op, {operand.hlo, idx, updates.hlo});
    ctx.Set(instr, Reshard(b, {s, instr.shape(), op_s}, out));
    return true;
  }
  if (idempotent) {
    // Every partition scatters its updates (padding set to the combiner's
    // identity) into its copy of the operand tile; an all-reduce of the same
    // op over the partitions that differ only in the summed dims combines
    // the copies.
    PartitionedValue operand = ctx.OperandAs(instr, 0, op_s);
    Instruction* upd = MaskPadding(b, updates, summed_upd,
                                   b.ScalarConstant(ty, CombinerIdentity(*idempotent, ty)));
    Instruction* s = ctx.Clone(instr, local_op, {operand.hlo, idx, upd});
    Instruction* r = b.AllReduce(s, it->GroupsAlongDims(summed), b.Reducer(*idempotent, ty));
    ctx.Set(instr, Reshard(b, {r, instr.shape(), op_s}, out));
    return true;
  }
  // add: scatter this partition's updates (padding zeroed) into zeros; the
  // partial sums are reduced by Reshard and added to the operand.
  const Sharding partial = ProjectSharding(*it, op_to_iter, SubgroupType::kUnreduced);
  Instruction* upd = MaskPadding(b, updates, summed_upd, b.Zero(ty));
  Instruction* zeros = b.BroadcastScalar(b.Zero(ty), local_op.dimensions());
  Instruction* s = ctx.Clone(instr, local_op, {zeros, idx, upd});
  PartitionedValue sum = Reshard(b, {s, instr.shape(), partial}, out);
  PartitionedValue operand = ctx.OperandAs(instr, 0, out);
  ctx.Set(instr, {b.Binary(Opcode::kAdd, operand.hlo, sum.hlo), instr.shape(), out});
  return true;
}

}  // namespace

Status HandleGather(SpmdContext& ctx, const Instruction& instr) {
  if (!instr.attrs().gather_dnums || instr.operand_count() != 2 || !instr.shape().IsArray())
    return ctx.Fallback(instr);
  const GatherDimensionNumbers& dn = *instr.attrs().gather_dnums;
  const Shape& op_shape = instr.operand(0)->shape();
  const Shape& idx_shape = instr.operand(1)->shape();
  const std::vector<int64_t>& slice = instr.attrs().gather_slice_sizes;
  const int64_t out_rank = instr.shape().rank();
  Sharding out = ctx.ShardingOf(instr);
  if (out.IsManual() || out.HasManualSubgroup()) return ctx.Fallback(instr, "manual sharding");

  // Output dim -> indices dim (batch dims) and operand dim (offset dims).
  std::vector<int64_t> out_to_idx(out_rank, -1), out_to_op(out_rank, -1);
  {
    int64_t i = 0;
    for (int64_t o = 0; o < out_rank; ++o) {
      if (Contains(dn.offset_dims, o)) continue;
      if (i == dn.index_vector_dim) ++i;
      out_to_idx[o] = i++;
    }
    int64_t k = 0;
    for (int64_t d = 0; d < op_shape.rank(); ++d) {
      if (Contains(dn.collapsed_slice_dims, d) || Contains(dn.operand_batching_dims, d)) continue;
      if (k < static_cast<int64_t>(dn.offset_dims.size())) out_to_op[dn.offset_dims[k++]] = d;
    }
  }
  // Output dims that can stay tiled: batch dims, and offset dims whose
  // slice is the whole operand dim.
  std::vector<int64_t> local_dims;
  std::vector<int64_t> idx_to_out(idx_shape.rank(), -1), op_to_out(op_shape.rank(), -1);
  for (int64_t o = 0; o < out_rank; ++o) {
    if (out_to_idx[o] >= 0) {
      local_dims.push_back(o);
      idx_to_out[out_to_idx[o]] = o;
    } else if (out_to_op[o] >= 0 && slice[out_to_op[o]] == op_shape.dimensions(out_to_op[o])) {
      local_dims.push_back(o);
      op_to_out[out_to_op[o]] = o;
    }
  }
  // Explicit batching dims: the operand follows the indices' batch dim.
  for (size_t k = 0; k < dn.operand_batching_dims.size(); ++k) {
    int64_t o = idx_to_out[dn.start_indices_batching_dims[k]];
    if (o >= 0) op_to_out[dn.operand_batching_dims[k]] = o;
  }

  if (TryPlannedGather(ctx, instr, out_to_op, out_to_idx)) return Status::Ok();
  Sharding local = Plain(out) ? KeepDims(out, out_rank, local_dims) : Sharding::Replicate();
  if (local.IsTiled() && !TiledDims(local, out_rank).empty()) {
    Sharding op_s = ProjectSharding(local, op_to_out);
    Sharding idx_s = ProjectSharding(local, idx_to_out);
    PartitionedValue operand = ctx.OperandAs(instr, 0, op_s);
    PartitionedValue indices = ctx.OperandAs(instr, 1, idx_s);
    Instruction* g = ctx.Clone(instr, LocalShape(instr.shape(), local),
                               {operand.hlo, indices.hlo});
    std::vector<int64_t>& ls = g->mutable_attrs().gather_slice_sizes;
    for (int64_t o = 0; o < out_rank; ++o) {
      int64_t d = out_to_op[o];
      if (d >= 0 && op_to_out[d] == o) ls[d] = operand.hlo->shape().dimensions(d);
    }
    ctx.Set(instr, Reshard(ctx.b, {g, instr.shape(), local}, out));
    return Status::Ok();
  }
  if (TrySlicedOperandGather(ctx, instr)) return Status::Ok();
  return ctx.Fallback(instr);
}

Status HandleScatter(SpmdContext& ctx, const Instruction& instr) {
  // Operands 0..k-1, the indices, updates k+1..2k. A variadic scatter (k >
  // 1, tuple result) scatters every operand alike: one layout for all
  // operands, one for all updates.
  const int64_t k = (instr.operand_count() - 1) / 2;
  const bool variadic = k > 1;
  if (!instr.attrs().scatter_dnums || k < 1 || instr.operand_count() != 2 * k + 1 ||
      (variadic ? !instr.shape().IsTuple() || instr.shape().tuple_size() != k
                : !instr.shape().IsArray()))
    return ctx.Fallback(instr, "malformed scatter");
  const ScatterDimensionNumbers& dn = *instr.attrs().scatter_dnums;
  const Shape& op_shape = instr.operand(0)->shape();
  const Shape& idx_shape = instr.operand(k)->shape();
  const Shape& upd_shape = instr.operand(k + 1)->shape();
  for (int64_t j = 1; j < k; ++j)
    if (instr.operand(j)->shape().dimensions() != op_shape.dimensions() ||
        instr.operand(k + 1 + j)->shape().dimensions() != upd_shape.dimensions())
      return ctx.Fallback(instr, "variadic scatter with differing shapes");
  const int64_t op_rank = op_shape.rank(), upd_rank = upd_shape.rank();
  const Sharding out_all = ctx.ShardingOf(instr);
  // The first result's layout steers the choice; all results end up as
  // `out_all` says.
  Sharding out = variadic ? out_all.tuple_elements()[0] : out_all;
  if (out.IsManual() || out.HasManualSubgroup()) return ctx.Fallback(instr, "manual sharding");
  const bool add = !variadic && IsAddCombiner(instr.to_apply()) &&
                   op_shape.element_type() != PrimitiveType::PRED;

  // Update dim -> operand dim (window dims) / indices dim (scatter dims).
  std::vector<int64_t> upd_to_op(upd_rank, -1), upd_to_idx(upd_rank, -1);
  {
    int64_t w = 0;
    for (int64_t d = 0; d < op_rank; ++d) {
      if (Contains(dn.inserted_window_dims, d) || Contains(dn.input_batching_dims, d)) continue;
      if (w < static_cast<int64_t>(dn.update_window_dims.size()))
        upd_to_op[dn.update_window_dims[w++]] = d;
    }
    int64_t i = 0;
    for (int64_t u = 0; u < upd_rank; ++u) {
      if (Contains(dn.update_window_dims, u)) continue;
      if (i == dn.index_vector_dim) ++i;
      upd_to_idx[u] = i++;
    }
  }
  std::vector<int64_t> idx_to_upd(idx_shape.rank(), -1), op_to_upd(op_rank, -1);
  std::vector<int64_t> passthrough, scatter_dims, batch_scatter_dims;
  for (int64_t u = 0; u < upd_rank; ++u) {
    int64_t d = upd_to_op[u];
    if (d >= 0 && upd_shape.dimensions(u) == op_shape.dimensions(d)) {
      passthrough.push_back(u);
      op_to_upd[d] = u;
    }
    if (upd_to_idx[u] >= 0) {
      scatter_dims.push_back(u);
      idx_to_upd[upd_to_idx[u]] = u;
    }
  }
  for (size_t k = 0; k < dn.input_batching_dims.size(); ++k) {
    int64_t u = idx_to_upd[dn.scatter_indices_batching_dims[k]];
    if (u >= 0) {
      op_to_upd[dn.input_batching_dims[k]] = u;
      batch_scatter_dims.push_back(u);
    }
  }
  const std::optional<Opcode> idempotent =
      variadic || add ? std::nullopt : IdempotentCombiner(instr.to_apply(), op_shape.element_type());
  if (TryPlannedScatter(ctx, instr, k, upd_to_op, upd_to_idx, add, idempotent))
    return Status::Ok();
  // The update sharding: the updates' own, else the result's carried over
  // the pass-through and batching dims.
  std::vector<int64_t> allowed = passthrough;
  allowed.insert(allowed.end(), batch_scatter_dims.begin(), batch_scatter_dims.end());
  if (add || idempotent)
    for (int64_t u : scatter_dims)
      if (!Contains(allowed, u)) allowed.push_back(u);
  Sharding upd_s = Sharding::Replicate();
  Sharding us = NormalizeForPartitioning(ctx.Get(instr.operand(k + 1)).sharding);
  if (Plain(us)) upd_s = KeepDims(us, upd_rank, allowed);
  if (!upd_s.IsTiled() || TiledDims(upd_s, upd_rank).empty()) {
    upd_s = Sharding::Replicate();
    if (Plain(out)) {
      std::vector<int64_t> upd_to_op_kept(upd_rank, -1);
      for (int64_t d = 0; d < op_rank; ++d)
        if (op_to_upd[d] >= 0) upd_to_op_kept[op_to_upd[d]] = d;
      std::vector<int64_t> keep;
      for (int64_t d = 0; d < op_rank; ++d)
        if (op_to_upd[d] >= 0) keep.push_back(d);
      upd_s = ProjectSharding(KeepDims(out, op_rank, keep), upd_to_op_kept);
    }
  }
  if (!upd_s.IsTiled() || TiledDims(upd_s, upd_rank).empty()) {
    if (!variadic && TrySlicedOperandScatter(ctx, instr, upd_to_op)) return Status::Ok();
    return ctx.Fallback(instr);
  }

  // Update dims whose tiles must be summed across partitions.
  std::vector<int64_t> summed;
  for (int64_t u : TiledDims(upd_s, upd_rank))
    if (Contains(scatter_dims, u) && !Contains(batch_scatter_dims, u)) summed.push_back(u);
  Sharding op_s = ProjectSharding(upd_s, op_to_upd,
                                  summed.empty() ? SubgroupType::kReplicated
                                                 : SubgroupType::kUnreduced);
  Sharding idx_s = ProjectSharding(upd_s, idx_to_upd);
  SpmdBuilder& b = ctx.b;
  const Shape local_op = LocalShape(op_shape, op_s);
  if (variadic) {
    // Only pass-through and batching dims are tiled (no add combiner for
    // partial sums): each partition scatters its tiles locally.
    if (!summed.empty()) return ctx.Fallback(instr, "variadic scatter over tiled scatter dims");
    std::vector<Instruction*> operands;
    for (int64_t j = 0; j < k; ++j) operands.push_back(ctx.OperandAs(instr, j, op_s).hlo);
    operands.push_back(ctx.OperandAs(instr, k, idx_s).hlo);
    for (int64_t j = 0; j < k; ++j)
      operands.push_back(ctx.OperandAs(instr, k + 1 + j, upd_s).hlo);
    std::vector<Shape> locals;
    for (int64_t j = 0; j < k; ++j)
      locals.push_back(LocalShape(instr.shape().tuple_shapes(j), op_s));
    Instruction* s = ctx.Clone(instr, Shape::Tuple(locals), operands);
    ctx.Set(instr, Reshard(b, {s, instr.shape(), Sharding::SingleTuple(k, op_s)}, out_all));
    return Status::Ok();
  }
  PartitionedValue updates = ctx.OperandAs(instr, 2, upd_s);
  PartitionedValue indices = ctx.OperandAs(instr, 1, idx_s);
  if (summed.empty()) {
    PartitionedValue operand = ctx.OperandAs(instr, 0, op_s);
    Instruction* s = ctx.Clone(instr, local_op, {operand.hlo, indices.hlo, updates.hlo});
    ctx.Set(instr, Reshard(b, {s, instr.shape(), op_s}, out));
    return Status::Ok();
  }
  PrimitiveType ty = op_shape.element_type();
  if (idempotent) {
    // min / max: every partition scatters its updates (padding set to the
    // combiner's identity) into its copy of the operand; an all-reduce of
    // the same op over the partitions that share the copy combines them.
    const Sharding op_r = ProjectSharding(upd_s, op_to_upd, SubgroupType::kReplicated);
    PartitionedValue operand = ctx.OperandAs(instr, 0, op_r);
    Instruction* upd =
        MaskPadding(b, updates, summed, b.ScalarConstant(ty, CombinerIdentity(*idempotent, ty)));
    Instruction* s = ctx.Clone(instr, LocalShape(op_shape, op_r), {operand.hlo, indices.hlo, upd});
    const DeviceGroups groups =
        op_r.IsTiled() ? op_r.GroupsAlongDims({op_r.SubgroupDim(SubgroupType::kReplicated)})
                       : DeviceGroups{TileAssignment::Iota({1, ctx.num_partitions})};
    Instruction* r = b.AllReduce(s, groups, b.Reducer(*idempotent, ty));
    ctx.Set(instr, Reshard(b, {r, instr.shape(), op_r}, out));
    return Status::Ok();
  }
  // Partial sums: scatter this partition's updates (padding zeroed) into
  // zeros, reduce across partitions, add the operand.
  Instruction* upd = MaskPadding(b, updates, summed, b.Zero(ty));
  Instruction* zeros = b.BroadcastScalar(b.Zero(ty), local_op.dimensions());
  Instruction* s = ctx.Clone(instr, local_op, {zeros, indices.hlo, upd});
  PartitionedValue sum = Reshard(b, {s, instr.shape(), op_s}, out);
  PartitionedValue operand = ctx.OperandAs(instr, 0, out);
  Instruction* r = b.Binary(Opcode::kAdd, operand.hlo, sum.hlo);
  ctx.Set(instr, {r, instr.shape(), out});
  return Status::Ok();
}

}  // namespace meshsplit::spmd
