// convolution: when the result tiles spatial dims, each partition fetches
// the input rows its output tile reads (halo exchange, halo.h) and runs the
// convolution locally with the padding adjusted; otherwise the dot handler's
// iteration-space core (handlers/dot.cc) partitions batch and feature dims,
// with spatial dims whole.
#include <algorithm>

#include "partitioner/context.h"
#include "partitioner/halo.h"
#include "partitioner/handlers/dot_plan.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {
namespace {

// Partially manual shardings are usable: every path below keeps the
// subgroups (ProjectSharding, PartiallyReplicateTiledShardingOnDims), its
// halo exchanges and partial sums run along data dims only, and Reshard moves
// data only inside each manual subgroup.
bool Usable(const Sharding& s) {
  return s.IsTiled() && !HasUnreduced(s);
}

// The result tiles spatial dims: lhs windows by halo exchange, local
// convolution on them. Returns false (nothing emitted) when the case is not
// covered, and the caller takes the whole-spatial path.
bool TrySpatialConvolution(SpmdContext& ctx, const Instruction& instr) {
  const Attributes& a = instr.attrs();
  if (!a.conv_dnums || !a.window || instr.operand_count() != 2) return false;
  const ConvolutionDimensionNumbers& dn = *a.conv_dnums;
  const Sharding result = ctx.ShardingOf(instr);
  if (!Usable(result)) return false;
  const int64_t nsp = static_cast<int64_t>(dn.output_spatial_dimensions.size());
  if (static_cast<int64_t>(a.window->size()) != nsp) return false;
  const int64_t groups = a.feature_group_count, batch_groups = a.batch_group_count;
  // Dims of the result this path cannot keep tiled are made whole (and the
  // result resharded at the end): spatial dims whose window cannot be
  // planned, feature dims that would split a group, and batch / feature
  // dims under batch_group_count.
  std::vector<int64_t> whole;
  std::vector<int64_t> tiled;
  std::vector<WindowedDimPlan> plans(nsp);
  for (int64_t k = 0; k < nsp; ++k) {
    const int64_t od = dn.output_spatial_dimensions[k];
    if (result.TileDim(od) == 1) continue;
    const int64_t out_tile = CeilDiv(instr.shape().dimensions(od), result.TileDim(od));
    std::optional<WindowedDimPlan> p = PlanWindowedDim((*a.window)[k], out_tile);
    if (!p) {
      whole.push_back(od);
      continue;
    }
    plans[k] = *p;
    tiled.push_back(k);
  }
  // Without a spatial dim left, only grouped convolutions are better off
  // here than on the iteration-space path (which cannot split groups).
  if (tiled.empty() && groups == 1 && batch_groups == 1) return false;
  if (groups > 1 && groups % result.TileDim(dn.output_feature_dimension) != 0)
    whole.push_back(dn.output_feature_dimension);
  if (batch_groups > 1) {
    whole.push_back(dn.output_feature_dimension);
    whole.push_back(dn.output_batch_dimension);
  }
  std::sort(whole.begin(), whole.end());
  whole.erase(std::unique(whole.begin(), whole.end()), whole.end());
  const Sharding out =
      whole.empty() ? result : PartiallyReplicateTiledShardingOnDims(result, whole);
  const int64_t feature_tiles = out.TileDim(dn.output_feature_dimension);

  const Shape& lhs_shape = instr.operand(0)->shape();
  const Shape& rhs_shape = instr.operand(1)->shape();
  std::vector<int64_t> lhs_to_out(lhs_shape.rank(), -1), rhs_to_out(rhs_shape.rank(), -1);
  if (batch_groups == 1) lhs_to_out[dn.input_batch_dimension] = dn.output_batch_dimension;
  if (groups > 1) lhs_to_out[dn.input_feature_dimension] = dn.output_feature_dimension;
  for (int64_t k = 0; k < nsp; ++k)
    lhs_to_out[dn.input_spatial_dimensions[k]] = dn.output_spatial_dimensions[k];
  rhs_to_out[dn.kernel_output_feature_dimension] = dn.output_feature_dimension;
  PartitionedValue lhs = ctx.OperandAs(instr, 0, ProjectSharding(out, lhs_to_out));
  PartitionedValue rhs = ctx.OperandAs(instr, 1, ProjectSharding(out, rhs_to_out));

  SpmdBuilder& b = ctx.b;
  Instruction* zero = b.Zero(lhs_shape.element_type());
  PartitionedValue windowed = lhs;
  Window window = *a.window;
  for (int64_t k : tiled) {
    SpmdBuilder::ScopedCause rule(b, instr, "spatial dim sharded -> halo exchange");
    windowed.hlo = ExchangeHaloWindow(b, windowed, dn.input_spatial_dimensions[k],
                                      plans[k].input, zero);
    window[k] = plans[k].local;
  }
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), out), {windowed.hlo, rhs.hlo});
  r->mutable_attrs().window = window;
  // Each shard holds groups / feature_tiles whole groups (feature tiling
  // of an ungrouped convolution splits only the kernel).
  if (groups > 1) r->mutable_attrs().feature_group_count = groups / feature_tiles;
  ctx.Set(instr, Reshard(b, {r, instr.shape(), out}, result));
  return true;
}


