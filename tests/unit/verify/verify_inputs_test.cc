// Tests of how verify makes its inputs: the fan-in init (which parameters
// count as weights, their fan-in and the spread of their values) and given
// inputs replacing generated ones; and of the divergence report for a
// comparison flipped by a difference within the tolerance.
#include <gtest/gtest.h>

#include <cmath>

#include "verify/verify.h"
#include "text/parser.h"

#include "parse_for_test.h"

namespace meshsplit {
namespace {

using spmd_test::Parse;

// x: images; k: a 3x3 kernel with 8 input features (fan-in 72), reached
// through a transpose; w: a dense weight contracted over 64 in the forward
// dot and over 16 in the backward-style dot (fan-in: the smaller, 16);
// b: a bias (not weights); n: an s32 count.
constexpr char kNet[] = R"(
HloModule m
ENTRY e {
  x = f32[2,8,6,6] parameter(0)
  k = f32[3,3,8,4] parameter(1)
  kt = f32[4,8,3,3] transpose(k), dimensions={3,2,0,1}
  c = f32[2,4,6,6] convolution(x, kt), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01
  w = f32[64,16] parameter(2)
  a = f32[2,64] parameter(3)
  d = f32[2,16] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  g = f32[2,16] parameter(4)
  back = f32[2,64] dot(g, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  b = f32[16] parameter(5)
  n = s32[] parameter(6)
  ROOT t = (f32[2,4,6,6], f32[2,16], f32[2,64], f32[16], s32[]) tuple(c, d, back, b, n)
})";

TEST(VerifyInputsTest, FanInsOfWeights) {
  auto m = Parse(kNet);
  ASSERT_NE(m, nullptr);
  std::vector<int64_t> f = WeightFanIns(*m->entry());
  ASSERT_EQ(f.size(), 7u);
  EXPECT_EQ(f[0], 0);       // the convolution's input is not weights
  EXPECT_EQ(f[1], 8 * 9);   // kernel input features x window
  EXPECT_EQ(f[2], 16);      // smallest contraction over the two dots
  EXPECT_EQ(f[3], 64);      // a dot operand counts as weights too
  EXPECT_EQ(f[4], 16);
  EXPECT_EQ(f[5], 0);
  EXPECT_EQ(f[6], 0);       // not a float
}

double StdDev(const Literal& l) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < l.element_count(); ++i) {
    double v = l.GetDouble(i);
    s += v;
    s2 += v * v;
  }
  double n = static_cast<double>(l.element_count());
  return std::sqrt(s2 / n - (s / n) * (s / n));
}

TEST(VerifyInputsTest, FanInInitScalesOnlyWeights) {
  auto m = Parse(kNet);
  ASSERT_NE(m, nullptr);
  std::vector<Literal> uniform = GenerateInputs(*m->entry(), 3, InputInit::kUniform);
  std::vector<Literal> fan_in = GenerateInputs(*m->entry(), 3, InputInit::kFanIn);
  ASSERT_EQ(fan_in.size(), 7u);
  // Uniform [-1, 1] has std 1/sqrt(3); the kernel's should be 1/sqrt(72)
  // (288 samples: within 15%).
  EXPECT_NEAR(StdDev(uniform[1]), 1 / std::sqrt(3.0), 0.1);
  EXPECT_NEAR(StdDev(fan_in[1]), 1 / std::sqrt(72.0), 0.15 / std::sqrt(72.0));
  EXPECT_NEAR(StdDev(fan_in[2]), 1 / std::sqrt(16.0), 0.1 / std::sqrt(16.0));
  // Non-weights keep exactly their uniform values.
  EXPECT_TRUE(fan_in[0].BitwiseEqual(uniform[0]));
  EXPECT_TRUE(fan_in[5].BitwiseEqual(uniform[5]));
  EXPECT_TRUE(fan_in[6].BitwiseEqual(uniform[6]));
  // And the weights do change.
  EXPECT_FALSE(fan_in[1].BitwiseEqual(uniform[1]));
}

