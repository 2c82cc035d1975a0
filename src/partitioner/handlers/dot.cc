// dot (and the convolution core): partitioned in the "iteration space" of
// the contraction, whose dims are [batch, lhs free, rhs free, contracting]
// (convolution: [batch, output feature, input feature], spatial dims
// whole). A sharding of that space fixes both operand shardings (each drops
// the other side's free dims into partial replication) and the local
// result's sharding (contracting dims become partial sums, which Reshard
// resolves with an all-reduce or a reduce-scatter over the contracting
// axes' groups only). The sharding is planned per mesh axis
// (handlers/dot_plan.cc), which covers XLA's recursive grouping on batch,
// free and contracting dims, and in partially manual regions plans inside
// each manual subgroup over the other axes; shardings without a common iota
// mesh fall back to the cheapest of the result's and the operands' own
// layouts. Padded contracting elements are zeroed on both sides so that
// uneven tiles add nothing. Optionally, an operand that would be
// all-gathered is windowed instead (handlers/windowed_einsum.cc).
#include "partitioner/handlers/dot_plan.h"

namespace meshsplit::spmd {
namespace {

// XLA partitions a dot along the tiling its operands already have and
// reshards the result afterwards, rather than moving an operand to suit the
// result. Weighing the whole-sharding candidates, an operand move counts this
// many times the elements EstimateReshard gives, a result move once, which
// gives XLA's choices (e.g. Dot2DPartitionedNoncontractingAndContracting3 in
// the corpus: partial sums all-reduced, not both operands moved).
constexpr double kOperandMoveWeight = 3;

bool UsableForIteration(const Sharding& s) {
  return s.IsReplicated() || (s.IsTiled() && !s.HasManualSubgroup() && !HasUnreduced(s));
}

// The mesh-axis plan also takes partially manual shardings: it plans inside
// every manual subgroup (dot_plan.h).
bool UsableForMeshPlan(const Sharding& s) {
  return s.IsReplicated() || (s.IsTiled() && !HasUnreduced(s));
}

// The legacy choice when the shardings do not decompose into mesh axes:
// the iteration-space sharding of the result or of one operand, whichever
// moves the fewest bytes.
std::optional<Sharding> ChooseWholeShardingCandidate(const ContractionSpace& space,
                                                     const Shape& lhs_shape,
                                                     const Shape& rhs_shape,
                                                     const Shape& out_shape,
                                                     const Sharding& lhs, const Sharding& rhs,
                                                     const Sharding& out,
                                                     int64_t num_partitions) {
  const int64_t n_iter = space.n_iter;
  auto invert = [&](const std::vector<int64_t>& to_iter) {
    std::vector<int64_t> inv(n_iter, -1);
    for (size_t d = 0; d < to_iter.size(); ++d)
      if (to_iter[d] >= 0) inv[to_iter[d]] = d;
    return inv;
  };
  std::vector<Sharding> candidates = {ProjectSharding(out, invert(space.out_to_iter))};
  if (UsableForIteration(lhs)) candidates.push_back(ProjectSharding(lhs, invert(space.lhs_to_iter)));
  if (UsableForIteration(rhs)) candidates.push_back(ProjectSharding(rhs, invert(space.rhs_to_iter)));
  // Local work of the whole op, in multiply-adds.
  double work = 1;
  for (int64_t i = 0; i < n_iter; ++i) work *= space.iter_sizes[i];
  double best_cost = 0;
  int best = -1;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const Sharding& it = candidates[c];
    if (!UsableForIteration(it)) continue;
    Sharding lt = ProjectSharding(it, space.lhs_to_iter);
    Sharding rt = ProjectSharding(it, space.rhs_to_iter);
    Sharding ot = ProjectSharding(it, space.out_to_iter, SubgroupType::kUnreduced);
    double cost = kOperandMoveWeight * (EstimateReshard(lhs_shape, lhs, lt, num_partitions) +
                                        EstimateReshard(rhs_shape, rhs, rt, num_partitions)) +
                  EstimateReshard(out_shape, ot, out, num_partitions);
    // Among equally cheap layouts, prefer the one with the least local work.
    cost += 1e-4 * work / it.NumTiles();
    if (best < 0 || cost < best_cost) {
      best = c;
      best_cost = cost;
    }
  }
  if (best < 0) return std::nullopt;
  return candidates[best];
}

}  // namespace

