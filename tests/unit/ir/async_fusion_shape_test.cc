// Shape inference for fusion and the asynchronous pairs: XLA's start tuples
// ((operands), result, context) for async-start, (operand, result) for
// all-gather-start, (operand, result, u32[], u32[]) for
// collective-permute-start, (dest, src, u32[]) for copy-start, and what the
// dones return; plus the inputs they refuse.
#include <gtest/gtest.h>

#include "infer_root.h"
#include "ir/computation.h"
#include "ir/shape_inference.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

constexpr const char* kHelpers =
    "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
    "  ROOT c = f32[] add(a, b)\n}\n\n"
    "wrapped {\n  w0 = f32[4] parameter(0)\n  w1 = s32[2] parameter(1)\n"
    "  ROOT wr = f32[2,4] broadcast(w0), dimensions={1}\n}\n\n";

// The inferred shape (no layout) of the entry root of a module with `body`
// after the helper computations, or the parse / inference error.
std::string InferRoot(const std::string& body) { return irtest::InferRoot(body, kHelpers); }
using irtest::Contains;

TEST(AsyncFusionShapeTest, FusionReturnsItsFusedRoot) {
  EXPECT_EQ(InferRoot("  x = f32[4] parameter(0)\n  y = s32[2] parameter(1)\n"
                      "  ROOT f = f32[2,4] fusion(x, y), kind=kLoop, calls=wrapped"),
            "f32[2,4]");
  EXPECT_TRUE(Contains(InferRoot("  x = f32[4] parameter(0)\n"
                                 "  ROOT f = f32[2,4] fusion(x), kind=kLoop, calls=wrapped"),
                       "has 2 parameters but the instruction has 1 operands"));
  EXPECT_TRUE(Contains(InferRoot("  x = f32[5] parameter(0)\n  y = s32[2] parameter(1)\n"
                                 "  ROOT f = f32[2,4] fusion(x, y), kind=kLoop, calls=wrapped"),
                       "parameter 0 of fused computation %wrapped has shape f32[4]"));
}

TEST(AsyncFusionShapeTest, AsyncStartHoldsOperandsResultAndContext) {
  EXPECT_EQ(InferRoot("  x = f32[4] parameter(0)\n  y = s32[2] parameter(1)\n"
                      "  ROOT s = ((f32[4], s32[2]), f32[2,4], s32[]) async-start(x, y), "
                      "calls=wrapped"),
            "((f32[4], s32[2]), f32[2,4], s32[])");
  // Update keeps the tuple; done takes the wrapped result.
  EXPECT_EQ(InferRoot("  x = f32[4] parameter(0)\n  y = s32[2] parameter(1)\n"
                      "  s = ((f32[4], s32[2]), f32[2,4], s32[]) async-start(x, y), calls=wrapped\n"
                      "  u = ((f32[4], s32[2]), f32[2,4], s32[]) async-update(s)\n"
                      "  ROOT d = f32[2,4] async-done(u), calls=wrapped"),
            "f32[2,4]");
  EXPECT_TRUE(Contains(InferRoot("  x = f32[4] parameter(0)\n"
                                 "  ROOT d = f32[4] async-done(x)"),
                       "operand must be async-start or async-update but is parameter %x"));
  EXPECT_TRUE(Contains(InferRoot("  x = f32[4] parameter(0)\n  y = s32[2] parameter(1)\n"
                                 "  ROOT s = ((f32[4], s32[2]), f32[2,4], f32[3]) "
                                 "async-start(x, y), calls=wrapped"),
                       "context element 2 must be a scalar"));
}

TEST(AsyncFusionShapeTest, CollectiveStartsFollowXla) {
  EXPECT_EQ(InferRoot("  x = f32[4,3] parameter(0)\n"
                      "  ROOT s = f32[4,3] all-reduce-start(x), replica_groups={{0,1}}, "
                      "to_apply=sum"),
            "f32[4,3]");
  EXPECT_EQ(InferRoot("  x = f32[4,3] parameter(0)\n"
                      "  ROOT s = (f32[4,3], f32[8,3]) all-gather-start(x), "
                      "replica_groups={{0,1}}, dimensions={0}"),
            "(f32[4,3], f32[8,3])");
  EXPECT_EQ(InferRoot("  x = f32[4,3] parameter(0)\n  y = f32[2] parameter(1)\n"
                      "  ROOT s = ((f32[4,3], f32[2]), (f32[4,6], f32[4])) all-gather-start(x, y), "
                      "replica_groups={{0,1}}, dimensions={1}"),
            "error: all-gather-start %s: dimension 1 is out of range for operand 1 f32[2]");
  EXPECT_EQ(InferRoot("  x = f32[4,3] parameter(0)\n"
                      "  ROOT s = (f32[4,3], f32[4,3], u32[], u32[]) collective-permute-start(x), "
                      "source_target_pairs={{0,1},{1,0}}"),
            "(f32[4,3], f32[4,3], u32[], u32[])");
  EXPECT_EQ(InferRoot("  x = f32[4,3] parameter(0)\n"
                      "  s = (f32[4,3], f32[8,3]) all-gather-start(x), replica_groups={{0,1}}, "
                      "dimensions={0}\n"
                      "  ROOT d = f32[8,3] all-gather-done(s)"),
            "f32[8,3]");
  EXPECT_TRUE(Contains(InferRoot("  x = f32[4,3] parameter(0)\n"
                                 "  s = f32[4,3] all-reduce-start(x), replica_groups={}, "
                                 "to_apply=sum\n"
                                 "  ROOT d = f32[4,3] all-gather-done(s)"),
                       "operand must be all-gather-start but is all-reduce-start"));
}

TEST(AsyncFusionShapeTest, CopyStartHoldsDestinationSourceAndContext) {
  EXPECT_EQ(InferRoot("  x = bf16[2,5] parameter(0)\n"
                      "  ROOT s = (bf16[2,5], bf16[2,5], u32[]) copy-start(x)"),
            "(bf16[2,5], bf16[2,5], u32[])");
  EXPECT_EQ(InferRoot("  x = bf16[2,5] parameter(0)\n"
                      "  s = (bf16[2,5], bf16[2,5], u32[]) copy-start(x)\n"
                      "  ROOT d = bf16[2,5] copy-done(s)"),
            "bf16[2,5]");
}

}  // namespace
}  // namespace meshsplit
