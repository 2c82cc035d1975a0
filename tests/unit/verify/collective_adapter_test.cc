// The collective adapter (runtime/collective_adapter.h) checks each operand of
// a collective the same way (EachOperand): the declared result must be what
// the op yields for that operand, and dims must split over the group. Run
// on 2 virtual devices through RunSpmd; results computed by hand.
#include <gtest/gtest.h>

#include <string>

#include "runtime/executor.h"

#include "parse_for_test.h"

namespace meshsplit {
namespace {

using spmd_test::Parse;

// Runs `root` over a replicated parameter a = f32[n] = {1, 2, ..., n} on 2
// devices; returns the result or the error message (prefixed "error: ").
std::string RunOnTwo(int64_t n, const std::string& root, const Shape& result) {
  const std::string text =
      "HloModule m, num_partitions=2\nadd {\n  x = f32[] parameter(0)\n  y = f32[] "
      "parameter(1)\n  ROOT s = f32[] add(x, y)\n}\nENTRY e {\n  a = f32[" +
      std::to_string(n) + "] parameter(0)\n  ROOT r = " + root + "\n}\n";
  auto m = Parse(text);
  if (!m) return "parse error";
  Literal a(Shape(PrimitiveType::F32, {n}));
  for (int64_t i = 0; i < n; ++i) a.SetDouble(i, static_cast<double>(i + 1));
  StatusOr<Literal> got = RunSpmd(*m, {a}, result, 2);
  if (!got.ok()) return "error: " + got.status().message();
  return got->ToString();
}

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const Shape kF32x4(PrimitiveType::F32, {4});

TEST(CollectiveAdapter, EachOperandOfAVariadicAllReduce) {
  std::string got = RunOnTwo(4,
                        "(f32[4], f32[4]) all-reduce(a, a), to_apply=add, "
                        "replica_groups={{0,1}}, channel_id=1",
                        Shape::Tuple({kF32x4, kF32x4}));
  EXPECT_TRUE(Has(got, "{2, 4, 6, 8}")) << got;
  EXPECT_FALSE(Has(got, "error")) << got;
}

TEST(CollectiveAdapter, GoodAllGather) {
  std::string got = RunOnTwo(4, "f32[8] all-gather(a), dimensions={0}, replica_groups={{0,1}}, "
                           "channel_id=1",
                        Shape(PrimitiveType::F32, {8}));
  EXPECT_TRUE(Has(got, "{1, 2, 3, 4, 1, 2, 3, 4}")) << got;
}

TEST(CollectiveAdapter, DeclaredResultMustBeWhatTheOpYields) {
  EXPECT_TRUE(Has(RunOnTwo(4, "f32[3] reduce-scatter(a), dimensions={0}, to_apply=add, "
                         "replica_groups={{0,1}}, channel_id=1",
                      Shape(PrimitiveType::F32, {3})),
                  "operand 0 f32[4] yields f32[2], not the declared result shape (in %r = "
                  "reduce-scatter)"));
  EXPECT_TRUE(Has(RunOnTwo(4, "f32[5] collective-permute(a), source_target_pairs={{0,1},{1,0}}, "
                         "channel_id=1",
                      Shape(PrimitiveType::F32, {5})),
                  "operand 0 f32[4] yields f32[4], not the declared result shape"));
  EXPECT_TRUE(Has(RunOnTwo(4, "f32[6] all-reduce(a), to_apply=add, replica_groups={{0,1}}, "
                         "channel_id=1",
                      Shape(PrimitiveType::F32, {6})),
                  "operand 0 f32[4] yields f32[4], not the declared result shape"));
}

TEST(CollectiveAdapter, DimMustSplitOverTheGroup) {
  EXPECT_TRUE(Has(RunOnTwo(3, "f32[1] reduce-scatter(a), dimensions={0}, to_apply=add, "
                         "replica_groups={{0,1}}, channel_id=1",
                      Shape(PrimitiveType::F32, {1})),
                  "reduce-scatter dimension 0 of f32[3] does not split into 2 blocks"));
  EXPECT_TRUE(Has(RunOnTwo(3, "f32[3] all-to-all(a), dimensions={0}, replica_groups={{0,1}}, "
                         "channel_id=1",
                      Shape(PrimitiveType::F32, {3})),
                  "all-to-all dimension 0 of f32[3] does not split into 2 blocks"));
}

}  // namespace
}  // namespace meshsplit
