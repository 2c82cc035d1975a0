// Interpreter tests for reduce (fast and general paths, variadic), reduce-
// window (padding, strides, base and window dilation), select-and-scatter,
// sort (stability, variadic, custom comparators) and map. Expected values
// come from NumPy and from straightforward Python loops over the XLA
// definitions, computed outside meshsplit.
#include <gtest/gtest.h>

#include "runtime_test_util.h"

namespace meshsplit::rttest {
namespace {

const char* kAddF32 = R"(
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
)";

TEST(Reduce, SumOverTwoDimsFastPath) {
  std::string hlo = std::string("HloModule m\n") + kAddF32 + R"(
ENTRY e {
  p = f32[2,3,4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[3] reduce(p, z), dimensions={0,2}, to_apply=add
})";
  ExpectNear(RunHlo(hlo, {F32({2, 3, 4}, Pattern(24))}), {6, -1, -8}, 0);
}

TEST(Reduce, MaxOverMiddleDim) {
  const char* hlo = R"(HloModule m
max {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT m = s32[] maximum(a, b)
}
ENTRY e {
  p = s32[2,3,4] parameter(0)
  z = s32[] constant(-100)
  ROOT r = s32[2,4] reduce(p, z), dimensions={1}, to_apply=max
})";
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({2, 3, 4}, Pattern(24))})), (std::vector<int64_t>{1, 3, 4, 5, 3, 4, 5, 2}));
}

TEST(Reduce, GeneralReducerSumOfSquares) {
  // Not a single binary op, so the general (per-element call) path runs.
  const char* hlo = R"(HloModule m
sq_add {
  acc = f32[] parameter(0)
  x = f32[] parameter(1)
  xx = f32[] multiply(x, x)
  ROOT s = f32[] add(acc, xx)
}
ENTRY e {
  p = f32[2,3,4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2,4] reduce(p, z), dimensions={1}, to_apply=sq_add
})";
  ExpectNear(RunHlo(hlo, {F32({2, 3, 4}, Pattern(24))}), {42, 22, 21, 50, 22, 21, 50, 21}, 0);
}

TEST(Reduce, VariadicArgmax) {
  // (value, index) pairs; ties keep the smaller index, like numpy.argmax.
  const char* hlo = R"(HloModule m
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick_a = pred[] or(gt, tie)
  v = f32[] select(pick_a, av, bv)
  i = s32[] select(pick_a, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  p = f32[2,3,4] parameter(0)
  idx = s32[2,3,4] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[2,4], s32[2,4]) reduce(p, idx, ninf, zero), dimensions={1}, to_apply=argmax
})";
  Literal r = RunHlo(hlo, {F32({2, 3, 4}, Pattern(24))});
  ASSERT_TRUE(r.shape().IsTuple());
  ExpectNear(r.elements()[0], {1, 3, 4, 5, 3, 4, 5, 2}, 0);
  EXPECT_EQ(Ints(r.elements()[1]), (std::vector<int64_t>{1, 2, 1, 0, 2, 1, 0, 2}));
}

TEST(Reduce, Bf16RoundsAfterEveryStep) {
  // In bf16, 1 + 2^-8 rounds back to 1 at every step, so the sum stays 1;
  // an f32 accumulator would give 1 + 4 * 2^-8 = 1.015625 (representable).
  const char* hlo = R"(HloModule m
add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
ENTRY e {
  p = bf16[5] parameter(0)
  z = bf16[] constant(0)
  ROOT r = bf16[] reduce(p, z), dimensions={0}, to_apply=add
})";
  Literal in = Make(PrimitiveType::BF16, {5}, {1, 1.0 / 256, 1.0 / 256, 1.0 / 256, 1.0 / 256});
  ExpectNear(RunHlo(hlo, {in}), {1.0}, 0);
}

TEST(ReduceWindow, PaddingStrideAndDilations) {
  std::string hlo = std::string("HloModule m\n") + kAddF32 + R"(
ENTRY e {
  p = f32[4,5] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4,3] reduce-window(p, z), window={size=2x3 stride=2x1 pad=1_0x1_1 rhs_dilate=1x2 lhs_dilate=2x1}, to_apply=add
})";
  ExpectNear(RunHlo(hlo, {F32({4, 5}, Pattern(20))}), {7, -6, 7, 0, 0, 0, -7, 6, -7, -3, 1, -3}, 0);
}

TEST(ReduceWindow, MaxPoolWithPadding) {
  const char* hlo = R"(HloModule m
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  p = f32[4,5] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[3,3] reduce-window(p, z), window={size=3x2 stride=1x2 pad=0_1x1_0}, to_apply=max
})";
  ExpectNear(RunHlo(hlo, {F32({4, 5}, Pattern(20))}), {-1, 4, 5, 1, 4, 5, 1, 4, 5}, 0);
}

