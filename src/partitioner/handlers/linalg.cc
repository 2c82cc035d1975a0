// Partitioning rules of the linear-algebra ops: cholesky and triangular-solve
// run independently per matrix of the batch, so batch dims stay tiled and only
// the matrix dims are made whole (for triangular-solve, the dim of b that
// indexes independent right-hand sides stays tiled too). ragged-dot keeps
// its batch and non-ragged free dims tiled as the result is, and makes whole
// the dims the groups reach across (the ragged dim, the rhs group dim, the
// group dim of the result, contracting dims; contracting dims the lhs tiles
// stay tiled as partial sums). The TopK custom-call keeps its rows tiled; a
// tiled selected dim is reduced to k candidates per tile before gathering.
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute_text.h"
#include "ir/shape_inference.h"
#include "partitioner/context.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {
namespace {

// The sharding to compute in for an op whose result has the layout of its
// operand `op` (same rank, dims in the same roles): the result's sharding
// when it is tiled, else the operand's, with `whole` dims made whole.
Sharding ComputeSharding(const Sharding& out, const Sharding& op, const std::vector<int64_t>& whole) {
  if (out.IsTiled()) return PartiallyReplicateTiledShardingOnDims(out, whole);
  Sharding o = NormalizeForPartitioning(op);
  if (o.IsTiled()) return PartiallyReplicateTiledShardingOnDims(o, whole);
  return out;
}

bool Unusable(const Sharding& s) { return s.IsManual() || s.IsTuple() || s.IsUnreduced(); }

// Clones `instr` on operands laid out by `operand_shardings`, computing in
// `mid`, then reshards the result to the instruction's sharding.
Status Emit(SpmdContext& ctx, const Instruction& instr,
            const std::vector<Sharding>& operand_shardings, const Sharding& mid,
            const char* rule) {
  SpmdBuilder::ScopedCause cause(ctx.b, instr, rule);
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i)
    operands.push_back(ctx.OperandAs(instr, i, operand_shardings[i]).hlo);
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), mid), operands);
  ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), mid}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace

Status HandleCholesky(SpmdContext& ctx, const Instruction& instr) {
  const Shape& shape = instr.shape();
  const Sharding out = ctx.ShardingOf(instr);
  const Sharding in = ctx.Get(instr.operand(0)).sharding;
  if (!shape.IsArray() || shape.rank() < 2 || Unusable(out) || Unusable(in))
    return ctx.Fallback(instr);
  const int64_t r = shape.rank();
  Sharding mid = ComputeSharding(out, in, {r - 2, r - 1});
  return Emit(ctx, instr, {mid}, mid, "batch dims tiled, matrix dims whole");
}

Status HandleTriangularSolve(SpmdContext& ctx, const Instruction& instr) {
  const Shape& shape = instr.shape();
  const Sharding out = ctx.ShardingOf(instr);
  const Sharding a_s = ctx.Get(instr.operand(0)).sharding;
  const Sharding b_s = ctx.Get(instr.operand(1)).sharding;
  if (!shape.IsArray() || shape.rank() < 2 || Unusable(out) || Unusable(a_s) || Unusable(b_s) ||
      instr.operand(0)->shape().rank() != shape.rank())
    return ctx.Fallback(instr);
  const int64_t r = shape.rank();
  const std::string* left = instr.attrs().FindExtra("left_side");
  const bool left_side = left != nullptr && *left == "true";
  // Each column of b (left side) or row (right side) is an independent
  // right-hand side; the other matrix dim of b is what a reaches across.
  const int64_t solved_dim = left_side ? r - 2 : r - 1;
  Sharding mid = ComputeSharding(out, b_s, {solved_dim});
  // a: batch dims tiled like b's, both matrix dims whole.
  std::vector<int64_t> a_to_b(r, -1);
  for (int64_t d = 0; d + 2 < r; ++d) a_to_b[d] = d;
  Sharding a_mid = ProjectSharding(mid, a_to_b);
  return Emit(ctx, instr, {a_mid, mid}, mid,
              "batch dims and independent right-hand sides tiled");
}

