// convolution: partitioned along batch and feature dims through the dot
// handler's iteration-space core (handlers/dot.cc), with spatial dims whole.
#include "partitioner/context.h"

namespace meshsplit::spmd {

Status HandleConvolution(SpmdContext& ctx, const Instruction& instr) {
  const Attributes& a = instr.attrs();
  if (!a.conv_dnums || a.feature_group_count != 1 || a.batch_group_count != 1 ||
      instr.operand_count() != 2)
    return ctx.Fallback(instr, "grouped convolution");
  const ConvolutionDimensionNumbers& dn = *a.conv_dnums;
  // Iteration space [batch, output feature, input feature]; spatial dims
  // are taken whole (no halo exchange yet).
  // TODO(partitioner-core): windowed spatial partitioning with halos.
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
