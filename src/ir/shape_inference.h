// Shape inference for every HLO opcode: the result shape an instruction must
// have given its operands' shapes, its attributes and its called computations,
// with XLA's rules. The verifier compares it with the declared shape; passes
// that build new instructions use it to fill in result shapes.
#pragma once

#include <vector>

#include "ir/attributes.h"
#include "ir/instruction.h"
#include "ir/shape.h"
#include "support/status.h"

namespace meshsplit {

// The result shape of `instr`. Ops whose HLO text states the result through
// the declared shape (parameter, constant, reshape, broadcast, convert, iota,
// rng, custom-call, bitcast, ...) take what they cannot derive from
// `instr.shape()` and check the rest (element counts, broadcast dimensions,
// ...). Errors name the opcode and the instruction ("dot %d: lhs contracting
// dimension 1 has size 4 but rhs contracting dimension 0 has size 5") and
// carry instr.loc().
StatusOr<Shape> InferShape(const Instruction& instr);

// Building blocks, usable without an Instruction. Errors carry no location
// and no op prefix; InferShape adds both.

// dot: result dims are batch, lhs free, rhs free (in operand order).
StatusOr<Shape> InferDotShape(const Shape& lhs, const Shape& rhs,
                              const DotDimensionNumbers& dnums,
                              PrimitiveType result_type);

// ragged-dot (lhs, rhs, group_sizes): a dot whose lhs_ragged_dims dim is
// split into g = group_sizes' last dim groups. Ragged non-contracting: each
// group takes its own slice of rhs_group_dims (one rhs free dim of size g,
// absent from the result). Ragged contracting: the result gains a leading
// dim of size g. Ragged batch: the result is the dot's. group_sizes' leading
// dims match lhs's leading dims.
StatusOr<Shape> InferRaggedDotShape(const Shape& lhs, const Shape& rhs, const Shape& group_sizes,
                                    const DotDimensionNumbers& dnums,
                                    const std::vector<int64_t>& lhs_ragged_dims,
                                    const std::vector<int64_t>& rhs_group_dims,
                                    PrimitiveType result_type);

// The block-scaled dot custom-call (lhs, rhs, lhs_scale, rhs_scale): lhs and
// rhs of rank 2 or 3 contract their last dims (rank 3: dim 0 is the batch
// dim), and each scale has its operand's rank and divides each of its dims
// into whole blocks. The result is the dot's, in float `result_type`.
StatusOr<Shape> InferBlockScaledDotShape(const std::vector<const Shape*>& operands,
                                         PrimitiveType result_type);

// convolution with XLA's dim_labels, window and group counts. An absent
// window means size = kernel spatial size, stride 1, no padding.
StatusOr<Shape> InferConvolutionShape(const Shape& lhs, const Shape& rhs,
                                      const ConvolutionDimensionNumbers& dnums,
                                      const std::optional<Window>& window,
                                      int64_t feature_group_count,
                                      int64_t batch_group_count,
                                      PrimitiveType result_type);

// The dims of a windowed reduction/convolution output over `base` dims
// (base dilation, padding, window dilation, stride).
StatusOr<std::vector<int64_t>> InferWindowOutputDims(
    const std::vector<int64_t>& base, const Window& window);

StatusOr<Shape> InferGatherShape(const Shape& operand,
                                 const Shape& start_indices,
                                 const GatherDimensionNumbers& dnums,
                                 const std::vector<int64_t>& slice_sizes);

StatusOr<Shape> InferPadShape(const Shape& operand, const PaddingConfig& pad);

StatusOr<Shape> InferSliceShape(const Shape& operand,
                                const std::vector<SliceDimension>& slice);

StatusOr<Shape> InferTransposeShape(const Shape& operand,
                                    const std::vector<int64_t>& permutation);

StatusOr<Shape> InferConcatenateShape(const std::vector<const Shape*>& operands,
                                      int64_t dimension);

// Dims of `operand` without `reduced_dims` (which must be unique, in range).
StatusOr<std::vector<int64_t>> InferReducedDims(
    const Shape& operand, const std::vector<int64_t>& reduced_dims);

// Number of participants per group of `groups`; nullopt when the groups are
// empty (every device in one group, count not known from the instruction).
// An error when explicit groups have different sizes.
StatusOr<std::optional<int64_t>> ReplicaGroupSize(const ReplicaGroups& groups);

}  // namespace meshsplit

namespace meshsplit {

// The topk opcode's attributes, kept as text in Attributes::extra: k (nullopt
// when missing or not an integer) and largest (XLA's default: true; nullopt
// when it is neither true nor false).
std::optional<int64_t> TopKK(const Instruction& instr);
std::optional<bool> TopKLargest(const Instruction& instr);

}  // namespace meshsplit