// ragged-dot over an iteration space [result dims..., contracting pairs...].
// The iteration sharding comes from the lhs when it tiles a contracting dim
// (kept tiled: the local products are partial sums, reduced by the reshard
// to the result), else from the result. Iteration dims the groups reach
// across are made whole: the ragged dim, the group dim of the contracting
// mode's result, and group_sizes' leading dims where lhs and rhs would read
// them differently.
Status HandleRaggedDot(SpmdContext& ctx, const Instruction& instr) {
  const Shape& out_shape = instr.shape();
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  const Shape& gs = instr.operand(2)->shape();
  const Sharding out = ctx.ShardingOf(instr);
  if (!out_shape.IsArray() || !ls.IsArray() || !rs.IsArray() || !gs.IsArray() || gs.rank() < 1 ||
      Unusable(out) || !instr.attrs().dot_dnums.has_value())
    return ctx.Fallback(instr);
  for (int i = 0; i < 3; ++i)
    if (Unusable(ctx.Get(instr.operand(i)).sharding)) return ctx.Fallback(instr);
  const DotDimensionNumbers& dn = *instr.attrs().dot_dnums;
  StatusOr<std::vector<int64_t>> ragged_or = ReadIntListAttribute(instr, "lhs_ragged_dims");
  StatusOr<std::vector<int64_t>> group_or = ReadIntListAttribute(instr, "rhs_group_dims");
  if (!ragged_or.ok() || !group_or.ok()) return ctx.Fallback(instr, "ragged dimension numbers");
  const std::vector<int64_t>& ragged = *ragged_or;
  const std::vector<int64_t>& group = *group_or;
  if (ragged.size() != 1 || group.size() > 1 ||
      dn.lhs_contracting_dimensions.size() != dn.rhs_contracting_dimensions.size() ||
      dn.lhs_batch_dimensions.size() != dn.rhs_batch_dimensions.size())
    return ctx.Fallback(instr, "ragged dimension numbers");
  auto in_range = [](const std::vector<int64_t>& dims, int64_t rank) {
    for (int64_t d : dims)
      if (d < 0 || d >= rank) return false;
    return true;
  };
  if (!in_range(ragged, ls.rank()) || !in_range(group, rs.rank()) ||
      !in_range(dn.lhs_batch_dimensions, ls.rank()) ||
      !in_range(dn.lhs_contracting_dimensions, ls.rank()) ||
      !in_range(dn.rhs_batch_dimensions, rs.rank()) ||
      !in_range(dn.rhs_contracting_dimensions, rs.rank()))
    return ctx.Fallback(instr, "ragged-dot dimension numbers out of range");
  const bool contracting_mode = Contains(dn.lhs_contracting_dimensions, ragged[0]);
  // Experts (rhs group dim) tiled: handlers/ragged_experts.cc.
  Status expert_status;
  if (!contracting_mode && group.size() == 1 &&
      TryRaggedDotExpertParallel(ctx, instr, ragged[0], group[0], &expert_status))
    return expert_status;
  // Iteration dims: result dims ([g], batch, lhs free, rhs free), then one
  // per contracting pair. lhs/rhs dims not in it (the rhs group dim) are -1.
  std::vector<int64_t> lhs_to_iter(ls.rank(), -1), rhs_to_iter(rs.rank(), -1);
  int64_t n_out = contracting_mode ? 1 : 0;
  for (size_t k = 0; k < dn.lhs_batch_dimensions.size(); ++k, ++n_out) {
    lhs_to_iter[dn.lhs_batch_dimensions[k]] = n_out;
    rhs_to_iter[dn.rhs_batch_dimensions[k]] = n_out;
  }
  for (int64_t d = 0; d < ls.rank(); ++d)
    if (!Contains(dn.lhs_batch_dimensions, d) && !Contains(dn.lhs_contracting_dimensions, d))
      lhs_to_iter[d] = n_out++;
  for (int64_t d = 0; d < rs.rank(); ++d)
    if (!Contains(dn.rhs_batch_dimensions, d) && !Contains(dn.rhs_contracting_dimensions, d) &&
        !Contains(group, d))
      rhs_to_iter[d] = n_out++;
  if (n_out != out_shape.rank()) return ctx.Fallback(instr);
  const int64_t n_iter = n_out + static_cast<int64_t>(dn.lhs_contracting_dimensions.size());
  for (size_t k = 0; k < dn.lhs_contracting_dimensions.size(); ++k) {
    lhs_to_iter[dn.lhs_contracting_dimensions[k]] = n_out + k;
    rhs_to_iter[dn.rhs_contracting_dimensions[k]] = n_out + k;
  }
  std::vector<int64_t> out_to_iter(n_out);
  for (int64_t o = 0; o < n_out; ++o) out_to_iter[o] = o;
  // Whole iteration dims, and group_sizes' dims in the iteration space.
  std::vector<int64_t> whole;
  if (contracting_mode) whole.push_back(0);
  if (!Contains(dn.lhs_batch_dimensions, ragged[0])) whole.push_back(lhs_to_iter[ragged[0]]);
  const int64_t prefix = gs.rank() - 1;
  std::vector<int64_t> gs_to_iter(gs.rank(), -1);
  for (int64_t d = 0; d < prefix && d < ls.rank(); ++d) {
    const int64_t it = lhs_to_iter[d];
    if (contracting_mode && (d >= rs.rank() || rhs_to_iter[d] != it)) {
      whole.push_back(it);
      continue;
    }
    gs_to_iter[d] = it;
  }
  // The iteration sharding.
  std::vector<int64_t> iter_to_lhs(n_iter, -1), iter_to_out(n_iter, -1);
  for (int64_t d = 0; d < ls.rank(); ++d)
    if (lhs_to_iter[d] >= 0) iter_to_lhs[lhs_to_iter[d]] = d;
  for (int64_t o = 0; o < n_out; ++o) iter_to_out[o] = o;
  const Sharding lhs_s = NormalizeForPartitioning(ctx.Get(instr.operand(0)).sharding);
  bool lhs_tiles_contracting = false;
  if (lhs_s.IsTiled()) {
    const std::vector<int64_t> tiles = TileDims(lhs_s, ls.rank());
    for (int64_t c : dn.lhs_contracting_dimensions)
      if (c != ragged[0] && tiles[c] > 1) lhs_tiles_contracting = true;
  }
  Sharding it = lhs_tiles_contracting ? ProjectSharding(lhs_s, iter_to_lhs)
                                      : (out.IsTiled() ? ProjectSharding(out, iter_to_out) : out);
  it = PartiallyReplicateTiledShardingOnDims(it, whole);
  auto project = [&](const std::vector<int64_t>& to_iter,
                     SubgroupType dropped = SubgroupType::kReplicated) {
    std::vector<int64_t> m(to_iter.size(), -1);
    for (size_t d = 0; d < to_iter.size(); ++d)
      if (to_iter[d] >= 0 && !Contains(whole, to_iter[d])) m[d] = to_iter[d];
    return it.IsTiled() ? ProjectSharding(it, m, dropped) : it;
  };
  const Sharding partial = project(out_to_iter, SubgroupType::kUnreduced);
  SpmdBuilder::ScopedCause cause(ctx.b, instr,
                                 lhs_tiles_contracting
                                     ? "contracting dims sharded -> partial sums; ragged dims whole"
                                     : "batch and free dims tiled as the result, ragged and "
                                       "contracting dims whole");
  PartitionedValue l = ctx.OperandAs(instr, 0, project(lhs_to_iter));
  PartitionedValue r = ctx.OperandAs(instr, 1, project(rhs_to_iter));
  PartitionedValue g = ctx.OperandAs(instr, 2, project(gs_to_iter));
  // Padding of uneven contracting tiles must not enter the sums.
  if (HasPadding(l, dn.lhs_contracting_dimensions))
    l.hlo = MaskPadding(ctx.b, l, dn.lhs_contracting_dimensions, ctx.b.Zero(ls.element_type()));
  if (HasPadding(r, dn.rhs_contracting_dimensions))
    r.hlo = MaskPadding(ctx.b, r, dn.rhs_contracting_dimensions, ctx.b.Zero(rs.element_type()));
  Instruction* d = ctx.Clone(instr, LocalShape(out_shape, partial), {l.hlo, r.hlo, g.hlo});
  ctx.Set(instr, Reshard(ctx.b, {d, out_shape, partial}, out));
  return Status::Ok();
}

