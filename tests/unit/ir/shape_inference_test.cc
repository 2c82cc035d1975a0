// Shape inference on small parsed modules: the inferred shape of the ROOT of
// the entry computation, for the opcodes whose rules do arithmetic (dot
// ordering, windows with dilation, gather/scatter, collectives, bitcast,
// fft, pad with negative and interior padding).
#include "ir/shape_inference.h"

#include <gtest/gtest.h>

#include "infer_root.h"
#include "ir/computation.h"
#include "ir/verifier.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

using irtest::InferRoot;
using irtest::Contains;

const char kAdd[] = R"(
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
)";

TEST(ShapeInferenceTest, DotOrdersBatchThenLhsFreeThenRhsFree) {
  EXPECT_EQ(InferRoot(R"(
  a = f32[4,2,5,3] parameter(0)
  b = f32[3,6,4] parameter(1)
  ROOT d = f32[4,2,5,6] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={2}, lhs_contracting_dims={3}, rhs_contracting_dims={0})"),
            "f32[4,2,5,6]");
}

TEST(ShapeInferenceTest, DotUsesDeclaredElementType) {
  EXPECT_EQ(InferRoot(R"(
  a = bf16[2,3] parameter(0)
  b = bf16[3,4] parameter(1)
  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0})"),
            "f32[2,4]");
}

TEST(ShapeInferenceTest, RaggedDotInEachMode) {
  // Ragged non-contracting: the rhs group dim (0, of size 3 = the groups)
  // is not in the result; rhs's other free dim is, after lhs's.
  EXPECT_EQ(InferRoot(R"(
  a = f32[2,5,6] parameter(0)
  b = f32[3,2,6,8] parameter(1)
  c = s32[2,3] parameter(2)
  ROOT d = f32[2,5,8] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0})"),
            "f32[2,5,8]");
  // Ragged contracting: one result per group, in front.
  EXPECT_EQ(InferRoot(R"(
  a = f32[4,6] parameter(0)
  b = f32[6,8] parameter(1)
  c = s32[3] parameter(2)
  ROOT d = f32[3,4,8] ragged-dot(a, b, c), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1})"),
            "f32[3,4,8]");
  // Ragged batch: the dot's shape.
  EXPECT_EQ(InferRoot(R"(
  a = f32[4,5,6] parameter(0)
  b = f32[4,6,8] parameter(1)
  c = s32[2] parameter(2)
  ROOT d = f32[4,5,8] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={0})"),
            "f32[4,5,8]");
  // A group dim the dot already uses, a group count that is not rhs's, a
  // missing group dim.
  EXPECT_TRUE(Contains(InferRoot(R"(
  a = f32[2,5,6] parameter(0)
  b = f32[3,2,6,8] parameter(1)
  c = s32[2,3] parameter(2)
  ROOT d = f32[2,5,8] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={1})"),
                       "rhs_group_dims 1 is not a free dimension"));
  EXPECT_TRUE(Contains(InferRoot(R"(
  a = f32[2,5,6] parameter(0)
  b = f32[3,2,6,8] parameter(1)
  c = s32[2,4] parameter(2)
  ROOT d = f32[2,5,8] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0})"),
                       "rhs group dimension has size 3 but there are 4 groups"));
  EXPECT_TRUE(Contains(InferRoot(R"(
  a = f32[5,6] parameter(0)
  b = f32[3,6,8] parameter(1)
  c = s32[3] parameter(2)
  ROOT d = f32[5,8] ragged-dot(a, b, c), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0})"),
                       "needs one rhs_group_dims"));
}

TEST(ShapeInferenceTest, BlockScaledDotIsItsDot) {
  // Rank 3: dim 0 is the batch dim, the last dims contract; the scales block
  // each dim (32 along the contracting dim, 1 elsewhere).
  EXPECT_EQ(InferRoot(R"(
  a = f8e4m3fn[2,4,64] parameter(0)
  b = f8e4m3fn[2,6,64] parameter(1)
  sa = f8e8m0fnu[2,4,2] parameter(2)
  sb = f8e8m0fnu[2,6,2] parameter(3)
  ROOT d = f32[2,4,6] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot")"),
            "f32[2,4,6]");
  EXPECT_EQ(InferRoot(R"(
  a = f8e4m3fn[4,64] parameter(0)
  b = f8e4m3fn[6,64] parameter(1)
  sa = f8e8m0fnu[4,2] parameter(2)
  sb = f8e8m0fnu[3,2] parameter(3)
  ROOT d = bf16[4,6] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot")"),
            "bf16[4,6]");
  // A scale that does not block its operand, one of another rank, an
  // integer result.
  EXPECT_TRUE(Contains(InferRoot(R"(
  a = f8e4m3fn[4,64] parameter(0)
  b = f8e4m3fn[6,64] parameter(1)
  sa = f8e8m0fnu[4,3] parameter(2)
  sb = f8e8m0fnu[6,2] parameter(3)
  ROOT d = f32[4,6] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot")"),
                       "does not divide its operand f8e4m3fn[4,64] into blocks along dim 1"));
  EXPECT_TRUE(Contains(InferRoot(R"(
  a = f8e4m3fn[4,64] parameter(0)
  b = f8e4m3fn[6,64] parameter(1)
  sa = f8e8m0fnu[4,2] parameter(2)
  sb = f8e8m0fnu[2] parameter(3)
  ROOT d = f32[4,6] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot")"),
                       "rhs scale f8e8m0fnu[2] must have the rank of its operand"));
  EXPECT_TRUE(Contains(InferRoot(R"(
  a = f8e4m3fn[4,64] parameter(0)
  b = f8e4m3fn[6,64] parameter(1)
  sa = f8e8m0fnu[4,2] parameter(2)
  sb = f8e8m0fnu[6,2] parameter(3)
  ROOT d = s32[4,6] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot")"),
                       "needs a floating-point result"));
}

