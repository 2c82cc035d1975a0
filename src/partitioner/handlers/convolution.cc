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
  const Sharding out = ctx.ShardingOf(instr);
  if (!Usable(out)) return false;
  const int64_t nsp = static_cast<int64_t>(dn.output_spatial_dimensions.size());
  if (static_cast<int64_t>(a.window->size()) != nsp) return false;
  std::vector<int64_t> tiled;
  for (int64_t k = 0; k < nsp; ++k)
    if (out.TileDim(dn.output_spatial_dimensions[k]) > 1) tiled.push_back(k);
  if (tiled.empty()) return false;
  const int64_t groups = a.feature_group_count, batch_groups = a.batch_group_count;
  const int64_t feature_tiles = out.TileDim(dn.output_feature_dimension);
  const int64_t batch_tiles = out.TileDim(dn.output_batch_dimension);
  // Grouped convolutions keep whole groups on each shard.
  if (groups > 1 && groups % feature_tiles != 0) return false;
  if (batch_groups > 1 && (feature_tiles > 1 || batch_tiles > 1)) return false;

  std::vector<WindowedDimPlan> plans(nsp);
  for (int64_t k : tiled) {
    const int64_t od = dn.output_spatial_dimensions[k];
    const int64_t out_tile = CeilDiv(instr.shape().dimensions(od), out.TileDim(od));
    std::optional<WindowedDimPlan> p = PlanWindowedDim((*a.window)[k], out_tile);
    if (!p) return false;
    plans[k] = *p;
  }

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
    windowed.hlo = ExchangeHaloWindow(b, windowed, dn.input_spatial_dimensions[k],
                                      plans[k].input, zero);
    window[k] = plans[k].local;
  }
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), out), {windowed.hlo, rhs.hlo});
  r->mutable_attrs().window = window;
  r->mutable_attrs().feature_group_count = groups / feature_tiles;
  ctx.Set(instr, {r, instr.shape(), out});
  return true;
}

}  // namespace

Status HandleConvolution(SpmdContext& ctx, const Instruction& instr) {
  if (TrySpatialConvolution(ctx, instr)) return Status::Ok();
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