// Whether a TopK selects the largest (true) or smallest (false) values:
// largest with no comparator (XLA's partitioner reads it so) or a plain
// compare(p0, p1), direction=GT; smallest with direction=LT; nullopt for
// other comparators.
std::optional<bool> SelectsLargest(const Instruction& instr) {
  if (instr.opcode() == Opcode::kTopK) return TopKLargest(instr);  // its largest=
  const Computation* cmp = instr.to_apply();
  if (cmp == nullptr) return true;
  const Instruction* root = cmp->root();
  if (cmp->parameter_count() != 2 || root == nullptr || root->opcode() != Opcode::kCompare ||
      root->operand_count() != 2 || root->operand(0)->opcode() != Opcode::kParameter ||
      root->operand(1)->opcode() != Opcode::kParameter ||
      root->operand(0)->attrs().parameter_number != 0 ||
      root->operand(1)->attrs().parameter_number != 1 ||
      !root->attrs().comparison_direction.has_value())
    return std::nullopt;
  if (*root->attrs().comparison_direction == ComparisonDirection::kGt) return true;
  if (*root->attrs().comparison_direction == ComparisonDirection::kLt) return false;
  return std::nullopt;
}

// The sort comparator (value a, value b, index a, index b) -> a before b:
// larger (smaller) value first, on equal values the smaller index, added to
// the module once per type and direction.
Computation* TopKOrderComparator(SpmdBuilder& b, PrimitiveType type, bool largest) {
  SpmdModuleState& st = b.state();
  const std::string name = largest ? "topk_largest_first" : "topk_smallest_first";
  const std::string key = name + "." + std::string(PrimitiveTypeName(type));
  auto it = st.reducers.find(key);
  if (it != st.reducers.end()) return it->second;
  Module* m = st.module;
  auto comp = std::make_unique<Computation>(m->UniqueInstructionName(name));
  // Parameters record their number when added, so it is set first.
  auto add = [&](Opcode op, Shape shape, std::vector<Instruction*> ops, const char* name,
                 int64_t parameter_number = 0) {
    auto i = std::make_unique<Instruction>(op, m->UniqueInstructionName(name), std::move(shape));
    i->mutable_attrs().parameter_number = parameter_number;
    for (Instruction* o : ops) i->AppendOperand(o);
    return comp->AddInstruction(std::move(i));
  };
  Instruction* p[4];
  const char* names[4] = {"a", "b", "ia", "ib"};
  for (int i = 0; i < 4; ++i)
    p[i] = add(Opcode::kParameter, Shape(i < 2 ? type : PrimitiveType::S32, {}), {}, names[i], i);
  const Shape pred(PrimitiveType::PRED, {});
  Instruction* gt = add(Opcode::kCompare, pred, {p[0], p[1]}, "gt");
  gt->mutable_attrs().comparison_direction =
      largest ? ComparisonDirection::kGt : ComparisonDirection::kLt;
  Instruction* eq = add(Opcode::kCompare, pred, {p[0], p[1]}, "eq");
  eq->mutable_attrs().comparison_direction = ComparisonDirection::kEq;
  Instruction* lt = add(Opcode::kCompare, pred, {p[2], p[3]}, "index_lt");
  lt->mutable_attrs().comparison_direction = ComparisonDirection::kLt;
  Instruction* tie = add(Opcode::kAnd, pred, {eq, lt}, "tie");
  comp->set_root(add(Opcode::kOr, pred, {gt, tie}, "before"));
  Computation* raw = comp.get();
  st.new_computations.push_back(std::move(comp));
  st.reducers[key] = raw;
  return raw;
}