TEST(ShapeInferenceTest, ConvolutionWithDilationAndGroups) {
  // Input 10 with lhs dilation 2 -> 19, pad 1_1 -> 21, window 3 dilated by 2
  // -> 5, stride 2 -> (21-5)/2+1 = 9.
  EXPECT_EQ(InferRoot(R"(
  x = f32[2,10,6] parameter(0)
  k = f32[3,2,9] parameter(1)
  ROOT c = f32[2,9,9] convolution(x, k), window={size=3 stride=2 pad=1_1 lhs_dilate=2 rhs_dilate=2}, dim_labels=b0f_0io->b0f, feature_group_count=3)"),
            "f32[2,9,9]");
}

TEST(ShapeInferenceTest, ConvolutionBatchGroupCount) {
  EXPECT_EQ(InferRoot(R"(
  x = f32[8,5,5,3] parameter(0)
  k = f32[3,3,3,4] parameter(1)
  ROOT c = f32[2,3,3,4] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=4)"),
            "f32[2,3,3,4]");
}

TEST(ShapeInferenceTest, ReduceWindowWithBaseDilationAndNegativePadding) {
  // 5 dilated by 2 -> 9, pad -1_2 -> 10, window 2 stride 3 -> 3.
  EXPECT_EQ(InferRoot(R"(
  a = f32[5] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[3] reduce-window(a, z), window={size=2 stride=3 pad=-1_2 lhs_dilate=2}, to_apply=add)",
                      kAdd),
            "f32[3]");
}

TEST(ShapeInferenceTest, VariadicReduce) {
  EXPECT_EQ(InferRoot(R"(
  a = f32[4,8] parameter(0)
  i = s32[4,8] parameter(1)
  z = f32[] constant(0)
  zi = s32[] constant(0)
  ROOT r = (f32[8], s32[8]) reduce(a, i, z, zi), dimensions={0}, to_apply=argmax)",
                      R"(
argmax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  m = f32[] maximum(a, b)
  mi = s32[] maximum(ai, bi)
  ROOT t = (f32[], s32[]) tuple(m, mi)
}
)"),
            "(f32[8], s32[8])");
}

TEST(ShapeInferenceTest, ReducerMayMixFloatPrecision) {
  // bf16 values reduced into an f32 accumulator, as XLA allows.
  EXPECT_EQ(InferRoot(R"(
  a = bf16[4,8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(a, z), dimensions={1}, to_apply=mixed)",
                      R"(
mixed {
  acc = f32[] parameter(0)
  x = bf16[] parameter(1)
  xf = f32[] convert(x)
  ROOT s = f32[] add(acc, xf)
}
)"),
            "f32[4]");
  // An integer value parameter is not a precision difference.
  EXPECT_NE(InferRoot(R"(
  a = f32[4,8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(a, z), dimensions={1}, to_apply=bad)",
                      R"(
bad {
  acc = f32[] parameter(0)
  x = s32[] parameter(1)
  xf = f32[] convert(x)
  ROOT s = f32[] add(acc, xf)
}
)").find("parameter 1 of to_apply computation %bad has shape s32[]"),
            std::string::npos);
}

TEST(ShapeInferenceTest, PadNegativeAndInterior) {
  // 1 - 2 + 5 + 4*1 = 8.
  EXPECT_EQ(InferRoot(R"(
  a = f32[5,3] parameter(0)
  z = f32[] constant(0)
  ROOT p = f32[8,3] pad(a, z), padding=-2_1_1x0_0)"),
            "f32[8,3]");
}

TEST(ShapeInferenceTest, GatherWithBatchDims) {
  EXPECT_EQ(InferRoot(R"(
  a = f32[10,9,8] parameter(0)
  i = s32[5,7,2] parameter(1)
  ROOT g = f32[5,7,9,1] gather(a, i), offset_dims={2,3}, collapsed_slice_dims={0}, start_index_map={0,2}, index_vector_dim=2, slice_sizes={1,9,1})"),
            "f32[5,7,9,1]");
}