// Both operands tiled along the same spatial dims, which the result does not
// tile (the weight gradient: activations convolved with output gradients as
// the "kernel", summed over space). Shard i holds kernel positions
// [i*Tk, (i+1)*Tk) and fetches the input those positions read for every
// output (halo exchange); the local convolutions are partial sums over the
// kernel's spatial extent, which Reshard reduces. Returns false when the
// case does not apply.
bool TrySpatialContraction(SpmdContext& ctx, const Instruction& instr) {
  const Attributes& a = instr.attrs();
  if (!a.conv_dnums || !a.window || instr.operand_count() != 2) return false;
  const ConvolutionDimensionNumbers& dn = *a.conv_dnums;
  const Sharding out = ctx.ShardingOf(instr);
  const PartitionedValue& lhs0 = ctx.Get(instr.operand(0));
  const PartitionedValue& rhs0 = ctx.Get(instr.operand(1));
  if (!Usable(lhs0.sharding) || !Usable(rhs0.sharding)) return false;
  if (out.IsTuple() || out.IsManual() || HasUnreduced(out)) return false;
  const int64_t nsp = static_cast<int64_t>(dn.input_spatial_dimensions.size());
  if (static_cast<int64_t>(a.window->size()) != nsp) return false;
  const Shape& lhs_shape = instr.operand(0)->shape();
  const Shape& rhs_shape = instr.operand(1)->shape();
  std::vector<int64_t> dims;  // spatial indices k contracted across shards
  for (int64_t k = 0; k < nsp; ++k) {
    const int64_t ld = dn.input_spatial_dimensions[k], kd = dn.kernel_spatial_dimensions[k];
    const int64_t m = lhs0.sharding.TileDim(ld);
    if (m <= 1 || rhs0.sharding.TileDim(kd) != m) continue;
    if (out.IsTiled() && out.TileDim(dn.output_spatial_dimensions[k]) > 1) continue;
    if (rhs_shape.dimensions(kd) < m) continue;
    dims.push_back(k);
  }
  if (dims.empty()) return false;
  // Plans: kernel tile Tk, input window per shard.
  std::vector<std::optional<HaloWindow>> windows(nsp);
  Window window = *a.window;
  for (int64_t k : dims) {
    const WindowDimension& w = (*a.window)[k];
    if (w.window_reversal || w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1)
      return false;
    const int64_t m = lhs0.sharding.TileDim(dn.input_spatial_dimensions[k]);
    const int64_t kt = CeilDiv(rhs_shape.dimensions(dn.kernel_spatial_dimensions[k]), m);
    const int64_t o = instr.shape().dimensions(dn.output_spatial_dimensions[k]);
    const int64_t bd = w.base_dilation;
    if ((kt * w.window_dilation) % bd != 0 || o < 1) return false;
    const int64_t span = (o - 1) * w.stride + (kt - 1) * w.window_dilation + 1;
    const int64_t first = -FloorDiv(w.padding_low, bd);
    const int64_t last = FloorDiv(span - 1 - w.padding_low, bd);
    if (last < first) return false;
    windows[k] = HaloWindow{first, kt * w.window_dilation / bd, last - first + 1};
    window[k].size = kt;
    window[k].padding_low = first * bd + w.padding_low;
    window[k].padding_high = span - window[k].padding_low - ((last - first) * bd + 1);
  }
  // Operand layouts: only the contracted spatial dims stay tiled, the rhs
  // tiled like the lhs along them.
  std::vector<int64_t> keep_l;
  for (int64_t k : dims) keep_l.push_back(dn.input_spatial_dimensions[k]);
  std::vector<int64_t> others;
  for (int64_t d = 0; d < lhs_shape.rank(); ++d)
    if (std::find(keep_l.begin(), keep_l.end(), d) == keep_l.end()) others.push_back(d);
  Sharding lhs_target = PartiallyReplicateTiledShardingOnDims(lhs0.sharding, others);
  std::vector<int64_t> rhs_to_lhs(rhs_shape.rank(), -1);
  for (int64_t k : dims) rhs_to_lhs[dn.kernel_spatial_dimensions[k]] = dn.input_spatial_dimensions[k];
  Sharding rhs_target = ProjectSharding(lhs_target, rhs_to_lhs);
  PartitionedValue lhs = Reshard(ctx.b, lhs0, lhs_target);
  PartitionedValue rhs = Reshard(ctx.b, rhs0, rhs_target);
  SpmdBuilder& b = ctx.b;
  Instruction* zero = b.Zero(lhs_shape.element_type());
  // Kernel padding must add nothing.
  std::vector<int64_t> kernel_dims;
  for (int64_t k : dims) kernel_dims.push_back(dn.kernel_spatial_dimensions[k]);
  rhs.hlo = MaskPadding(b, rhs, kernel_dims, zero);
  for (int64_t k : dims) {
    SpmdBuilder::ScopedCause rule(b, instr, "contracted spatial dim sharded -> halo exchange");
    lhs.hlo = ExchangeHaloWindow(b, lhs, dn.input_spatial_dimensions[k], *windows[k], zero);
  }
  // The local result: partial sums over the devices of the contracted dims.
  std::vector<int64_t> none(instr.shape().rank(), -1);
  Sharding partial = ProjectSharding(lhs_target, none, SubgroupType::kUnreduced);
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), partial), {lhs.hlo, rhs.hlo});
  r->mutable_attrs().window = window;
  ctx.Set(instr, Reshard(b, {r, instr.shape(), partial}, out));
  return true;
}

