// verify's value comparison on complex results: the real and imaginary parts
// are compared as floats (partial sums of a partitioned complex dot arrive in
// another order), and a wrong imaginary part is still caught and located.
#include <gtest/gtest.h>

#include <limits>

#include "verify/verify.h"

namespace meshsplit {
namespace {

TEST(CompareComplexTest, PartsUseTheFloatTolerance) {
  Literal ref(Shape(PrimitiveType::C64, {2}));
  float* r = ref.data<float>();
  r[0] = 1, r[1] = -2, r[2] = 0.5, r[3] = 3;
  Literal got = ref;
  got.data<float>()[1] = -2.0000002f;  // one ulp off in an imaginary part
  EXPECT_TRUE(CompareValues(ref, got, "out", {}).ok);
  got.data<float>()[3] = 3.01f;  // imaginary part of element 1 far off
  Comparison c = CompareValues(ref, got, "out", {});
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.first_mismatch.rfind("out[1,1]", 0), 0u) << c.first_mismatch;
}

TEST(CompareComplexTest, C128NaNMustMatch) {
  Literal ref(Shape(PrimitiveType::C128, {1}));
  ref.data<double>()[0] = 1;
  ref.data<double>()[1] = std::numeric_limits<double>::quiet_NaN();
  Literal got = ref;
  EXPECT_TRUE(CompareValues(ref, got, "x", {}).ok);
  got.data<double>()[1] = 0;
  EXPECT_FALSE(CompareValues(ref, got, "x", {}).ok);
}

}  // namespace
}  // namespace meshsplit
