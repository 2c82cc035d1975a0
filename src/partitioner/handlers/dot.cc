// dot and convolution: partitioned in the "iteration space" of the
// contraction, whose dims are [batch, lhs free, rhs free, contracting]
// (convolution: [batch, output feature, input feature], spatial dims whole). A sharding of that space
// fixes both operand shardings (each drops the other side's free dims into
// partial replication) and the local result's sharding (contracting dims
// become partial sums, which Reshard resolves with an all-reduce or a
// reduce-scatter). Candidates come from the result, the lhs and the rhs
// shardings; the cheapest by bytes moved wins. Padded contracting elements
// are zeroed on both sides so that uneven tiles add nothing.
#include <algorithm>

#include "partitioner/context.h"

namespace meshsplit::spmd {
namespace {

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Rough bytes a partition sends or receives to go from `from` to `to`.
double ReshardCost(const Shape& shape, const Sharding& from, const Sharding& to) {
  if (from == to) return 0;
  const double elems = static_cast<double>(shape.ElementCount());
  const int64_t rank = shape.rank();
  if (HasUnreduced(from)) {
    return 2.0 * elems / std::max<int64_t>(1, from.NumTiles()) +
           ReshardCost(shape, ReduceUnreduced(from), to) * 0.5;
  }
  std::vector<int64_t> more;
  std::vector<int64_t> ft = TileCounts(from, rank), tt = TileCounts(to, rank);
  for (int64_t i = 0; i < rank; ++i)
    if (tt[i] > 1 && ft[i] == 1) more.push_back(i);
  if (ReplicateDims(to, more) == from) return 1e-3 * elems / std::max<int64_t>(1, to.NumTiles());
  return elems / std::max<int64_t>(1, to.NumTiles()) +
         elems / std::max<int64_t>(1, from.NumTiles());
}

bool UsableForIteration(const Sharding& s) {
  return s.IsReplicated() || (s.IsTiled() && !s.HasManualSubgroup() && !HasUnreduced(s));
}

}  // namespace

// The shared core of dot and convolution. Each operand / result dim maps to
// an iteration-space dim, or to -1 when the op reaches across it (a
// convolution's spatial dims), which must then be whole. Iteration dims at
// or after `first_contracting` are summed over.
Status PartitionContraction(SpmdContext& ctx, const Instruction& instr,
                            const std::vector<int64_t>& lhs_to_iter,
                            const std::vector<int64_t>& rhs_to_iter,
                            const std::vector<int64_t>& out_to_iter, int64_t n_iter,
                            const std::vector<int64_t>& lhs_contracting,
                            const std::vector<int64_t>& rhs_contracting) {
  const Shape& lhs_shape = instr.operand(0)->shape();
  const Shape& rhs_shape = instr.operand(1)->shape();
  Sharding out = ctx.ShardingOf(instr);
  PartitionedValue lhs = ctx.Get(instr.operand(0));
  PartitionedValue rhs = ctx.Get(instr.operand(1));
  if (out.IsManual()) {
    // Inside a manual region every value is already local.
    PartitionedValue l = Reshard(ctx.b, lhs, out), r = Reshard(ctx.b, rhs, out);
    Instruction* d = ctx.Clone(instr, instr.shape(), {l.hlo, r.hlo});
    ctx.Set(instr, {d, instr.shape(), out});
    return Status::Ok();
  }
  if (!out.IsTiled() && !out.IsReplicated()) return ctx.Fallback(instr, "result sharding");
  auto invert = [&](const std::vector<int64_t>& to_iter) {
    std::vector<int64_t> inv(n_iter, -1);
    for (size_t d = 0; d < to_iter.size(); ++d)
      if (to_iter[d] >= 0) inv[to_iter[d]] = d;
    return inv;
  };
  std::vector<Sharding> candidates = {ProjectSharding(out, invert(out_to_iter))};
  for (const PartitionedValue* v : {&lhs, &rhs}) {
    Sharding s = NormalizeForPartitioning(v->sharding);
    if (UsableForIteration(s))
      candidates.push_back(ProjectSharding(s, invert(v == &lhs ? lhs_to_iter : rhs_to_iter)));
  }
  // Local work of the whole op, in multiply-adds.
  double work = 1;
  for (int64_t d = 0; d < lhs_shape.rank(); ++d) work *= lhs_shape.dimensions(d);
  for (int64_t d = 0; d < rhs_shape.rank(); ++d)
    if (rhs_to_iter[d] < 0 || std::find(lhs_to_iter.begin(), lhs_to_iter.end(), rhs_to_iter[d]) ==
                                  lhs_to_iter.end())
      work *= rhs_shape.dimensions(d);
  double best_cost = 0;
  int best = -1;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const Sharding& it = candidates[c];
    if (!UsableForIteration(it)) continue;
    Sharding lt = ProjectSharding(it, lhs_to_iter);
    Sharding rt = ProjectSharding(it, rhs_to_iter);
    Sharding ot = ProjectSharding(it, out_to_iter, SubgroupType::kUnreduced);
    double cost = ReshardCost(lhs_shape, NormalizeForPartitioning(lhs.sharding), lt) +
                  ReshardCost(rhs_shape, NormalizeForPartitioning(rhs.sharding), rt) +
                  ReshardCost(instr.shape(), ot, out);
    // Among equally cheap layouts, prefer the one with the least local work.
    cost += 1e-4 * work / it.NumTiles();
    if (best < 0 || cost < best_cost) {
      best = c;
      best_cost = cost;
    }
  }
  if (best < 0) return ctx.Fallback(instr, "no usable iteration-space sharding");
  const Sharding& it = candidates[best];
  PartitionedValue l = Reshard(ctx.b, lhs, ProjectSharding(it, lhs_to_iter));
  PartitionedValue r = Reshard(ctx.b, rhs, ProjectSharding(it, rhs_to_iter));
  if (HasPadding(l, lhs_contracting) || HasPadding(r, rhs_contracting)) {
    l.hlo = MaskPadding(ctx.b, l, lhs_contracting, ctx.b.Zero(lhs_shape.element_type()));
    r.hlo = MaskPadding(ctx.b, r, rhs_contracting, ctx.b.Zero(rhs_shape.element_type()));
  }
  Sharding partial = ProjectSharding(it, out_to_iter, SubgroupType::kUnreduced);
  Instruction* d = ctx.Clone(instr, LocalShape(instr.shape(), partial), {l.hlo, r.hlo});
  SpmdBuilder::ScopedCause rule(ctx.b, instr, HasUnreduced(partial)
                                                  ? "contracting dims sharded -> partial sums"
                                                  : "result laid out as the iteration space");
  ctx.Set(instr, Reshard(ctx.b, {d, instr.shape(), partial}, out));
  return Status::Ok();
}

