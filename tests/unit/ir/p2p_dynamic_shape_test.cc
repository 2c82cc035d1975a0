// Shape inference and attribute reading for send / recv and their -done
// ops, collective-broadcast, ragged-all-to-all, set-dimension-size and
// dynamic-reshape: the result shapes they must have and the inputs they
// refuse.
#include <gtest/gtest.h>

#include "infer_root.h"
#include "ir/computation.h"
#include "ir/shape_inference.h"
#include "ir/shape_inference_p2p.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

using irtest::InferRoot;
using irtest::Contains;

TEST(P2PDynamicShapeTest, SendReturnsDataContextAndToken) {
  EXPECT_EQ(InferRoot("  x = f32[2,3] parameter(0)\n  t = token[] after-all()\n"
                      "  ROOT s = (f32[2,3], u32[], token[]) send(x, t), channel_id=1"),
            "(f32[2,3], u32[], token)");
}

TEST(P2PDynamicShapeTest, DonesFinishTheirTransfer) {
  EXPECT_EQ(InferRoot("  t = token[] after-all()\n"
                      "  r = (s32[4], u32[], token[]) recv(t), channel_id=2\n"
                      "  ROOT d = (s32[4], token[]) recv-done(r), channel_id=2"),
            "(s32[4], token)");
  EXPECT_EQ(InferRoot("  x = f32[2] parameter(0)\n  t = token[] after-all()\n"
                      "  s = (f32[2], u32[], token[]) send(x, t), channel_id=1\n"
                      "  ROOT d = token[] send-done(s), channel_id=1"),
            "token");
}

TEST(P2PDynamicShapeTest, RecvNeedsAContextShapeAndAToken) {
  EXPECT_TRUE(Contains(InferRoot("  t = token[] after-all()\n"
                                 "  ROOT r = (s32[4], token[]) recv(t), channel_id=2"),
                       "result must be (data, u32[], token[])"));
  EXPECT_TRUE(Contains(InferRoot("  x = f32[2] parameter(0)\n"
                                 "  ROOT s = (f32[2], u32[], token[]) send(x, x), channel_id=1"),
                       "operand 1 must be a token"));
}

TEST(P2PDynamicShapeTest, CollectiveBroadcastKeepsItsOperandShape) {
  EXPECT_EQ(InferRoot("  x = bf16[4,2] parameter(0)\n"
                      "  ROOT b = bf16[4,2] collective-broadcast(x), replica_groups={{0,1}}"),
            "bf16[4,2]");
}

TEST(P2PDynamicShapeTest, RaggedAllToAllHasTheOutputShape) {
  const std::string operands =
      "  x = f32[5,3] parameter(0)\n  o = f32[9,3] parameter(1)\n"
      "  a = s32[4] parameter(2)\n  b = s32[4] parameter(3)\n"
      "  c = s32[4] parameter(4)\n  d = s32[4] parameter(5)\n";
  EXPECT_EQ(InferRoot(operands + "  ROOT r = f32[9,3] ragged-all-to-all(x, o, a, b, c, d), "
                                 "replica_groups={{0,1,2,3}}"),
            "f32[9,3]");
  EXPECT_TRUE(Contains(InferRoot("  x = f32[5,3] parameter(0)\n  o = f32[9,2] parameter(1)\n"
                                 "  a = s32[4] parameter(2)\n"
                                 "  ROOT r = f32[9,2] ragged-all-to-all(x, o, a, a, a, a)"),
                       "agree on every dimension but the first"));
  EXPECT_TRUE(Contains(InferRoot("  x = f32[5,3] parameter(0)\n  o = f32[9,3] parameter(1)\n"
                                 "  a = s32[4] parameter(2)\n  b = s32[2] parameter(3)\n"
                                 "  ROOT r = f32[9,3] ragged-all-to-all(x, o, a, b, a, a)"),
                       "send_sizes (operand 3) has shape s32[2]"));
}

TEST(P2PDynamicShapeTest, SetDimensionSizeMarksTheDimensionDynamic) {
  auto module = ParseModuleText(
      "HloModule m\n\nENTRY e {\n  x = f32[8,4] parameter(0)\n  n = s32[] constant(5)\n"
      "  ROOT s = f32[<=8,4] set-dimension-size(x, n), dimensions={0}\n}\n");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  StatusOr<Shape> shape = InferShape(*(*module)->entry()->root());
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->ToString(false), "f32[<=8,4]");
  EXPECT_TRUE(Contains(InferRoot("  x = f32[8,4] parameter(0)\n  n = s32[] constant(5)\n"
                                 "  ROOT s = f32[8,4] set-dimension-size(x, n), dimensions={2}"),
                       "dimension 2 is out of range"));
  EXPECT_TRUE(Contains(InferRoot("  x = f32[8,4] parameter(0)\n  n = s64[] constant(5)\n"
                                 "  ROOT s = f32[8,4] set-dimension-size(x, n), dimensions={0}"),
                       "must be an s32 scalar"));
}

TEST(P2PDynamicShapeTest, DynamicReshapeTakesOneSizePerDimension) {
  EXPECT_EQ(InferRoot("  x = f32[6,4] parameter(0)\n  a = s32[] constant(3)\n"
                      "  b = s32[] constant(8)\n"
                      "  ROOT r = f32[<=3,8] dynamic-reshape(x, a, b)"),
            "f32[<=3,8]");
  EXPECT_TRUE(Contains(InferRoot("  x = f32[6,4] parameter(0)\n  a = s32[] constant(3)\n"
                                 "  ROOT r = f32[3,8] dynamic-reshape(x, a)"),
                       "one size operand per result dimension"));
  EXPECT_TRUE(Contains(InferRoot("  x = f32[6,4] parameter(0)\n  a = s32[] constant(3)\n"
                                 "  ROOT r = f32[3,7] dynamic-reshape(x, a, a)"),
                       "hold 21"));
}

TEST(P2PDynamicShapeTest, ReadsTransferAttributes) {
  auto module = ParseModuleText(
      "HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  t = token[] after-all()\n"
      "  ROOT s = (f32[2], u32[], token[]) send(x, t), channel_id=4, is_host_transfer=true, "
      "frontend_attributes={_xla_send_recv_source_target_pairs=\"{{0,1},{1,2}}\"}\n}\n");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  const Instruction& s = *(*module)->entry()->root();
  EXPECT_TRUE(IsHostTransfer(s));
  EXPECT_EQ(s.attrs().channel_id, std::optional<int64_t>(4));
  auto pairs = SendRecvSourceTargetPairs(s);
  ASSERT_TRUE(pairs.ok());
  ASSERT_TRUE(pairs->has_value());
  EXPECT_EQ(**pairs, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}}));
}

TEST(P2PDynamicShapeTest, MalformedPairsAreAnError) {
  auto module = ParseModuleText(
      "HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  t = token[] after-all()\n"
      "  ROOT s = (f32[2], u32[], token[]) send(x, t), channel_id=4, "
      "frontend_attributes={_xla_send_recv_source_target_pairs=\"{{0,1},{1}}\"}\n}\n");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  EXPECT_FALSE(SendRecvSourceTargetPairs(*(*module)->entry()->root()).ok());
}

}  // namespace
}  // namespace meshsplit