TEST(ReduceWindow, GeneralReducerMatchesFastPath) {
  // add written with an extra negate pair defeats the fast path.
  const char* hlo = R"(HloModule m
slow_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  nb = f32[] negate(b)
  nnb = f32[] negate(nb)
  ROOT s = f32[] add(a, nnb)
}
ENTRY e {
  p = f32[4,5] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4,3] reduce-window(p, z), window={size=2x3 stride=2x1 pad=1_0x1_1 rhs_dilate=1x2 lhs_dilate=2x1}, to_apply=slow_add
})";
  ExpectNear(RunHlo(hlo, {F32({4, 5}, Pattern(20))}), {7, -6, 7, 0, 0, 0, -7, 6, -7, -3, 1, -3}, 0);
}

const char* kSelectScatter = R"(
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
)";

TEST(SelectAndScatter, MaxPoolGradient) {
  std::string hlo = std::string("HloModule m\n") + kSelectScatter + R"(
ENTRY e {
  op = f32[4,6] parameter(0)
  src = f32[2,2] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[4,6] select-and-scatter(op, src, z), window={size=2x3 stride=2x3}, select=ge, scatter=add
})";
  Literal op = F32({4, 6}, {7, 2, 5, 3, 10, 2, 3, 8, 9, 3, 4, 2, 1, 5, 7, 5, 6, 1, 0, 6, 2, 7, 2, 8});
  ExpectNear(RunHlo(hlo, {op, F32({2, 2}, {2, 6, 3, 1})}),
             {0, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 0);
}

TEST(SelectAndScatter, OverlappingPaddedWindowsKeepFirstMax) {
  std::string hlo = std::string("HloModule m\n") + kSelectScatter + R"(
ENTRY e {
  op = f32[5] parameter(0)
  src = f32[3] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[5] select-and-scatter(op, src, z), window={size=3 stride=2 pad=1_1}, select=ge, scatter=add
})";
  ExpectNear(RunHlo(hlo, {F32({5}, {1, 9, 3, 9, 2}), F32({3}, {10, 20, 30})}), {0, 30, 0, 30, 0}, 0);
}

TEST(Sort, StableKeyValueSort) {
  const char* hlo = R"(HloModule m
lt {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}
ENTRY e {
  k = s32[6] parameter(0)
  v = s32[6] parameter(1)
  ROOT s = (s32[6], s32[6]) sort(k, v), dimensions={0}, is_stable=true, to_apply=lt
})";
  Literal r = RunHlo(hlo, {S32({6}, {3, 1, 3, 2, 1, 3}), S32({6}, {0, 1, 2, 3, 4, 5})});
  EXPECT_EQ(Ints(r.elements()[0]), (std::vector<int64_t>{1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(Ints(r.elements()[1]), (std::vector<int64_t>{1, 4, 3, 0, 2, 5}));  // equal keys keep order
}

TEST(Sort, DescendingAlongDimZeroOfMatrix) {
  const char* hlo = R"(HloModule m
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GT
}
ENTRY e {
  p = f32[3,2] parameter(0)
  ROOT s = f32[3,2] sort(p), dimensions={0}, to_apply=gt
})";
  ExpectNear(RunHlo(hlo, {F32({3, 2}, {1, 6, 5, 2, 3, 4})}), {5, 6, 3, 4, 1, 2}, 0);
}

TEST(Sort, GeneralComparatorByAbsoluteValueIsStable) {
  const char* hlo = R"(HloModule m
abs_lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  aa = f32[] abs(a)
  ab = f32[] abs(b)
  ROOT r = pred[] compare(aa, ab), direction=LT
}
ENTRY e {
  p = f32[6] parameter(0)
  ROOT s = f32[6] sort(p), dimensions={0}, is_stable=true, to_apply=abs_lt
})";
  ExpectNear(RunHlo(hlo, {F32({6}, {-3, 2, -1, 3, 1, -2})}), {-1, 1, 2, -2, -3, 3}, 0);
}

TEST(Sort, TotalOrderPutsNanLast) {
  const char* hlo = R"(HloModule m
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
ENTRY e {
  p = f32[5] parameter(0)
  ROOT s = f32[5] sort(p), dimensions={0}, to_apply=lt
})";
  double nan = std::numeric_limits<double>::quiet_NaN();
  Literal r = RunHlo(hlo, {F32({5}, {nan, 2, -0.0, -1, 0.0})});
  ExpectNear(r, {-1, -0.0, 0.0, 2, nan}, 0);
  EXPECT_TRUE(std::signbit(r.GetDouble(1)));
  EXPECT_FALSE(std::signbit(r.GetDouble(2)));
}

TEST(Map, AppliesComputationPerElement) {
  const char* hlo = R"(HloModule m
f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  xy = f32[] multiply(x, y)
  one = f32[] constant(1)
  ROOT r = f32[] add(xy, one)
}
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT m = f32[3] map(a, b), dimensions={0}, to_apply=f
})";
  ExpectNear(RunHlo(hlo, {F32({3}, {1, 2, 3}), F32({3}, {4, 5, 6})}), {5, 11, 19}, 0);
}

}  // namespace
}  // namespace meshsplit::rttest