Status HandleDot(SpmdContext& ctx, const Instruction& instr) {
  const DotDimensionNumbers& dn = *instr.attrs().dot_dnums;
  const Shape& lhs_shape = instr.operand(0)->shape();
  const Shape& rhs_shape = instr.operand(1)->shape();
  std::vector<int64_t> lf, rf;
  for (int64_t d = 0; d < lhs_shape.rank(); ++d)
    if (!Contains(dn.lhs_batch_dimensions, d) && !Contains(dn.lhs_contracting_dimensions, d))
      lf.push_back(d);
  for (int64_t d = 0; d < rhs_shape.rank(); ++d)
    if (!Contains(dn.rhs_batch_dimensions, d) && !Contains(dn.rhs_contracting_dimensions, d))
      rf.push_back(d);
  const int64_t nb = dn.lhs_batch_dimensions.size(), nlf = lf.size(), nrf = rf.size(),
                nc = dn.lhs_contracting_dimensions.size();
  const int64_t n_out = nb + nlf + nrf;
  // Iteration space: [batch, lhs free, rhs free, contracting]; the result
  // dims are its first n_out dims.
  std::vector<int64_t> lhs_to_iter(lhs_shape.rank()), rhs_to_iter(rhs_shape.rank());
  for (int64_t k = 0; k < nb; ++k) {
    lhs_to_iter[dn.lhs_batch_dimensions[k]] = k;
    rhs_to_iter[dn.rhs_batch_dimensions[k]] = k;
  }
  for (int64_t k = 0; k < nlf; ++k) lhs_to_iter[lf[k]] = nb + k;
  for (int64_t k = 0; k < nrf; ++k) rhs_to_iter[rf[k]] = nb + nlf + k;
  for (int64_t k = 0; k < nc; ++k) {
    lhs_to_iter[dn.lhs_contracting_dimensions[k]] = n_out + k;
    rhs_to_iter[dn.rhs_contracting_dimensions[k]] = n_out + k;
  }
  std::vector<int64_t> out_to_iter(n_out);
  for (int64_t k = 0; k < n_out; ++k) out_to_iter[k] = k;
  return PartitionContraction(ctx, instr, lhs_to_iter, rhs_to_iter, out_to_iter, n_out + nc,
                              dn.lhs_contracting_dimensions, dn.rhs_contracting_dimensions);
}

}  // namespace meshsplit::spmd
