// Tests of the differential verifier on hand-written partitioned modules: a
// correct one passes, a wrong one is reported with the first diverging
// instruction; comparison tolerances and random inputs.
#include "verify/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "text/parser.h"

#include "parse_for_test.h"

namespace meshsplit {
namespace {

using spmd_test::Parse;

constexpr char kOriginal[] = R"(
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT sum = f32[] add(x, y)
}
ENTRY e {
  a = f32[5,4] parameter(0), sharding={devices=[2,1]0,1}
  e = f32[5,4] exponential(a), sharding={devices=[2,1]0,1}
  zero = f32[] constant(0)
  r = f32[5] reduce(e, zero), dimensions={1}, to_apply=add, sharding={devices=[2]0,1}
  ROOT s = f32[] reduce(r, zero), dimensions={0}, to_apply=add, sharding={replicated}
})";

// Rows split 3+2; the padding row is masked before the cross-device sum.
// BODY is spliced in to make correct and broken variants.
std::string Partitioned(const std::string& r_operand, bool mask) {
  std::string text = R"(
HloModule m, num_partitions=2
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT sum = f32[] add(x, y)
}
ENTRY e {
  a = f32[3,4] parameter(0), sharding={devices=[2,1]0,1}
  e = f32[3,4] exponential(a)
  zero = f32[] constant(0)
  r = f32[3] reduce()" + r_operand + R"(, zero), dimensions={1}, to_apply=add
  iota = s32[3] iota(), iota_dimension=0
  pid = u32[] partition-id()
  pids = s32[] convert(pid)
  three = s32[] constant(3)
  off = s32[] multiply(pids, three)
  offb = s32[3] broadcast(off), dimensions={}
  idx = s32[3] add(iota, offb)
  five = s32[] constant(5)
  fiveb = s32[3] broadcast(five), dimensions={}
  valid = pred[3] compare(idx, fiveb), direction=LT
  zerob = f32[3] broadcast(zero), dimensions={}
  masked = f32[3] select(valid, r, zerob)
  part = f32[] reduce()" + std::string(mask ? "masked" : "r") + R"(, zero), dimensions={0}, to_apply=add
  ROOT s = f32[] all-reduce(part), replica_groups={}, to_apply=add, channel_id=1, sharding={replicated}
})";
  return text;
}

TEST(VerifyTest, CorrectPartitionPasses) {
  auto original = Parse(kOriginal);
  auto partitioned = Parse(Partitioned("e", /*mask=*/true));
  ASSERT_TRUE(original && partitioned);
  VerifyOptions options;
  options.num_partitions = 2;
  for (uint64_t seed : {0, 1, 2}) {
    options.seed = seed;
    VerifyResult r = VerifyPartitioned(*original, *partitioned, options);
    EXPECT_TRUE(r.ok()) << r.status << ": " << r.message;
  }
  // The probe roots are gone again.
  EXPECT_EQ(original->entry()->root()->name(), "s");
  EXPECT_EQ(partitioned->entry()->root()->name(), "s");
}

TEST(VerifyTest, MissingMaskIsCaughtByPoison) {
  auto original = Parse(kOriginal);
  auto partitioned = Parse(Partitioned("e", /*mask=*/false));
  ASSERT_TRUE(original && partitioned);
  VerifyOptions options;
  VerifyResult r = VerifyPartitioned(*original, *partitioned, options);
  EXPECT_EQ(r.status, "mismatch");
  EXPECT_NE(r.message.find("nan"), std::string::npos) << r.message;
  // Intermediates agree up to the root (padding is dropped when assembling).
  EXPECT_EQ(r.divergent_instruction, "s") << r.divergence_detail;
}

TEST(VerifyTest, FirstDivergingInstructionIsNamed) {
  auto original = Parse(kOriginal);
  auto partitioned = Parse(Partitioned("a", /*mask=*/true));  // reduces a, not e
  ASSERT_TRUE(original && partitioned);
  VerifyOptions options;
  VerifyResult r = VerifyPartitioned(*original, *partitioned, options);
  EXPECT_EQ(r.status, "mismatch");
  EXPECT_EQ(r.divergent_instruction, "r") << r.divergence_detail;
  EXPECT_NE(r.divergence_detail.find("%r["), std::string::npos) << r.divergence_detail;
}

