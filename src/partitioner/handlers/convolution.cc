// convolution: when the result tiles spatial dims, each partition fetches
// the input rows its output tile reads (halo exchange, halo.h) and runs the
// convolution locally with the padding adjusted; otherwise the dot handler's
// iteration-space core (handlers/dot.cc) partitions batch and feature dims,
// with spatial dims whole.
#include <algorithm>

#include "partitioner/context.h"
#include "partitioner/halo.h"

namespace meshsplit::spmd {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t FloorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

bool Usable(const Sharding& s) {
  return s.IsTiled() && !s.HasManualSubgroup() && !HasUnreduced(s);
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
  const Sharding out = whole.empty() ? result : ReplicateDims(result, whole);
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
  Sharding lhs_target = ReplicateDims(lhs0.sharding, others);
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
  Sharding lhs_target = ReplicateDims(lhs0.sharding, others);
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

}  // namespace

Status HandleConvolution(SpmdContext& ctx, const Instruction& instr) {
  if (TrySpatialConvolution(ctx, instr)) return Status::Ok();
  if (TrySpatialContraction(ctx, instr)) return Status::Ok();
  if (TryGroupedFeatureContraction(ctx, instr)) return Status::Ok();
  const Attributes& a = instr.attrs();
  if (!a.conv_dnums || a.feature_group_count != 1 || a.batch_group_count != 1 ||
      instr.operand_count() != 2)
    return ctx.Fallback(instr, "grouped convolution");
  const ConvolutionDimensionNumbers& dn = *a.conv_dnums;
  // Iteration space [batch, output feature, input feature]; spatial dims
  // are taken whole.
  std::vector<int64_t> lhs_to_iter(instr.operand(0)->shape().rank(), -1);
  std::vector<int64_t> rhs_to_iter(instr.operand(1)->shape().rank(), -1);
  std::vector<int64_t> out_to_iter(instr.shape().rank(), -1);
  lhs_to_iter[dn.input_batch_dimension] = 0;
  lhs_to_iter[dn.input_feature_dimension] = 2;
  rhs_to_iter[dn.kernel_output_feature_dimension] = 1;
  rhs_to_iter[dn.kernel_input_feature_dimension] = 2;
  out_to_iter[dn.output_batch_dimension] = 0;
  out_to_iter[dn.output_feature_dimension] = 1;
  return PartitionContraction(ctx, instr, lhs_to_iter, rhs_to_iter, out_to_iter, 3,
                              {dn.input_feature_dimension},
                              {dn.kernel_input_feature_dimension});
}

}  // namespace meshsplit::spmd