// XLA's TopK custom-call works along the last dim of its one operand, each
// row on its own: the other dims keep the operand's tiling (or, when the
// operand is not tiled, the result's). When the operand tiles the last dim
// and the TopK selects the largest (smallest), each partition takes the top
// k of its piece (padding masked to the lowest (highest) value, indices made
// global), the
// k-per-tile candidates are gathered and sorted (value, then index) and the
// first k kept, as XLA does; otherwise the last dim is made whole.
Status HandleTopK(SpmdContext& ctx, const Instruction& instr) {
  const Shape& shape = instr.shape();
  const Sharding out = ctx.ShardingOf(instr);
  if (instr.operand_count() != 1 || !shape.IsTuple() || shape.tuple_size() != 2 ||
      !instr.operand(0)->shape().IsArray() || instr.operand(0)->shape().rank() < 1 ||
      !out.IsTuple() || !shape.tuple_shapes(0).IsArray() || !shape.tuple_shapes(1).IsArray())
    return ctx.Fallback(instr);
  const PartitionedValue& in_v = ctx.Get(instr.operand(0));
  const Sharding in = in_v.sharding;
  const Sharding out0 = out.tuple_elements().at(0);
  if (Unusable(in) || Unusable(out0) || Unusable(out.tuple_elements().at(1)))
    return ctx.Fallback(instr);
  const Shape& in_shape = instr.operand(0)->shape();
  const int64_t r = in_shape.rank(), last = r - 1;
  const int64_t n = in_shape.dimensions(last), k = shape.tuple_shapes(0).dimensions(last);
  const Sharding norm_in = NormalizeForPartitioning(in);
  const int64_t tiles = norm_in.IsTiled() ? TileDims(norm_in, r)[last] : 1;
  const PrimitiveType t = in_shape.element_type();
  const std::optional<bool> largest = SelectsLargest(instr);
  if (tiles > 1 && largest.has_value() && k <= (n + tiles - 1) / tiles &&
      shape.tuple_shapes(1).element_type() == PrimitiveType::S32 && t != PrimitiveType::PRED &&
      (IsFloatingPoint(t) || (IsInteger(t) && ByteWidth(t) <= 4))) {
    SpmdBuilder::ScopedCause cause(ctx.b, instr,
                                   "selected dim tiled: top k per tile, then a sort of the "
                                   "gathered candidates");
    PartitionedValue v = Reshard(ctx.b, in_v, norm_in);
    if (HasPadding(v, {last})) {
      // The value padding can never beat: the type's lowest (highest).
      const int bits = static_cast<int>(ByteWidth(t) * 8);
      double fill;
      if (IsFloatingPoint(t)) fill = std::numeric_limits<double>::infinity();
      else if (IsSignedInteger(t))
        fill = *largest ? std::ldexp(1.0, bits - 1) : std::ldexp(1.0, bits - 1) - 1;
      else fill = *largest ? 0.0 : std::ldexp(1.0, bits) - 1;
      if (*largest && !IsUnsignedInteger(t)) fill = -fill;
      v.hlo = MaskPadding(ctx.b, v, {last}, ctx.b.ScalarConstant(t, fill));
    }
    // Candidates: a value of global shape [..., k * tiles] tiled like the
    // operand, tile j holding tile j's top k.
    std::vector<int64_t> cand_dims = in_shape.dimensions();
    cand_dims[last] = k * tiles;
    const Shape cand_v(t, cand_dims), cand_i(PrimitiveType::S32, cand_dims);
    const Shape local_v = LocalShape(cand_v, norm_in), local_i = LocalShape(cand_i, norm_in);
    Instruction* local = ctx.Clone(instr, Shape::Tuple({local_v, local_i}), {v.hlo});
    Instruction* lv = ctx.b.Add(Opcode::kGetTupleElement, local_v, {local});
    lv->mutable_attrs().tuple_index = 0;
    Instruction* li = ctx.b.Add(Opcode::kGetTupleElement, local_i, {local});
    li->mutable_attrs().tuple_index = 1;
    Instruction* offset = TileOffset(ctx.b, norm_in, in_shape.dimensions(), last);
    li = ctx.b.Binary(Opcode::kAdd, li, ctx.b.BroadcastScalar(offset, local_i.dimensions()));
    const Sharding gathered = PartiallyReplicateTiledShardingOnDims(norm_in, {last});
    Instruction* gv = Reshard(ctx.b, {lv, cand_v, norm_in}, gathered).hlo;
    Instruction* gi = Reshard(ctx.b, {li, cand_i, norm_in}, gathered).hlo;
    Instruction* sort = ctx.b.Add(
        Opcode::kSort, Shape::Tuple({gv->shape(), gi->shape()}), {gv, gi}, "topk_sort");
    sort->mutable_attrs().dimensions = {last};
    sort->set_called_computations({TopKOrderComparator(ctx.b, t, *largest)});
    std::vector<Instruction*> parts;
    for (int e = 0; e < 2; ++e) {
      Instruction* g = ctx.b.Add(Opcode::kGetTupleElement, sort->shape().tuple_shapes(e), {sort});
      g->mutable_attrs().tuple_index = e;
      std::vector<int64_t> starts(r, 0), limits = g->shape().dimensions();
      limits[last] = k;
      parts.push_back(ctx.b.Slice(g, starts, limits));
    }
    Instruction* tuple = ctx.b.Add(
        Opcode::kTuple, Shape::Tuple({parts[0]->shape(), parts[1]->shape()}), parts);
    const Sharding g_all = Sharding::Tuple({gathered, gathered});
    ctx.Set(instr, Reshard(ctx.b, {tuple, shape, g_all}, out));
    return Status::Ok();
  }
  Sharding mid = PartiallyReplicateTiledShardingOnDims(norm_in.IsTiled() ? norm_in : out0, {last});
  if (!mid.IsTiled()) mid = Sharding::Replicate();
  SpmdBuilder::ScopedCause cause(ctx.b, instr, "rows tiled, the selected dim whole");
  Instruction* op = ctx.OperandAs(instr, 0, mid).hlo;
  const Sharding mid_all = Sharding::Tuple({mid, mid});
  Instruction* res = ctx.Clone(instr, LocalShape(shape, mid_all), {op});
  ctx.Set(instr, Reshard(ctx.b, {res, shape, mid_all}, out));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