// A batch-grouped convolution (batch_group_count > 1, as in the weight
// gradient of a depthwise convolution) whose lhs input feature dim is tiled:
// that dim is contracted with the kernel's input feature dim, so each
// partition convolves its slice of both and the results are partial sums,
// reduced by Reshard. The grouped dims stay whole, so the group attributes
// keep their meaning. Returns false when the lhs does not tile that dim.
bool TryGroupedFeatureContraction(SpmdContext& ctx, const Instruction& instr) {
  const Attributes& a = instr.attrs();
  if (!a.conv_dnums || instr.operand_count() != 2 || a.batch_group_count == 1 ||
      a.feature_group_count != 1)
    return false;
  const ConvolutionDimensionNumbers& dn = *a.conv_dnums;
  const PartitionedValue& lhs0 = ctx.Get(instr.operand(0));
  const PartitionedValue& rhs0 = ctx.Get(instr.operand(1));
  if (!Usable(lhs0.sharding) || lhs0.sharding.TileDim(dn.input_feature_dimension) == 1)
    return false;
  const Shape& lhs_shape = instr.operand(0)->shape();
  const Shape& rhs_shape = instr.operand(1)->shape();
  std::vector<int64_t> others;
  for (int64_t d = 0; d < lhs_shape.rank(); ++d)
    if (d != dn.input_feature_dimension) others.push_back(d);
  Sharding lhs_target = PartiallyReplicateTiledShardingOnDims(lhs0.sharding, others);
  std::vector<int64_t> rhs_to_lhs(rhs_shape.rank(), -1);
  rhs_to_lhs[dn.kernel_input_feature_dimension] = dn.input_feature_dimension;
  Sharding rhs_target = ProjectSharding(lhs_target, rhs_to_lhs);
  SpmdBuilder& b = ctx.b;
  PartitionedValue lhs = Reshard(b, lhs0, lhs_target);
  PartitionedValue rhs = Reshard(b, rhs0, rhs_target);
  // Uneven tiles: padding must contribute zero to the sums.
  Instruction* zero = b.Zero(lhs_shape.element_type());
  lhs.hlo = MaskPadding(b, lhs, {dn.input_feature_dimension}, zero);
  rhs.hlo = MaskPadding(b, rhs, {dn.kernel_input_feature_dimension}, zero);
  std::vector<int64_t> none(instr.shape().rank(), -1);
  Sharding partial = ProjectSharding(lhs_target, none, SubgroupType::kUnreduced);
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), partial), {lhs.hlo, rhs.hlo});
  SpmdBuilder::ScopedCause rule(b, instr, "contracted input feature sharded -> partial sums");
  ctx.Set(instr, Reshard(b, {r, instr.shape(), partial}, ctx.ShardingOf(instr)));
  return true;
}