TEST(ShapeInferenceTest, ScatterTakesOperandShape) {
  EXPECT_EQ(InferRoot(R"(
  a = f32[8,4] parameter(0)
  i = s32[3] parameter(1)
  u = f32[3,4] parameter(2)
  ROOT s = f32[8,4] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add)",
                      kAdd),
            "f32[8,4]");
}

TEST(ShapeInferenceTest, CollectivesUseGroupSize) {
  EXPECT_EQ(InferRoot(R"(
  a = f32[2,3] parameter(0)
  ROOT ag = f32[2,12] all-gather(a), replica_groups=[2,4]<=[8], dimensions={1}, channel_id=1, use_global_device_ids=true)",
                      "", "HloModule m, num_partitions=8"),
            "f32[2,12]");
  EXPECT_EQ(InferRoot(R"(
  a = f32[16] parameter(0)
  ROOT rs = f32[8] reduce-scatter(a), replica_groups={{0,1},{2,3}}, dimensions={0}, to_apply=add, channel_id=1)",
                      kAdd, "HloModule m, num_partitions=4"),
            "f32[8]");
  EXPECT_EQ(InferRoot(R"(
  a = u32[] partition-id()
  ROOT r = u32[] copy(a))"),
            "u32[]");
}

TEST(ShapeInferenceTest, AllReduceMayHaveGroupsOfDifferentSizes) {
  EXPECT_EQ(InferRoot(R"(
  a = f32[8] parameter(0)
  ROOT ar = f32[8] all-reduce(a), replica_groups={{0,1,2},{3}}, to_apply=add, channel_id=1, use_global_device_ids=true)",
                      kAdd, "HloModule m, num_partitions=4"),
            "f32[8]");
}

TEST(ShapeInferenceTest, BitcastConvertChangesMinorDimension) {
  EXPECT_EQ(InferRoot(R"(
  a = f32[4] parameter(0)
  ROOT b = u8[4,4] bitcast-convert(a))"),
            "u8[4,4]");
  EXPECT_EQ(InferRoot(R"(
  a = u16[3,2] parameter(0)
  ROOT b = f32[3] bitcast-convert(a))"),
            "f32[3]");
}

TEST(ShapeInferenceTest, CompareAndSelect) {
  EXPECT_EQ(InferRoot(R"(
  a = s32[4] parameter(0)
  b = s32[4] parameter(1)
  ROOT c = pred[4] compare(a, b), direction=LT)"),
            "pred[4]");
  EXPECT_EQ(InferRoot(R"(
  p = pred[] parameter(0)
  a = f32[4] parameter(1)
  ROOT s = f32[4] select(p, a, a))"),
            "f32[4]");
}

TEST(ShapeInferenceTest, AbsOfComplexIsReal) {
  EXPECT_EQ(InferRoot(R"(
  a = c64[3] parameter(0)
  ROOT r = f32[3] abs(a))"),
            "f32[3]");
}

TEST(ShapeInferenceTest, DynamicSliceOfScalarNeedsNoIndices) {
  // Built directly: XLA allows this form (the partitioner emits it), the
  // text parser does not accept it yet.
  Computation c("c");
  Instruction* p = c.AddInstruction(std::make_unique<Instruction>(
      Opcode::kParameter, "p", Shape(PrimitiveType::F32, {})));
  auto ds = std::make_unique<Instruction>(Opcode::kDynamicSlice, "ds",
                                          Shape(PrimitiveType::F32, {}));
  ds->AppendOperand(p);
  Instruction* d = c.AddInstruction(std::move(ds));
  StatusOr<Shape> shape = InferShape(*d);
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  EXPECT_EQ(shape->ToString(false), "f32[]");
}

TEST(ShapeInferenceTest, ErrorsNameOpcodeInstructionAndValues) {
  EXPECT_EQ(InferRoot(R"(
  a = f32[2,4] parameter(0)
  b = f32[5,3] parameter(1)
  ROOT d = f32[2,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0})"),
            "error: dot %d: lhs contracting dimension 1 has size 4 but rhs "
            "contracting dimension 0 has size 5");
}

TEST(VerifierTest, ReportsEveryBadInstructionInLineOrder) {
  auto module = ParseModuleText(R"(HloModule m

ENTRY e {
  a = f32[4] parameter(0)
  b = f32[5] negate(a)
  c = f32[4] reshape(b)
  ROOT d = s32[4] add(a, a)
}
)");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  std::vector<Status> errors = VerifyModuleAll(**module);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].loc().line, 5);
  EXPECT_NE(errors[0].message().find("negate %b: declared shape f32[5]"),
            std::string::npos);
  EXPECT_EQ(errors[1].loc().line, 6);
  EXPECT_EQ(errors[2].loc().line, 7);
  EXPECT_FALSE(VerifyModule(**module).ok());
}

TEST(VerifierTest, AcceptsWellTypedModule) {
  auto module = ParseModuleText(std::string("HloModule m\n") + kAdd + R"(
ENTRY e {
  a = f32[4,8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(a, z), dimensions={1}, to_apply=add
}
)");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  Status s = VerifyModule(**module);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace
}  // namespace meshsplit
