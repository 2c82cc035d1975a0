// Tests of the fixed-order reduction kernel shared by all collectives
// backends: order, per-step rounding of 16-bit floats, integer wrap-around,
// NaN handling, pred arithmetic and aliasing.
#include "collectives/reduction.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/float16.h"

namespace meshsplit {
namespace {

template <typename T>
std::vector<T> Reduce(ReductionKind kind, PrimitiveType type,
                      const std::vector<std::vector<T>>& inputs) {
  std::vector<const void*> ptrs;
  for (const auto& v : inputs) ptrs.push_back(v.data());
  std::vector<T> out(inputs[0].size());
  ReduceInOrder(kind, type, ptrs, out.data(), out.size());
  return out;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(ReductionTest, F32AddIsLeftToRight) {
  // The f32 spacing near 1e8 is 8, so a 1 added to 1e8 is lost: which
  // contributions cancel first decides the result.
  auto out = Reduce<float>(ReductionKind::kAdd, PrimitiveType::F32,
                           {{1e8f}, {1.0f}, {-1e8f}});
  EXPECT_EQ(Bits(out[0]), Bits(0.0f));
  auto rev = Reduce<float>(ReductionKind::kAdd, PrimitiveType::F32,
                           {{-1e8f}, {1.0f}, {1e8f}});
  EXPECT_EQ(Bits(rev[0]), Bits(0.0f));
  auto mid = Reduce<float>(ReductionKind::kAdd, PrimitiveType::F32,
                           {{1.0f}, {1e8f}, {-1e8f}});
  EXPECT_EQ(mid[0], 0.0f);
  auto other = Reduce<float>(ReductionKind::kAdd, PrimitiveType::F32,
                             {{1e8f}, {-1e8f}, {1.0f}});
  EXPECT_EQ(other[0], 1.0f);
}

TEST(ReductionTest, F32NegativeZeroStartsFromFirstContribution) {
  auto out = Reduce<float>(ReductionKind::kAdd, PrimitiveType::F32,
                           {{-0.0f}, {-0.0f}});
  EXPECT_TRUE(std::signbit(out[0]));
  auto one = Reduce<float>(ReductionKind::kAdd, PrimitiveType::F32, {{-0.0f}});
  EXPECT_TRUE(std::signbit(one[0]));
}

TEST(ReductionTest, Bf16RoundsEveryStep) {
  // bf16 has 8 significant bits: near 256 the spacing is 2. 256 + 1 is a tie
  // that rounds to even (256), twice; a wide accumulator would give 258.
  uint16_t big = F32ToBf16(256.0f), one = F32ToBf16(1.0f);
  auto out = Reduce<uint16_t>(ReductionKind::kAdd, PrimitiveType::BF16,
                              {{big}, {one}, {one}});
  EXPECT_EQ(Bf16ToF32(out[0]), 256.0f);
  // 1 + 1 + 256 = 2 + 256 = 258 (exact): order matters.
  auto out2 = Reduce<uint16_t>(ReductionKind::kAdd, PrimitiveType::BF16,
                               {{one}, {one}, {big}});
  EXPECT_EQ(Bf16ToF32(out2[0]), 258.0f);
}

TEST(ReductionTest, F16RoundsEveryStep) {
  uint16_t big = F32ToF16(2048.0f), one = F32ToF16(1.0f);
  auto out = Reduce<uint16_t>(ReductionKind::kAdd, PrimitiveType::F16,
                              {{big}, {one}, {one}});
  EXPECT_EQ(F16ToF32(out[0]), 2048.0f);
  auto out2 = Reduce<uint16_t>(ReductionKind::kAdd, PrimitiveType::F16,
                               {{one}, {one}, {big}});
  EXPECT_EQ(F16ToF32(out2[0]), 2050.0f);
}

TEST(ReductionTest, SignedIntegersWrap) {
  const int32_t max = std::numeric_limits<int32_t>::max();
  auto out = Reduce<int32_t>(ReductionKind::kAdd, PrimitiveType::S32,
                             {{max}, {1}});
  EXPECT_EQ(out[0], std::numeric_limits<int32_t>::min());
  auto mul = Reduce<int8_t>(ReductionKind::kMul, PrimitiveType::S8,
                            {{int8_t{16}}, {int8_t{16}}, {int8_t{3}}});
  EXPECT_EQ(mul[0], 0);  // 256 wraps to 0
  auto mul16 = Reduce<uint16_t>(ReductionKind::kMul, PrimitiveType::U16,
                                {{uint16_t{65535}}, {uint16_t{65535}}});
  EXPECT_EQ(mul16[0], 1);  // (2^16-1)^2 mod 2^16
}

TEST(ReductionTest, IntegerMinMaxBitwise) {
  std::vector<std::vector<int32_t>> in = {{5, -3, 12}, {-7, 4, 10}, {2, 9, 6}};
  EXPECT_EQ(Reduce(ReductionKind::kMin, PrimitiveType::S32, in),
            (std::vector<int32_t>{-7, -3, 6}));
  EXPECT_EQ(Reduce(ReductionKind::kMax, PrimitiveType::S32, in),
            (std::vector<int32_t>{5, 9, 12}));
  EXPECT_EQ(Reduce(ReductionKind::kAnd, PrimitiveType::S32, in),
            (std::vector<int32_t>{5 & -7 & 2, -3 & 4 & 9, 12 & 10 & 6}));
  EXPECT_EQ(Reduce(ReductionKind::kOr, PrimitiveType::S32, in),
            (std::vector<int32_t>{5 | -7 | 2, -3 | 4 | 9, 12 | 10 | 6}));
  EXPECT_EQ(Reduce(ReductionKind::kXor, PrimitiveType::S32, in),
            (std::vector<int32_t>{5 ^ -7 ^ 2, -3 ^ 4 ^ 9, 12 ^ 10 ^ 6}));
}

TEST(ReductionTest, FloatMinMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto mx = Reduce<float>(ReductionKind::kMax, PrimitiveType::F32,
                          {{1.0f, 1.0f, 2.0f}, {nan, 3.0f, -1.0f}, {3.0f, nan, 0.5f}});
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_TRUE(std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 2.0f);
  auto mn = Reduce<float>(ReductionKind::kMin, PrimitiveType::F32,
                          {{1.0f, 4.0f}, {nan, 3.0f}});
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mn[1], 3.0f);
  // Ties keep the earlier operand: max(-0, +0) is -0.
  auto tie = Reduce<float>(ReductionKind::kMax, PrimitiveType::F32,
                           {{-0.0f}, {0.0f}});
  EXPECT_TRUE(std::signbit(tie[0]));
}

TEST(ReductionTest, Pred) {
  std::vector<std::vector<uint8_t>> in = {{0, 1, 1, 0}, {0, 0, 1, 1}};
  EXPECT_EQ(Reduce(ReductionKind::kAnd, PrimitiveType::PRED, in),
            (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(Reduce(ReductionKind::kOr, PrimitiveType::PRED, in),
            (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Reduce(ReductionKind::kXor, PrimitiveType::PRED, in),
            (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(Reduce(ReductionKind::kAdd, PrimitiveType::PRED, in),
            (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Reduce(ReductionKind::kMul, PrimitiveType::PRED, in),
            (std::vector<uint8_t>{0, 0, 1, 0}));
}

TEST(ReductionTest, Complex) {
  using C = std::complex<float>;
  auto out = Reduce<C>(ReductionKind::kMul, PrimitiveType::C64,
                       {{C(1, 2)}, {C(3, -1)}});
  EXPECT_EQ(out[0], C(5, 5));
  auto sum = Reduce<C>(ReductionKind::kAdd, PrimitiveType::C64,
                       {{C(1, 2)}, {C(3, -1)}, {C(0.5f, 0.25f)}});
  EXPECT_EQ(sum[0], C(4.5f, 1.25f));
}

// Long arrays cross the kernel's chunk boundaries; the output aliases one of
// the inputs. Compared bit for bit with a scalar left fold.
TEST(ReductionTest, LongArraysAndAliasing) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  const int64_t n = 10000;
  for (int num_inputs : {1, 2, 3, 5}) {
    for (int alias : {-1, 0, num_inputs - 1}) {
      std::vector<std::vector<float>> in(num_inputs, std::vector<float>(n));
      for (auto& v : in)
        for (float& x : v) x = dist(rng) * (rng() % 2 ? 1e-6f : 1.0f);
      std::vector<float> expect(n);
      for (int64_t i = 0; i < n; ++i) {
        float acc = in[0][i];
        for (int k = 1; k < num_inputs; ++k) acc = acc + in[k][i];
        expect[i] = acc;
      }
      std::vector<const void*> ptrs;
      for (auto& v : in) ptrs.push_back(v.data());
      std::vector<float> separate(n);
      float* out = alias < 0 ? separate.data() : in[alias].data();
      ReduceInOrder(ReductionKind::kAdd, PrimitiveType::F32, ptrs, out, n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(Bits(out[i]), Bits(expect[i]))
            << "i=" << i << " inputs=" << num_inputs << " alias=" << alias;
    }
  }
}

// The kernel's chunk buffer is not on the stack: as a 16 KiB local array per
// instantiation it made ReduceInOrder's frame ~1.5 MiB under ASan (no shared
// stack slots), past the 1 MiB stacks of a big mesh's device threads
// (ThreadsBigMeshTest). Here every element-size class runs on a thread whose
// whole stack (TLS and thread control block included) is 20 KiB, less than
// the old buffer plus the frames of the release build.
struct SmallStackCase {
  bool ok = false;
  std::string failure;
};

void* ReduceOnSmallStack(void* arg) {
  auto* result = static_cast<SmallStackCase*>(arg);
  const int64_t n = 20000;  // crosses a chunk for every element size
  std::vector<uint8_t> p0(n), p1(n), pred(n);
  std::vector<int32_t> s0(n), s1(n), s32(n);
  std::vector<double> f0(n), f1(n), f64(n);
  std::vector<std::complex<double>> c0(n), c1(n), c128(n);
  for (int64_t i = 0; i < n; ++i) {
    p0[i] = i % 2;
    p1[i] = i % 3 == 0;
    s0[i] = static_cast<int32_t>(i);
    s1[i] = static_cast<int32_t>(3 * i);
    f0[i] = 0.5 * static_cast<double>(i);
    f1[i] = static_cast<double>(n - i);
    c0[i] = {static_cast<double>(i), 1.0};
    c1[i] = {1.0, static_cast<double>(i)};
  }
  const void* p[] = {p0.data(), p1.data()};
  const void* s[] = {s0.data(), s1.data()};
  const void* f[] = {f0.data(), f1.data()};
  const void* c[] = {c0.data(), c1.data()};
  ReduceInOrder(ReductionKind::kOr, PrimitiveType::PRED, p, pred.data(), n);
  ReduceInOrder(ReductionKind::kAdd, PrimitiveType::S32, s, s32.data(), n);
  ReduceInOrder(ReductionKind::kMax, PrimitiveType::F64, f, f64.data(), n);
  ReduceInOrder(ReductionKind::kAdd, PrimitiveType::C128, c, c128.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const std::complex<double> sum(static_cast<double>(i) + 1, static_cast<double>(i) + 1);
    if (pred[i] != (i % 2 || i % 3 == 0) || s32[i] != 4 * i ||
        f64[i] != std::max(f0[i], f1[i]) || c128[i] != sum) {
      result->failure = "wrong value at element " + std::to_string(i);
      return nullptr;
    }
  }
  result->ok = true;
  return nullptr;
}

TEST(ReductionTest, RunsOnASmallThreadStack) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 20 << 10), 0);
  SmallStackCase result;
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, ReduceOnSmallStack, &result), 0);
  pthread_attr_destroy(&attr);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  EXPECT_TRUE(result.ok) << result.failure;
}

TEST(ReductionTest, CheckReductionRejectsBadKinds) {
  EXPECT_FALSE(CheckReduction(PrimitiveType::F32, ReductionKind::kAnd).ok());
  EXPECT_FALSE(CheckReduction(PrimitiveType::BF16, ReductionKind::kXor).ok());
  EXPECT_FALSE(CheckReduction(PrimitiveType::C64, ReductionKind::kMax).ok());
  EXPECT_FALSE(CheckReduction(PrimitiveType::TUPLE, ReductionKind::kAdd).ok());
  EXPECT_FALSE(CheckReduction(PrimitiveType::F4E2M1FN, ReductionKind::kAdd).ok());  // f8 sums are supported; f4 is not
  EXPECT_TRUE(CheckReduction(PrimitiveType::S32, ReductionKind::kXor).ok());
  EXPECT_TRUE(CheckReduction(PrimitiveType::PRED, ReductionKind::kAnd).ok());
  EXPECT_TRUE(CheckReduction(PrimitiveType::BF16, ReductionKind::kMax).ok());
  Status s = CheckReduction(PrimitiveType::F32, ReductionKind::kOr);
  EXPECT_NE(s.message().find("f32"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace meshsplit
