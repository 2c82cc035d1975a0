// Interpreter tests for elementwise ops. Float expectations are NumPy values
// (float32) computed outside meshsplit; integer edge cases follow XLA's
// documented semantics and are worked out by hand.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "runtime_test_util.h"
#include "support/float16.h"

namespace meshsplit::rttest {
namespace {

std::string Unary(const std::string& shape, const std::string& op, const std::string& out_shape = "") {
  return "HloModule m\nENTRY e {\n  p = " + shape + " parameter(0)\n  ROOT r = " +
         (out_shape.empty() ? shape : out_shape) + " " + op + "(p)\n}\n";
}

std::string Binary(const std::string& shape, const std::string& op, const std::string& out_shape = "",
                   const std::string& attrs = "") {
  return "HloModule m\nENTRY e {\n  a = " + shape + " parameter(0)\n  b = " + shape +
         " parameter(1)\n  ROOT r = " + (out_shape.empty() ? shape : out_shape) + " " + op +
         "(a, b)" + attrs + "\n}\n";
}

const std::vector<double> kX = {-2.5, -1.0, -0.0, 0.5, 1.5, 2.5, 3.7};
const std::vector<double> kPos = {0.25, 1.0, 2.0, 9.0};

TEST(Elementwise, UnaryFloatMatchesNumpy) {
  struct Case {
    const char* op;
    std::vector<double> in, want;
  } cases[] = {
      {"abs", kX, {2.5, 1.0, 0.0, 0.5, 1.5, 2.5, 3.700000047683716}},
      {"ceil", kX, {-2.0, -1.0, -0.0, 1.0, 2.0, 3.0, 4.0}},
      {"floor", kX, {-3.0, -1.0, -0.0, 0.0, 1.0, 2.0, 3.0}},
      {"round-nearest-even", kX, {-2.0, -1.0, -0.0, 0.0, 2.0, 2.0, 4.0}},
      {"round-nearest-afz", kX, {-3.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0}},
      {"negate", kX, {2.5, 1.0, 0.0, -0.5, -1.5, -2.5, -3.700000047683716}},
      {"sign", kX, {-1.0, -1.0, 0.0, 1.0, 1.0, 1.0, 1.0}},
      {"exponential", kX, {0.0820850059390068, 0.3678794205188751, 1.0, 1.6487212181091309, 4.481688976287842, 12.182493209838867, 40.44730758666992}},
      {"tanh", kX, {-0.9866142868995667, -0.7615941762924194, -0.0, 0.46211719512939453, 0.9051482081413269, 0.9866142868995667, 0.998778223991394}},
      {"logistic", kX, {0.07585818320512772, 0.2689414322376251, 0.5, 0.622459352016449, 0.8175745010375977, 0.9241418242454529, 0.9758729934692383}},
      {"erf", kX, {-0.9995930194854736, -0.8427007794380188, -0.0, 0.5204998850822449, 0.9661051630973816, 0.9995930194854736, 0.9999998211860657}},
      {"sine", kX, {-0.5984721779823303, -0.8414710164070129, -0.0, 0.4794255495071411, 0.9974949955940247, 0.5984721779823303, -0.5298361778259277}},
      {"cosine", kX, {-0.8011435866355896, 0.5403022766113281, 1.0, 0.8775825500488281, 0.07073719799518585, -0.8011435866355896, -0.8481000065803528}},
      {"exponential-minus-one", kX, {-0.9179150462150574, -0.6321205496788025, -0.0, 0.6487212777137756, 3.481688976287842, 11.182494163513184, 39.44730758666992}},
      {"cbrt", kX, {-1.3572087287902832, -1.0, -0.0, 0.7937005162239075, 1.1447142362594604, 1.3572087287902832, 1.5466803312301636}},
      {"tan", kX, {0.747022271156311, -1.5574077367782593, -0.0, 0.5463024973869324, 14.101420402526855, -0.747022271156311, 0.6247331500053406}},
      {"sqrt", kPos, {0.5, 1.0, 1.4142135381698608, 3.0}},
      {"rsqrt", kPos, {2.0, 1.0, 0.7071067690849304, 0.3333333432674408}},
      {"log", kPos, {-1.3862943649291992, 0.0, 0.6931471824645996, 2.1972246170043945}},
      {"log-plus-one", kPos, {0.2231435626745224, 0.6931471824645996, 1.0986123085021973, 2.3025851249694824}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    std::string shape = "f32[" + std::to_string(c.in.size()) + "]";
    Literal r = RunHlo(Unary(shape, c.op), {F32({static_cast<int64_t>(c.in.size())}, c.in)});
    ExpectNear(r, c.want, 2e-6);
    // The same op in f64 agrees to float precision.
    std::string shape64 = "f64[" + std::to_string(c.in.size()) + "]";
    Literal r64 = RunHlo(Unary(shape64, c.op),
                      {Make(PrimitiveType::F64, {static_cast<int64_t>(c.in.size())}, c.in)});
    ExpectNear(r64, c.want, 2e-6);
  }
}

TEST(Elementwise, IsFiniteAndNanHandling) {
  double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Literal r = RunHlo(Unary("f32[4]", "is-finite", "pred[4]"), {F32({4}, {1.0, nan, inf, -inf})});
  EXPECT_EQ(Ints(r), (std::vector<int64_t>{1, 0, 0, 0}));
  // maximum/minimum propagate NaN.
  Literal mx = RunHlo(Binary("f32[3]", "maximum"), {F32({3}, {nan, 1, 2}), F32({3}, {0, nan, 3})});
  ExpectNear(mx, {nan, nan, 3});
  Literal mn = RunHlo(Binary("f32[3]", "minimum"), {F32({3}, {nan, 1, 2}), F32({3}, {0, nan, 3})});
  ExpectNear(mn, {nan, nan, 2});
}

TEST(Elementwise, BinaryFloatMatchesNumpy) {
  Literal a = F32({5}, {1.5, -2.0, 7.0, -7.5, 0.0});
  Literal b = F32({5}, {0.5, 3.0, -2.0, 2.0, 1.0});
  ExpectNear(RunHlo(Binary("f32[5]", "add"), {a, b}), {2.0, 1.0, 5.0, -5.5, 1.0});
  ExpectNear(RunHlo(Binary("f32[5]", "subtract"), {a, b}), {1.0, -5.0, 9.0, -9.5, -1.0});
  ExpectNear(RunHlo(Binary("f32[5]", "multiply"), {a, b}), {0.75, -6.0, -14.0, -15.0, 0.0});
  ExpectNear(RunHlo(Binary("f32[5]", "divide"), {a, b}), {3.0, -2.0 / 3.0, -3.5, -3.75, 0.0});
  ExpectNear(RunHlo(Binary("f32[5]", "remainder"), {a, b}), {0.0, -2.0, 1.0, -1.5, 0.0});
  ExpectNear(RunHlo(Binary("f32[5]", "atan2"), {a, b}),
             {1.2490458488464355, -0.5880025625228882, 1.8490960597991943, -1.3101940155029297, 0.0});
  Literal abs_a = F32({5}, {1.5, 2.0, 7.0, 7.5, 0.0});
  ExpectNear(RunHlo(Binary("f32[5]", "power"), {abs_a, b}), {1.2247447967529297, 8.0, 0.020408164709806442, 56.25, 0.0});
}

TEST(Elementwise, IntegerDivisionFollowsXla) {
  // x/0 = -1, x%0 = x, INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0; C++ truncation otherwise.
  double mn = std::numeric_limits<int32_t>::min();
  Literal a = S32({6}, {7, -7, 5, mn, mn, 9});
  Literal b = S32({6}, {2, 2, 0, -1, 3, -4});
  EXPECT_EQ(Ints(RunHlo(Binary("s32[6]", "divide"), {a, b})),
            (std::vector<int64_t>{3, -3, -1, static_cast<int64_t>(mn), -715827882, -2}));
  EXPECT_EQ(Ints(RunHlo(Binary("s32[6]", "remainder"), {a, b})), (std::vector<int64_t>{1, -1, 5, 0, -2, 1}));
  // Unsigned: x/0 is all ones.
  Literal ua = Make(PrimitiveType::U8, {3}, {200, 7, 9});
  Literal ub = Make(PrimitiveType::U8, {3}, {0, 0, 4});
  EXPECT_EQ(Ints(RunHlo(Binary("u8[3]", "divide"), {ua, ub})), (std::vector<int64_t>{255, 255, 2}));
  EXPECT_EQ(Ints(RunHlo(Binary("u8[3]", "remainder"), {ua, ub})), (std::vector<int64_t>{200, 7, 1}));
}

TEST(Elementwise, IntegerArithmeticWrapsAndPower) {
  Literal a = Make(PrimitiveType::S8, {4}, {120, -128, 3, -2});
  Literal b = Make(PrimitiveType::S8, {4}, {10, -1, 4, 3});
  EXPECT_EQ(Ints(RunHlo(Binary("s8[4]", "add"), {a, b})), (std::vector<int64_t>{-126, 127, 7, 1}));
  EXPECT_EQ(Ints(RunHlo(Binary("s8[4]", "multiply"), {a, b})), (std::vector<int64_t>{-80, -128, 12, -6}));
  // 3^4 = 81, (-2)^3 = -8; negative exponents give 0 unless the base is 1.
  EXPECT_EQ(Ints(RunHlo(Binary("s8[4]", "power"), {a, b}))[2], 81);
  EXPECT_EQ(Ints(RunHlo(Binary("s8[4]", "power"), {a, b}))[3], -8);
  EXPECT_EQ(Ints(RunHlo(Binary("s32[3]", "power"), {S32({3}, {1, 2, -1}), S32({3}, {-3, -1, 3})})),
            (std::vector<int64_t>{1, 0, -1}));
  EXPECT_EQ(Ints(RunHlo(Unary("s8[4]", "negate"), {a})), (std::vector<int64_t>{-120, -128, -3, 2}));
  EXPECT_EQ(Ints(RunHlo(Unary("s8[4]", "abs"), {a})), (std::vector<int64_t>{120, -128, 3, 2}));
  EXPECT_EQ(Ints(RunHlo(Unary("s8[4]", "sign"), {a})), (std::vector<int64_t>{1, -1, 1, -1}));
}

TEST(Elementwise, ShiftsBitOpsPopcntClz) {
  Literal a = S32({5}, {1, -16, -16, 0x40000000, 5});
  Literal b = S32({5}, {31, 2, 40, 1, 32});
  EXPECT_EQ(Ints(RunHlo(Binary("s32[5]", "shift-left"), {a, b})),
            (std::vector<int64_t>{std::numeric_limits<int32_t>::min(), -64, 0, std::numeric_limits<int32_t>::min(), 0}));
  EXPECT_EQ(Ints(RunHlo(Binary("s32[5]", "shift-right-arithmetic"), {a, b})),
            (std::vector<int64_t>{0, -4, -1, 0x20000000, 0}));
  EXPECT_EQ(Ints(RunHlo(Binary("s32[5]", "shift-right-logical"), {a, b})),
            (std::vector<int64_t>{0, 0x3ffffffc, 0, 0x20000000, 0}));
  Literal u = Make(PrimitiveType::U8, {4}, {0, 1, 0x80, 0xff});
  EXPECT_EQ(Ints(RunHlo(Unary("u8[4]", "popcnt"), {u})), (std::vector<int64_t>{0, 1, 1, 8}));
  EXPECT_EQ(Ints(RunHlo(Unary("u8[4]", "count-leading-zeros"), {u})), (std::vector<int64_t>{8, 7, 0, 0}));
  EXPECT_EQ(Ints(RunHlo(Unary("s32[5]", "count-leading-zeros"), {a})), (std::vector<int64_t>{31, 0, 0, 1, 29}));
  EXPECT_EQ(Ints(RunHlo(Unary("u8[4]", "not"), {u})), (std::vector<int64_t>{255, 254, 127, 0}));
  Literal x = S32({3}, {12, 10, -1}), y = S32({3}, {10, 6, 5});
  EXPECT_EQ(Ints(RunHlo(Binary("s32[3]", "and"), {x, y})), (std::vector<int64_t>{8, 2, 5}));
  EXPECT_EQ(Ints(RunHlo(Binary("s32[3]", "or"), {x, y})), (std::vector<int64_t>{14, 14, -1}));
  EXPECT_EQ(Ints(RunHlo(Binary("s32[3]", "xor"), {x, y})), (std::vector<int64_t>{6, 12, -6}));
  Literal p = Make(PrimitiveType::PRED, {4}, {0, 0, 1, 1}), q = Make(PrimitiveType::PRED, {4}, {0, 1, 0, 1});
  EXPECT_EQ(Ints(RunHlo(Binary("pred[4]", "and"), {p, q})), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(Ints(RunHlo(Binary("pred[4]", "or"), {p, q})), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(Ints(RunHlo(Binary("pred[4]", "xor"), {p, q})), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(Ints(RunHlo(Unary("pred[4]", "not"), {p})), (std::vector<int64_t>{1, 1, 0, 0}));
}

TEST(Elementwise, CompareDirectionsAndTotalOrder) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Literal a = F32({4}, {1, 2, nan, -0.0});
  Literal b = F32({4}, {2, 2, nan, 0.0});
  auto cmp = [&](const char* dir, const char* type = nullptr) {
    std::string attrs = std::string(", direction=") + dir + (type ? std::string(", type=") + type : "");
    return Ints(RunHlo(Binary("f32[4]", "compare", "pred[4]", attrs), {a, b}));
  };
  EXPECT_EQ(cmp("EQ"), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(cmp("NE"), (std::vector<int64_t>{1, 0, 1, 0}));
  EXPECT_EQ(cmp("LT"), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(cmp("LE"), (std::vector<int64_t>{1, 1, 0, 1}));
  EXPECT_EQ(cmp("GT"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(cmp("GE"), (std::vector<int64_t>{0, 1, 0, 1}));
  // totalOrder: NaN == NaN, -0 < +0.
  EXPECT_EQ(cmp("EQ", "TOTALORDER"), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(cmp("LT", "TOTALORDER"), (std::vector<int64_t>{1, 0, 0, 1}));
  // Unsigned vs signed integer comparisons.
  Literal u = Make(PrimitiveType::U32, {2}, {4000000000.0, 1}), v = Make(PrimitiveType::U32, {2}, {1, 2});
  EXPECT_EQ(Ints(RunHlo(Binary("u32[2]", "compare", "pred[2]", ", direction=GT"), {u, v})),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(Ints(RunHlo(Binary("s32[2]", "compare", "pred[2]", ", direction=GT"),
                     {S32({2}, {-5, 3}), S32({2}, {1, 2})})),
            (std::vector<int64_t>{0, 1}));
}

TEST(Elementwise, SelectAndClamp) {
  const char* hlo = R"(HloModule m
ENTRY e {
  p = pred[4] parameter(0)
  a = s32[4] parameter(1)
  b = s32[4] parameter(2)
  ROOT r = s32[4] select(p, a, b)
})";
  EXPECT_EQ(Ints(RunHlo(hlo, {Make(PrimitiveType::PRED, {4}, {1, 0, 0, 1}), S32({4}, {1, 2, 3, 4}),
                           S32({4}, {10, 20, 30, 40})})),
            (std::vector<int64_t>{1, 20, 30, 4}));
  const char* clamp = R"(HloModule m
ENTRY e {
  lo = f32[] parameter(0)
  x = f32[5] parameter(1)
  hi = f32[] parameter(2)
  ROOT r = f32[5] clamp(lo, x, hi)
})";
  ExpectNear(RunHlo(clamp, {F32({}, {-1}), F32({5}, {-3, -1, 0, 1.5, 7}), F32({}, {1})}), {-1, -1, 0, 1, 1});
}

TEST(Elementwise, ConvertSaturatesAndRounds) {
  double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Literal f = F32({7}, {1.9, -1.9, 300, -300, nan, inf, -inf});
  EXPECT_EQ(Ints(RunHlo(Unary("f32[7]", "convert", "s8[7]"), {f})),
            (std::vector<int64_t>{1, -1, 127, -128, 0, 127, -128}));
  EXPECT_EQ(Ints(RunHlo(Unary("f32[7]", "convert", "u8[7]"), {f})),
            (std::vector<int64_t>{1, 0, 255, 0, 0, 255, 0}));
  EXPECT_EQ(Ints(RunHlo(Unary("f32[7]", "convert", "s32[7]"), {f})),
            (std::vector<int64_t>{1, -1, 300, -300, 0, 2147483647, -2147483648LL}));
  EXPECT_EQ(Ints(RunHlo(Unary("f32[7]", "convert", "pred[7]"), {f})),
            (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1}));
  // f32 -> bf16 rounds to nearest even (bf16 spacing at 1 is 2^-7): 1 + 2^-8
  // is a tie between 1 and 1 + 2^-7 (-> 1, even); 1 + 3*2^-8 is a tie between
  // 1 + 2^-7 and 1 + 2^-6 (-> 1 + 2^-6, even).
  Literal t = F32({3}, {1.0 + 1.0 / 256, 1.0 + 3.0 / 256, 1.0 + 1.0 / 256 + 1.0 / 512});
  Literal bf = RunHlo(Unary("f32[3]", "convert", "bf16[3]"), {t});
  ASSERT_EQ(bf.element_type(), PrimitiveType::BF16);
  EXPECT_EQ(bf.data<uint16_t>()[0], 0x3f80);  // 1.0
  EXPECT_EQ(bf.data<uint16_t>()[1], 0x3f82);  // 1 + 2^-6
  EXPECT_EQ(bf.data<uint16_t>()[2], 0x3f81);  // above the tie: rounds up to 1 + 2^-7
  Literal s = S32({2}, {16777217, -3});
  ExpectNear(RunHlo(Unary("s32[2]", "convert", "f32[2]"), {s}), {16777216, -3}, 0);
}

TEST(Elementwise, ConvertF64ToBf16RoundsOnce) {
  // 1 + 2^-8 + 2^-40 lies just above the bf16 tie 1 + 2^-8, so it rounds up
  // to 1 + 2^-7; going through f32 first would land exactly on the tie and
  // round down to 1 (double rounding). Below the tie: rounds down.
  Literal d = Make(PrimitiveType::F64, {2}, {1.0 + 1.0 / 256 + std::ldexp(1.0, -40), 1.0 + 1.0 / 256 - std::ldexp(1.0, -40)});
  Literal r = RunHlo(Unary("f64[2]", "convert", "bf16[2]"), {d});
  EXPECT_EQ(r.data<uint16_t>()[0], 0x3f81);
  EXPECT_EQ(r.data<uint16_t>()[1], 0x3f80);
}

TEST(Elementwise, Bf16ArithmeticRoundsOnStore) {
  // bf16 has 8 significant bits: 1 + 2^-8 is not representable.
  Literal a = Make(PrimitiveType::BF16, {3}, {1.0, 256, 3});
  Literal b = Make(PrimitiveType::BF16, {3}, {1.0 / 256, 1, 0.5});
  Literal r = RunHlo(Binary("bf16[3]", "add"), {a, b});
  ASSERT_EQ(r.element_type(), PrimitiveType::BF16);
  ExpectNear(r, {1.0, 256, 3.5}, 0);
  Literal h = RunHlo(Binary("f16[2]", "multiply"),
                  {Make(PrimitiveType::F16, {2}, {1000, 0.1}), Make(PrimitiveType::F16, {2}, {1000, 3})});
  // 1e6 overflows f16 (max 65504); 0.1 (stored 0.0999755859375) * 3 rounds to 0.2998046875.
  ExpectNear(h, {std::numeric_limits<double>::infinity(), 0.2998046875}, 0);
}

TEST(Elementwise, BitcastConvertReinterpretsBits) {
  Literal r = RunHlo(Unary("f32[2]", "bitcast-convert", "u32[2]"), {F32({2}, {1.0, -2.0})});
  EXPECT_EQ(Ints(r), (std::vector<int64_t>{0x3f800000, 0xc0000000LL}));
  Literal w = RunHlo(Unary("u32[1]", "bitcast-convert", "u8[1,4]"), {Make(PrimitiveType::U32, {1}, {0x04030201})});
  EXPECT_EQ(Ints(w), (std::vector<int64_t>{1, 2, 3, 4}));  // little-endian bytes
}

TEST(Elementwise, ReducePrecisionToBf16Format) {
  // reduce-precision to (8 exponent, 7 mantissa) bits equals rounding to bf16.
  std::vector<double> in = {1.0 + 1.0 / 256, 1.0 + 3.0 / 256, 3.14159, -1e-20, 1e38};
  Literal r = RunHlo(Unary("f32[5]", "reduce-precision", "f32[5]").replace(
                      Unary("f32[5]", "reduce-precision").find("(p)"), 3, "(p), exponent_bits=8, mantissa_bits=7"),
                  {F32({5}, in)});
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_EQ(r.GetDouble(i), Bf16ToF32(F32ToBf16(static_cast<float>(in[i])))) << i;
  // Fewer exponent bits: 1e5 overflows a 5-bit exponent (max ~65504) to inf,
  // 1e-9 underflows to zero.
  Literal h = RunHlo(Unary("f32[3]", "reduce-precision").replace(
                      Unary("f32[3]", "reduce-precision").find("(p)"), 3, "(p), exponent_bits=5, mantissa_bits=10"),
                  {F32({3}, {1e5, 1e-9, 0.1})});
  ExpectNear(h, {std::numeric_limits<double>::infinity(), 0, F16ToF32(F32ToF16(0.1f))}, 0);
}

TEST(Elementwise, Iota) {
  const char* hlo = R"(HloModule m
ENTRY e {
  ROOT r = s32[2,3] iota(), iota_dimension=1
})";
  EXPECT_EQ(Ints(RunHlo(hlo)), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  const char* hlo0 = R"(HloModule m
ENTRY e {
  ROOT r = bf16[3,2] iota(), iota_dimension=0
})";
  ExpectNear(RunHlo(hlo0), {0, 0, 1, 1, 2, 2}, 0);
}

TEST(Elementwise, UnsupportedTypeNamesInstruction) {
  Status s = RunStatus(R"(HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  ROOT c = f4e2m1fn[2] convert(a)
})",
                       {F32({2}, {1, 2})});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("f4e2m1fn"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("%c"), std::string::npos) << s.message();
  EXPECT_EQ(s.loc().line, 4);
}

TEST(Elementwise, MismatchedResultShapesAreErrorsNotCrashes) {
  // Unverified modules: a result smaller than the operand, or of a narrower
  // type, would overrun the output buffer if not rejected.
  for (const char* bad : {"f32[2] negate(p)", "f16[4] negate(p)", "f32[4,1] exponential(p)"}) {
    SCOPED_TRACE(bad);
    Status s = RunStatus(std::string("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = ") +
                             bad + "\n}\n",
                         {F32({4}, {1, 2, 3, 4})});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("%r"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace meshsplit::rttest