Status PartitionContraction(SpmdContext& ctx, const Instruction& instr,
                            const ContractionSpace& space, const LocalContraction& make_local) {
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
  // A result of partial sums on every device ({unreduced}) is planned as a
  // replicated one; the local partial result is then resharded to it, which
  // costs nothing when the contracting dims were split over every device
  // (rather than running the whole dot and zeroing all but one copy).
  const bool all_unreduced = out.kind() == Sharding::Kind::kUnreduced;
  const Sharding plan_out = all_unreduced ? Sharding::Replicate() : out;
  if (!plan_out.IsTiled() && !plan_out.IsReplicated())
    return ctx.Fallback(instr, "result sharding");
  const Sharding lhs_s = NormalizeForPartitioning(lhs.sharding);
  const Sharding rhs_s = NormalizeForPartitioning(rhs.sharding);
  // First the mesh-axis plan (recursive partitioning on device subgroups);
  // when the shardings share no iota mesh, the best whole sharding of the
  // result or of one operand.
  std::optional<Sharding> planned;
  if (UsableForMeshPlan(lhs_s) && UsableForMeshPlan(rhs_s) && UsableForMeshPlan(plan_out))
    planned = PlanByMeshAxes(space, lhs_shape, rhs_shape, instr.shape(), lhs_s, rhs_s,
                             plan_out, ctx.num_partitions);
  Sharding it;
  if (planned) {
    it = *planned;
  } else {
    std::optional<Sharding> chosen = ChooseWholeShardingCandidate(
        space, lhs_shape, rhs_shape, instr.shape(), lhs_s, rhs_s, plan_out, ctx.num_partitions);
    if (!chosen) return ctx.Fallback(instr, "no usable iteration-space sharding");
    it = *chosen;
  }
  const Sharding lt = ProjectSharding(it, space.lhs_to_iter);
  const Sharding rt = ProjectSharding(it, space.rhs_to_iter);
  const Sharding partial = ProjectSharding(it, space.out_to_iter, SubgroupType::kUnreduced);
  const std::vector<int64_t> lhs_contracting = ContractingDims(space, 0);
  const std::vector<int64_t> rhs_contracting = ContractingDims(space, 1);
  // Padded contracting elements become zeros on both sides.
  auto prepare = [&](int side) {
    const bool is_lhs = side == 0;
    PartitionedValue v = Reshard(ctx.b, is_lhs ? lhs : rhs, is_lhs ? lt : rt);
    const std::vector<int64_t>& dims = is_lhs ? lhs_contracting : rhs_contracting;
    if (HasPadding(v, dims))
      v.hlo = MaskPadding(ctx.b, v, dims,
                          ctx.b.Zero((is_lhs ? lhs_shape : rhs_shape).element_type()));
    return v;
  };
  PartitionedValue l, r;
  Instruction* d = nullptr;
  if (ctx.options.windowed_einsum_threshold_bytes >= 0 && !make_local && !all_unreduced) {
    // Window the operand whose gather would be the larger.
    const int first =
        LocalShape(rhs_shape, rt).ByteSize() > LocalShape(lhs_shape, lt).ByteSize() ? 1 : 0;
    for (int g : {first, 1 - first}) {
      auto make_other = [&, g]() {
        PartitionedValue& other = g == 0 ? r : l;
        if (other.hlo == nullptr) other = prepare(1 - g);
        return other;
      };
      d = TryWindowedEinsum(ctx, instr, space, g, g == 0 ? lhs : rhs, g == 0 ? lt : rt,
                            make_other, partial);
      if (d != nullptr) break;
    }
  }
  if (d == nullptr && ctx.options.windowed_einsum_reduce_scatter && !make_local &&
      !all_unreduced) {
    // The reduce-scatter loop, when the partial sums would be scattered.
    if (l.hlo == nullptr) l = prepare(0);
    if (r.hlo == nullptr) r = prepare(1);
    if (Instruction* w = TryWindowedReduceScatter(ctx, instr, space, l, r, partial, out)) {
      ctx.Set(instr, {w, instr.shape(), out});
      return Status::Ok();
    }
  }
  if (d == nullptr) {
    if (l.hlo == nullptr) l = prepare(0);
    if (r.hlo == nullptr) r = prepare(1);
    d = make_local ? make_local(l, r, LocalShape(instr.shape(), partial))
                   : ctx.Clone(instr, LocalShape(instr.shape(), partial), {l.hlo, r.hlo});
  }
  SpmdBuilder::ScopedCause rule(ctx.b, instr, HasUnreduced(partial)
                                                  ? "contracting dims sharded -> partial sums"
                                                  : "result laid out as the iteration space");
  ctx.Set(instr, Reshard(ctx.b, {d, instr.shape(), partial}, out));
  return Status::Ok();
}

// Iteration space: the dot rule's factors, [batch, lhs free, rhs free,
// contracting]; the result dims are its first dims.
Status HandleDot(SpmdContext& ctx, const Instruction& instr) {
  const ContractionSpace space = ContractionSpaceOf(GetOpShardingRule(instr).factors, instr);
  return PartitionContraction(ctx, instr, space);
}

}  // namespace meshsplit::spmd