TEST(CompareTest, TolerancesAndNaN) {
  Literal ref(Shape(PrimitiveType::F32, {3}));
  ref.SetDouble(0, 1.0);
  ref.SetDouble(1, -2.0);
  ref.SetDouble(2, std::numeric_limits<double>::quiet_NaN());
  Literal got = ref;
  CompareOptions o;
  EXPECT_TRUE(CompareValues(ref, got, "out", o).ok);
  got.SetDouble(0, 1.0 + 1e-7);  // one ulp: fine
  EXPECT_TRUE(CompareValues(ref, got, "out", o).ok);
  got.SetDouble(0, 1.001);  // far off for K=1
  Comparison c = CompareValues(ref, got, "out", o);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.first_mismatch.rfind("out[0]", 0), 0u) << c.first_mismatch;
  o.reduction_length = 1 << 20;  // long reductions allow more
  got.SetDouble(0, 1.0001);
  EXPECT_TRUE(CompareValues(ref, got, "out", o).ok);
  got = ref;
  got.SetDouble(2, 0.0);  // reference NaN must stay NaN
  EXPECT_FALSE(CompareValues(ref, got, "out", o).ok);
  got = ref;
  got.SetDouble(1, std::numeric_limits<double>::quiet_NaN());
  EXPECT_FALSE(CompareValues(ref, got, "out", o).ok);
}

TEST(CompareTest, IntegersAreExact) {
  Literal ref(Shape(PrimitiveType::S32, {2}));
  ref.SetInt(0, 7);
  Literal got = ref;
  got.SetInt(1, 1);
  Comparison c = CompareValues(ref, got, "x", {});
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.first_mismatch, "x[1]: got 1, expected 0");
}

TEST(RandomInputsTest, SeededAndInRange) {
  auto m = Parse(R"(
HloModule m
ENTRY e {
  a = f32[64] parameter(0)
  b = s32[64] parameter(1)
  c = pred[64] parameter(2)
  ROOT t = (f32[64], s32[64], pred[64]) tuple(a, b, c)
})");
  ASSERT_TRUE(m);
  auto x = RandomInputs(*m->entry(), 5), y = RandomInputs(*m->entry(), 5),
       z = RandomInputs(*m->entry(), 6);
  ASSERT_EQ(x.size(), 3u);
  EXPECT_TRUE(x[0].BitwiseEqual(y[0]));
  EXPECT_FALSE(x[0].BitwiseEqual(z[0]));
  bool saw_true = false, saw_false = false;
  for (int i = 0; i < 64; ++i) {
    EXPECT_LE(std::fabs(x[0].GetDouble(i)), 1.0);
    EXPECT_LE(std::abs(x[1].GetInt(i)), 4);
    (x[2].GetInt(i) ? saw_true : saw_false) = true;
  }
  EXPECT_TRUE(saw_true && saw_false);
}

}  // namespace
}  // namespace meshsplit

namespace meshsplit {
namespace {

// The partitioner's own output, with a bug injected after the contracted dot:
// the locator must skip the same-named partial-sum dot and name the first
// instruction that really diverges.
TEST(VerifyTest, LocatorSkipsPartialSumsUnderOriginalNames) {
  auto original = Parse(R"(
HloModule m
ENTRY e {
  a = f32[4,8] parameter(0), sharding={devices=[1,2]<=[2]}
  b = f32[8,3] parameter(1), sharding={devices=[2,1]<=[2]}
  d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
  n = f32[4,3] negate(d), sharding={replicated}
  ROOT t = f32[4,3] tanh(n), sharding={replicated}
})");
  auto partitioned = Parse(R"(
HloModule m, num_partitions=2
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[4,4] parameter(0), sharding={devices=[1,2]<=[2]}
  b = f32[4,3] parameter(1), sharding={devices=[2,1]<=[2]}
  d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  all-reduce = f32[4,3] all-reduce(d), channel_id=1, replica_groups=[1,2]<=[2], to_apply=sum
  n = f32[4,3] abs(all-reduce)
  ROOT t = f32[4,3] tanh(n), sharding={replicated}
})");
  ASSERT_TRUE(original && partitioned);
  VerifyOptions options;
  VerifyResult r = VerifyPartitioned(*original, *partitioned, options);
  EXPECT_EQ(r.status, "mismatch");
  EXPECT_EQ(r.divergent_instruction, "n") << r.divergence_detail;
}

}  // namespace
}  // namespace meshsplit
