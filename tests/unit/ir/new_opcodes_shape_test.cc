// Shape inference and attribute reading for the topk, get-dimension-size and
// add-dependency opcodes: the result shapes they must have and the inputs
// they refuse.
#include <gtest/gtest.h>

#include "infer_root.h"
#include "ir/computation.h"
#include "ir/shape_inference.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

using irtest::InferRoot;

TEST(NewOpcodesShapeTest, TopKReplacesTheLastDimWithK) {
  EXPECT_EQ(InferRoot("  x = bf16[2,3,10] parameter(0)\n"
                      "  ROOT t = (bf16[2,3,4], s32[2,3,4]) topk(x), k=4, largest=false"),
            "(bf16[2,3,4], s32[2,3,4])");
}

TEST(NewOpcodesShapeTest, TopKDefaultsToLargest) {
  auto module = ParseModuleText(
      "HloModule m\n\nENTRY e {\n  x = f32[5] parameter(0)\n"
      "  ROOT t = (f32[1], s32[1]) topk(x), k=1\n}\n");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  const Instruction& t = *(*module)->entry()->root();
  EXPECT_EQ(TopKK(t), std::optional<int64_t>(1));
  EXPECT_EQ(TopKLargest(t), std::optional<bool>(true));
}

TEST(NewOpcodesShapeTest, TopKRefusesBadK) {
  EXPECT_NE(InferRoot("  x = f32[2,5] parameter(0)\n"
                      "  ROOT t = (f32[2,6], s32[2,6]) topk(x), k=6")
                .find("k=6 is out of range"),
            std::string::npos);
  EXPECT_NE(InferRoot("  x = f32[2,5] parameter(0)\n"
                      "  ROOT t = (f32[2,2], s32[2,2]) topk(x), k=two")
                .find("malformed k="),
            std::string::npos);
  EXPECT_NE(InferRoot("  x = f32[] parameter(0)\n"
                      "  ROOT t = (f32[], s32[]) topk(x), k=0")
                .find("rank >= 1"),
            std::string::npos);
}

TEST(NewOpcodesShapeTest, GetDimensionSizeIsAnS32Scalar) {
  EXPECT_EQ(InferRoot("  x = f32[7,3] parameter(0)\n"
                      "  ROOT n = s32[] get-dimension-size(x), dimensions={0}"),
            "s32[]");
  EXPECT_NE(InferRoot("  x = f32[7,3] parameter(0)\n"
                      "  ROOT n = s32[] get-dimension-size(x), dimensions={2}")
                .find("out of range"),
            std::string::npos);
}

TEST(NewOpcodesShapeTest, AddDependencyKeepsItsValueAndWantsAToken) {
  EXPECT_EQ(InferRoot("  x = u8[4,4] parameter(0)\n  t = token[] after-all()\n"
                      "  ROOT d = u8[4,4] add-dependency(x, t)"),
            "u8[4,4]");
  EXPECT_NE(InferRoot("  x = u8[4,4] parameter(0)\n  y = u8[4,4] parameter(1)\n"
                      "  ROOT d = u8[4,4] add-dependency(x, y)")
                .find("must be a token"),
            std::string::npos);
}

}  // namespace
}  // namespace meshsplit
