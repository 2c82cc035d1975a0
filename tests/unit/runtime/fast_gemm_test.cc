// FastSgemm against a naive double-precision product, for all transpose
// combinations, ragged edges (sizes not multiples of the 8x32 tile or the
// 256 k-block) and accumulation. Skipped on machines where the fast path is
// disabled (OpenBLAS recognised the CPU, or no AVX-512).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/fast_gemm.h"

namespace meshsplit::interp {
namespace {

TEST(FastSgemm, MatchesNaiveProduct) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t m = 37, n = 70, k = 300;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int acc = 0; acc < 2; ++acc) {
        std::vector<float> a(m * k), b(k * n), c(m * (n + 3));
        for (float& x : a) x = dist(rng);
        for (float& x : b) x = dist(rng);
        for (float& x : c) x = dist(rng);
        std::vector<float> c0 = c;
        int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n + 3;
        if (!FastSgemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, acc))
          GTEST_SKIP() << "fast sgemm disabled on this machine";
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double want = acc ? c0[i * ldc + j] : 0.0;
            for (int64_t p = 0; p < k; ++p)
              want += static_cast<double>(ta ? a[p * lda + i] : a[i * lda + p]) *
                      (tb ? b[j * ldb + p] : b[p * ldb + j]);
            ASSERT_NEAR(c[i * ldc + j], want, 1e-3) << i << "," << j << " ta=" << ta << " tb=" << tb;
          }
        // Padding columns beyond n are untouched.
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]);
      }
}

}  // namespace
}  // namespace meshsplit::interp