// A grouped convolution (feature_group_count or batch_group_count G > 1)
// partitioned along its groups, as XLA does: the group dim is the lhs input
// feature dim (feature groups) or the lhs batch dim (batch groups), the
// kernel's output feature dim and the result's feature dim, all group-major,
// so k tiles of each (k dividing G) hold the same G / k whole groups and
// every partition runs a convolution with G / k groups. Batch groups also
// contract the input feature dims (partial sums, reduced by Reshard);
// feature groups keep the batch dim parallel. The layout is planned per
// mesh axis like a dot (so the operands' tiling is kept where it fits and
// the result is resharded), spatial dims whole. Returns false when the plan
// splits no group.
bool TryGroupPartitionedConvolution(SpmdContext& ctx, const Instruction& instr) {
  const Attributes& a = instr.attrs();
  if (!a.conv_dnums || instr.operand_count() != 2) return false;
  const int64_t fg = a.feature_group_count, bg = a.batch_group_count;
  if ((fg > 1) == (bg > 1)) return false;  // ungrouped, or both (not valid HLO)
  const int64_t groups = std::max(fg, bg);
  const ConvolutionDimensionNumbers& dn = *a.conv_dnums;
  const Sharding out = ctx.ShardingOf(instr);
  if (!out.IsReplicated() && !Usable(out)) return false;
  const Shape& lhs_shape = instr.operand(0)->shape();
  const Shape& rhs_shape = instr.operand(1)->shape();
  const Sharding ls = NormalizeForPartitioning(ctx.Get(instr.operand(0)).sharding);
  const Sharding rs = NormalizeForPartitioning(ctx.Get(instr.operand(1)).sharding);
  if ((!ls.IsReplicated() && !Usable(ls)) || (!rs.IsReplicated() && !Usable(rs))) return false;
  // A result tiled along spatial dims is the halo path's case (which also
  // splits feature groups), unless the operands already split batch groups
  // (which that path would gather): then the groups stay split and the
  // result is resharded.
  const int64_t lhs_group_dim = fg > 1 ? dn.input_feature_dimension : dn.input_batch_dimension;
  const bool operands_split_groups =
      (ls.IsTiled() && ls.TileDim(lhs_group_dim) > 1) ||
      (rs.IsTiled() && rs.TileDim(dn.kernel_output_feature_dimension) > 1);
  for (int64_t od : dn.output_spatial_dimensions)
    if (out.IsTiled() && out.TileDim(od) > 1 && (fg > 1 || !operands_split_groups)) return false;
  // Iteration dims: 0 = groups, 1 = batch (feature groups) or contracted
  // input feature (batch groups).
  std::vector<int64_t> lhs_to_iter(lhs_shape.rank(), -1), rhs_to_iter(rhs_shape.rank(), -1),
      out_to_iter(instr.shape().rank(), -1);
  rhs_to_iter[dn.kernel_output_feature_dimension] = 0;
  out_to_iter[dn.output_feature_dimension] = 0;
  if (fg > 1) {
    lhs_to_iter[dn.input_feature_dimension] = 0;
    lhs_to_iter[dn.input_batch_dimension] = 1;
    out_to_iter[dn.output_batch_dimension] = 1;
  } else {
    lhs_to_iter[dn.input_batch_dimension] = 0;
    lhs_to_iter[dn.input_feature_dimension] = 1;
    rhs_to_iter[dn.kernel_input_feature_dimension] = 1;
  }
  const ContractionSpace space =
      MakeContractionSpace(instr, lhs_to_iter, rhs_to_iter, out_to_iter, 2);
  const Sharding plan_out = out.IsReplicated() ? Sharding::Replicate() : out;
  std::optional<Sharding> it = PlanByMeshAxes(space, lhs_shape, rhs_shape, instr.shape(), ls,
                                              rs, plan_out, ctx.num_partitions);
  if (!it || !it->IsTiled()) return false;
  // A tiling that does not divide the groups would split one.
  const int64_t k = it->TileDim(0);
  if (k <= 1 || groups % k != 0) return false;
  const Sharding lt = ProjectSharding(*it, lhs_to_iter);
  const Sharding rt = ProjectSharding(*it, rhs_to_iter);
  const Sharding partial = ProjectSharding(*it, out_to_iter, SubgroupType::kUnreduced);
  SpmdBuilder& b = ctx.b;
  SpmdBuilder::ScopedCause rule(b, instr, "groups split over partitions");
  PartitionedValue lhs = ctx.OperandAs(instr, 0, lt);
  PartitionedValue rhs = ctx.OperandAs(instr, 1, rt);
  if (bg > 1) {
    // Uneven contracted feature tiles: padding must add nothing.
    Instruction* zero = b.Zero(lhs_shape.element_type());
    if (HasPadding(lhs, {dn.input_feature_dimension}))
      lhs.hlo = MaskPadding(b, lhs, {dn.input_feature_dimension}, zero);
    if (HasPadding(rhs, {dn.kernel_input_feature_dimension}))
      rhs.hlo = MaskPadding(b, rhs, {dn.kernel_input_feature_dimension}, zero);
  }
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), partial), {lhs.hlo, rhs.hlo});
  if (fg > 1) r->mutable_attrs().feature_group_count = groups / k;
  else r->mutable_attrs().batch_group_count = groups / k;
  ctx.Set(instr, Reshard(b, {r, instr.shape(), partial}, out));
  return true;
}

}  // namespace

Status HandleConvolution(SpmdContext& ctx, const Instruction& instr) {
  if (TryGroupPartitionedConvolution(ctx, instr)) return Status::Ok();
  if (TrySpatialConvolution(ctx, instr)) return Status::Ok();
  if (TrySpatialContraction(ctx, instr)) return Status::Ok();
  if (TryGroupedFeatureContraction(ctx, instr)) return Status::Ok();
  const Attributes& a = instr.attrs();
  if (!a.conv_dnums || a.feature_group_count != 1 || a.batch_group_count != 1 ||
      instr.operand_count() != 2)
    return ctx.Fallback(instr, "grouped convolution");
  // Iteration space: the first three factors of the convolution's rule,
  // [batch, output feature, input feature]; spatial dims are taken whole.
  std::vector<Factor> factors = GetOpShardingRule(instr).factors;
  factors.resize(3);
  return PartitionContraction(ctx, instr, ContractionSpaceOf(factors, instr));
}

}  // namespace meshsplit::spmd
