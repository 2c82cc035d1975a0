// The random module generator emits cholesky and triangular-solve (on
// well-conditioned batches) and ragged-dot, and those modules verify:
// partitioned on N virtual devices they match the single-device run.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "verify/random_module.h"
#include "verify/verify.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

TEST(RandomLinalg, GeneratedCholeskyTriangularSolveAndRaggedDotVerify) {
  int64_t cholesky = 0, solve = 0, ragged = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    RandomCase c = GenerateRandomCase(seed);
    const bool has_c = std::count(c.ops.begin(), c.ops.end(), "cholesky") > 0;
    const bool has_s = std::count(c.ops.begin(), c.ops.end(), "triangular_solve") > 0;
    const bool has_r = std::count(c.ops.begin(), c.ops.end(), "ragged_dot") > 0;
    if (!has_c && !has_s && !has_r) continue;
    cholesky += has_c;
    solve += has_s;
    ragged += has_r;
    if (has_c) {
      EXPECT_NE(c.text.find(" cholesky("), std::string::npos);
    }
    if (has_s) {
      EXPECT_NE(c.text.find(" triangular-solve("), std::string::npos);
    }
    if (has_r) {
      EXPECT_NE(c.text.find(" ragged-dot("), std::string::npos);
    }
    auto m = ParseModuleText(c.text);
    ASSERT_TRUE(m.ok()) << "seed " << seed << ": " << m.status().ToString() << "\n" << c.text;
    VerifyResult r = VerifyModule(**m, VerifyOptionsFor(c, seed));
    EXPECT_TRUE(r.ok()) << "seed " << seed << ": " << r.status << ": " << r.message << "\n"
                        << c.text;
  }
  EXPECT_GE(cholesky, 10);
  EXPECT_GE(solve, 10);
  EXPECT_GE(ragged, 10);
}

}  // namespace
}  // namespace meshsplit