TEST(VerifyInputsTest, GivenInputsReplaceGeneratedOnes) {
  auto m = Parse(kNet);
  ASSERT_NE(m, nullptr);
  VerifyOptions options;
  options.seed = 5;
  auto given = std::make_shared<std::map<int64_t, Literal>>();
  Literal ones(Shape(PrimitiveType::F32, {16}));
  for (int64_t i = 0; i < 16; ++i) ones.SetDouble(i, 1.0);
  given->emplace(5, ones);
  options.given_inputs = given;
  StatusOr<std::vector<Literal>> in = VerifyInputs(*m->entry(), options);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_TRUE((*in)[5].BitwiseEqual(ones));
  std::vector<Literal> generated = GenerateInputs(*m->entry(), 5, InputInit::kUniform);
  EXPECT_TRUE((*in)[0].BitwiseEqual(generated[0]));

  // A given value of the wrong shape is an error naming the parameter.
  auto bad = std::make_shared<std::map<int64_t, Literal>>();
  bad->emplace(5, Literal(Shape(PrimitiveType::F32, {15})));
  options.given_inputs = bad;
  StatusOr<std::vector<Literal>> err = VerifyInputs(*m->entry(), options);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("%b"), std::string::npos) << err.status().message();
}

}  // namespace
}  // namespace meshsplit

namespace meshsplit {
namespace {

// A partitioned program that differs by 1e-6 (within the tolerance) flips a
// comparison against 0 for the one input within 1e-6 of it; the divergence
// report names the compare and shows its operands there. Also checks that
// VerifyPartitioned runs on given inputs.
TEST(VerifyInputsTest, FlippedCompareShowsItsOperands) {
  auto original = Parse(R"(
HloModule m
ENTRY e {
  p = f32[4] parameter(0), sharding={replicated}
  x = f32[4] copy(p), sharding={replicated}
  zero = f32[] constant(0)
  z = f32[4] broadcast(zero), dimensions={}, sharding={replicated}
  ROOT c = pred[4] compare(x, z), direction=GE, sharding={replicated}
})");
  auto partitioned = Parse(R"(
HloModule m, num_partitions=2
ENTRY e {
  p = f32[4] parameter(0), sharding={replicated}
  eps = f32[] constant(1e-06)
  epsb = f32[4] broadcast(eps), dimensions={}
  x = f32[4] add(p, epsb)
  zero = f32[] constant(0)
  z = f32[4] broadcast(zero), dimensions={}
  ROOT c = pred[4] compare(x, z), direction=GE, sharding={replicated}
})");
  ASSERT_NE(original, nullptr);
  ASSERT_NE(partitioned, nullptr);
  Literal x(Shape(PrimitiveType::F32, {4}));
  const double values[] = {1.0, -5e-7, -1.0, 2.0};
  for (int i = 0; i < 4; ++i) x.SetDouble(i, values[i]);
  VerifyOptions options;
  options.num_partitions = 2;
  auto given = std::make_shared<std::map<int64_t, Literal>>();
  given->emplace(0, x);
  options.given_inputs = given;
  VerifyResult r = VerifyPartitioned(*original, *partitioned, options);
  EXPECT_EQ(r.status, "mismatch") << r.message;
  EXPECT_EQ(r.divergent_instruction, "c") << r.divergence_detail;
  EXPECT_NE(r.divergence_detail.find("%c[1]"), std::string::npos) << r.divergence_detail;
  EXPECT_NE(r.divergence_detail.find("%x = -4.99999999e-07 (partitioned: 4.99999999e-07)"),
            std::string::npos)
      << r.divergence_detail;

  // Without the near-zero input nothing flips.
  x.SetDouble(1, -0.5);
  auto away = std::make_shared<std::map<int64_t, Literal>>();
  away->emplace(0, x);
  options.given_inputs = away;
  EXPECT_EQ(VerifyPartitioned(*original, *partitioned, options).status, "ok");
}

}  // namespace
}  // namespace meshsplit
