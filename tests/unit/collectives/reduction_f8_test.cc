// The fixed-order reduction kernel on f8 types: each step computes in f32 and
// rounds to the format (expected values worked out by hand from the bit
// layouts), and the collectives accept f8 sums but not bitwise reductions.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/reduction.h"
#include "ir/float8.h"

namespace meshsplit {
namespace {

std::vector<uint8_t> Codes(PrimitiveType t, const std::vector<float>& v) {
  std::vector<uint8_t> out;
  for (float x : v) out.push_back(F32ToF8(t, x));
  return out;
}

TEST(ReductionF8, AddRoundsEveryStep) {
  const PrimitiveType t = PrimitiveType::F8E4M3FN;
  // 1 + 0.0625 = 1.0625 ties to 1 (even); 1 + 0.0625 again -> 1: the sum of
  // three inputs stays 1, where f32 accumulation would give 1.125.
  std::vector<uint8_t> a = Codes(t, {1.0f, 256}), b = Codes(t, {0.0625f, 256}),
                       c = Codes(t, {0.0625f, -64});
  std::vector<const void*> in = {a.data(), b.data(), c.data()};
  std::vector<uint8_t> out(2);
  ReduceInOrder(ReductionKind::kAdd, t, in, out.data(), 2);
  EXPECT_EQ(F8ToF32(t, out[0]), 1.0f);
  // 256 + 256 = 512 is above 448: NaN (no infinity), and NaN stays NaN.
  EXPECT_TRUE(std::isnan(F8ToF32(t, out[1])));
}

TEST(ReductionF8, MaxAndTypeChecks) {
  const PrimitiveType t = PrimitiveType::F8E5M2;
  std::vector<uint8_t> a = Codes(t, {-1, 3}), b = Codes(t, {2, -4});
  std::vector<const void*> in = {a.data(), b.data()};
  std::vector<uint8_t> out(2);
  ReduceInOrder(ReductionKind::kMax, t, in, out.data(), 2);
  EXPECT_EQ(F8ToF32(t, out[0]), 2.0f);
  EXPECT_EQ(F8ToF32(t, out[1]), 3.0f);
  EXPECT_TRUE(CheckReduction(t, ReductionKind::kAdd).ok());
  EXPECT_FALSE(CheckReduction(t, ReductionKind::kXor).ok());
}

}  // namespace
}  // namespace meshsplit
