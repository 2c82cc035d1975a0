// The start-up choice of OpenBLAS kernels: it reports what it did, and
// switching kernel sets at run time keeps BLAS results correct.
#include "runtime/blas_core.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace meshsplit {
namespace {

// max |A*B - naive| for a 37x53 by 53x29 product (sizes off the kernels'
// register blocks).
double SgemmError() {
  const int m = 37, k = 53, n = 29;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (int i = 0; i < m * k; ++i) a[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  for (int i = 0; i < k * n; ++i) b[i] = static_cast<float>((i * 5) % 13) - 6.0f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n,
              0.0f, c.data(), n);
  double err = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 0;
      for (int p = 0; p < k; ++p) want += static_cast<double>(a[i * k + p]) * b[p * n + j];
      err = std::max(err, std::fabs(want - c[i * n + j]));
    }
  return err;
}

TEST(BlasCore, ChoiceNamesTheKernelsInUse) {
  const std::string choice = BlasCoreChoice();
  ASSERT_FALSE(choice.empty());
  EXPECT_EQ(choice.rfind(BlasCoreName(), 0), 0u) << choice;
  // Never left on the generic kernels when the CPU can do better, unless the
  // user asked for them.
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    EXPECT_NE(BlasCoreName(), "Prescott") << choice;
}

TEST(BlasCore, SwitchingKernelsKeepsResultsCorrect) {
  const std::string original = BlasCoreName();
  EXPECT_EQ(SgemmError(), 0.0);  // small integers: every kernel is exact
  if (!SetBlasCore("Prescott")) GTEST_SKIP() << "this OpenBLAS cannot switch kernels";
  EXPECT_EQ(BlasCoreName(), "Prescott");
  EXPECT_EQ(SgemmError(), 0.0);
  ASSERT_TRUE(SetBlasCore(original));
  EXPECT_EQ(BlasCoreName(), original);
  EXPECT_EQ(SgemmError(), 0.0);
}

}  // namespace
}  // namespace meshsplit
