// Partitioning rules of the linear-algebra ops: cholesky and triangular-solve
// run independently per matrix of the batch, so batch dims stay tiled and only
// the matrix dims are made whole (for triangular-solve, the dim of b that
// indexes independent right-hand sides stays tiled too). ragged-dot keeps
// its batch and non-ragged free dims tiled as the result is, and makes whole
// the dims the groups reach across (the ragged dim, the rhs group dim, the
// group dim of the result, contracting dims). The TopK custom-call keeps its
// rows tiled and makes the selected (last) dim whole.
#include <string>
#include <vector>

#include "partitioner/context.h"

namespace meshsplit::spmd {
namespace {

bool Has(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e == x) return true;
  return false;
}

// The sharding to compute in for an op whose result has the layout of its
// operand `op` (same rank, dims in the same roles): the result's sharding
// when it is tiled, else the operand's, with `whole` dims made whole.
Sharding ComputeSharding(const Sharding& out, const Sharding& op, const std::vector<int64_t>& whole) {
  if (out.IsTiled()) return ReplicateDims(out, whole);
  Sharding o = NormalizeForPartitioning(op);
  if (o.IsTiled()) return ReplicateDims(o, whole);
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

bool ParseDims(const std::string* text, std::vector<int64_t>* out) {
  out->clear();
  if (text == nullptr) return true;
  std::string digits;
  for (char c : *text) {
    if (c >= '0' && c <= '9') {
      digits += c;
    } else if (c == ',' || c == '}') {
      if (!digits.empty()) out->push_back(std::stoll(digits));
      digits.clear();
    } else if (c != '{' && c != ' ') {
      return false;
    }
  }
  return true;
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
  std::vector<int64_t> ragged, group;
  if (!ParseDims(instr.attrs().FindExtra("lhs_ragged_dims"), &ragged) || ragged.size() != 1 ||
      !ParseDims(instr.attrs().FindExtra("rhs_group_dims"), &group) || group.size() > 1)
    return ctx.Fallback(instr, "ragged dimension numbers");
  const bool contracting_mode = Has(dn.lhs_contracting_dimensions, ragged[0]);
  // Result dims: [g (contracting mode)], batch, lhs free, rhs free. Map each
  // to the lhs / rhs dim it comes from (-1: none).
  std::vector<int64_t> out_lhs, out_rhs;
  if (contracting_mode) {
    out_lhs.push_back(-1);
    out_rhs.push_back(-1);
  }
  for (size_t k = 0; k < dn.lhs_batch_dimensions.size(); ++k) {
    out_lhs.push_back(dn.lhs_batch_dimensions[k]);
    out_rhs.push_back(dn.rhs_batch_dimensions[k]);
  }
  for (int64_t d = 0; d < ls.rank(); ++d)
    if (!Has(dn.lhs_batch_dimensions, d) && !Has(dn.lhs_contracting_dimensions, d)) {
      out_lhs.push_back(d);
      out_rhs.push_back(-1);
    }
  for (int64_t d = 0; d < rs.rank(); ++d)
    if (!Has(dn.rhs_batch_dimensions, d) && !Has(dn.rhs_contracting_dimensions, d) &&
        !Has(group, d)) {
      out_lhs.push_back(-1);
      out_rhs.push_back(d);
    }
  if (static_cast<int64_t>(out_lhs.size()) != out_shape.rank()) return ctx.Fallback(instr);
  // Result dims the groups reach across stay whole: the group dim of the
  // contracting mode and, in the non-contracting mode, the ragged rows.
  std::vector<int64_t> whole;
  for (int64_t o = 0; o < out_shape.rank(); ++o)
    if ((contracting_mode && o == 0) || (!contracting_mode && out_lhs[o] == ragged[0] &&
                                         !Has(dn.lhs_batch_dimensions, ragged[0])))
      whole.push_back(o);
  // group_sizes' leading dims index the lhs's leading dims (and, in the
  // contracting mode, the rhs's): they may stay tiled only where both read
  // them through the same result dim.
  const int64_t prefix = gs.rank() - 1;
  std::vector<int64_t> lhs_to_out(ls.rank(), -1), rhs_to_out(rs.rank(), -1),
      gs_to_out(gs.rank(), -1);
  for (int64_t o = 0; o < out_shape.rank(); ++o) {
    if (out_lhs[o] >= 0) lhs_to_out[out_lhs[o]] = o;
    if (out_rhs[o] >= 0) rhs_to_out[out_rhs[o]] = o;
  }
  for (int64_t d = 0; d < prefix && d < ls.rank(); ++d) {
    const int64_t o = lhs_to_out[d];
    if (o < 0) continue;
    if (contracting_mode && (d >= rs.rank() || rhs_to_out[d] != o)) {
      whole.push_back(o);
      continue;
    }
    gs_to_out[d] = o;
  }
  const Sharding mid = ReplicateDims(out, whole);
  auto project = [&](const std::vector<int64_t>& to_out) {
    std::vector<int64_t> m(to_out.size(), -1);
    for (size_t d = 0; d < to_out.size(); ++d)
      if (to_out[d] >= 0 && !Has(whole, to_out[d])) m[d] = to_out[d];
    return ProjectSharding(mid, m);
  };
  return Emit(ctx, instr, {project(lhs_to_out), project(rhs_to_out), project(gs_to_out)}, mid,
              "batch and free dims tiled as the result, ragged and "
              "contracting dims whole");
}

// XLA's TopK custom-call works along the last dim of its one operand, each
// row on its own: the other dims keep the operand's tiling (or, when the
// operand is not tiled, the result's), the last dim is made whole.
Status HandleTopK(SpmdContext& ctx, const Instruction& instr) {
  const Shape& shape = instr.shape();
  const Sharding out = ctx.ShardingOf(instr);
  if (instr.operand_count() != 1 || !shape.IsTuple() || shape.tuple_size() != 2 ||
      !instr.operand(0)->shape().IsArray() || instr.operand(0)->shape().rank() < 1 ||
      !out.IsTuple())
    return ctx.Fallback(instr);
  const Sharding in = ctx.Get(instr.operand(0)).sharding;
  const Sharding out0 = out.tuple_elements().at(0);
  if (Unusable(in) || Unusable(out0) || Unusable(out.tuple_elements().at(1)))
    return ctx.Fallback(instr);
  const int64_t r = instr.operand(0)->shape().rank();
  const Sharding norm_in = NormalizeForPartitioning(in);
  Sharding mid = ReplicateDims(norm_in.IsTiled() ? norm_in : out0, {r - 1});
  if (!mid.IsTiled()) mid = Sharding::Replicate();
  SpmdBuilder::ScopedCause cause(ctx.b, instr, "rows tiled, the selected dim whole");
  Instruction* op = ctx.OperandAs(instr, 0, mid).hlo;
  const Sharding mid_all = Sharding::Tuple({mid, mid});
  Instruction* t = ctx.Clone(instr, LocalShape(shape, mid_all), {op});
  ctx.Set(instr, Reshard(ctx.b, {t, shape, mid_all}, out));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
