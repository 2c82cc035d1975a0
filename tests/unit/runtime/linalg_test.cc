// Tests of the linear-algebra kernels (cholesky, triangular-solve), ragged-dot
// and the TopK custom-call with general comparators. References are naive
// loops written here (multiplying factors back, per-mode ragged loops, a
// stable sort), never the interpreter itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "runtime/fast_scalar.h"
#include "runtime_test_util.h"

namespace meshsplit {
namespace {

using rttest::F32;
using rttest::RunHlo;
using rttest::RunStatus;
using rttest::Values;

std::vector<double> RandomValues(int64_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

// A batch of symmetric positive definite n x n matrices: m m^T + n I.
std::vector<double> SpdBatch(int64_t batch, int64_t n, uint64_t seed) {
  std::vector<double> r = RandomValues(batch * n * n, seed), out(batch * n * n);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = i == j ? static_cast<double>(n) : 0.0;
        for (int64_t p = 0; p < n; ++p) s += r[b * n * n + i * n + p] * r[b * n * n + j * n + p];
        out[b * n * n + i * n + j] = s;
      }
  return out;
}

std::string Dims(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s;
}

// ---- cholesky ---------------------------------------------------------------

class CholeskyTest : public ::testing::TestWithParam<bool> {};

TEST_P(CholeskyTest, FactorReproducesInputAndOtherTriangleIsZero) {
  const bool lower = GetParam();
  const int64_t batch = 3, n = 5;
  std::vector<double> a = SpdBatch(batch, n, 7);
  // Garbage in the triangle that must not be read.
  std::vector<double> in = a;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (lower ? j > i : j < i) in[b * n * n + i * n + j] = 1000.0 + i + j;
  std::string hlo = "HloModule m\nENTRY e {\n  p = f64[3,5,5] parameter(0)\n"
                    "  ROOT c = f64[3,5,5] cholesky(p), lower=" +
                    std::string(lower ? "true" : "false") + "\n}\n";
  std::vector<Literal> args;
  args.push_back(rttest::Make(PrimitiveType::F64, {batch, n, n}, in));
  std::vector<double> l = Values(RunHlo(hlo, std::move(args)));
  ASSERT_EQ(l.size(), a.size());
  for (int64_t b = 0; b < batch; ++b) {
    const double* f = l.data() + b * n * n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        if (lower ? j > i : j < i) {
          EXPECT_EQ(f[i * n + j], 0.0) << b << " " << i << " " << j;
        }
        // lower: a = L L^T; upper: a = U^T U.
        double s = 0;
        for (int64_t p = 0; p < n; ++p)
          s += lower ? f[i * n + p] * f[j * n + p] : f[p * n + i] * f[p * n + j];
        EXPECT_NEAR(s, a[b * n * n + i * n + j], 1e-10) << b << " " << i << " " << j;
      }
    for (int64_t i = 0; i < n; ++i) EXPECT_GT(f[i * n + i], 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(LowerUpper, CholeskyTest, ::testing::Bool());

TEST(CholeskyTest, NotPositiveDefiniteGivesNaNForThatMatrixOnly) {
  // Matrix 0 is SPD (diag 4, 9); matrix 1 has a negative pivot.
  std::vector<Literal> args;
  args.push_back(F32({2, 2, 2}, {4, 0, 2, 9, 1, 0, 3, -5}));
  Literal r = RunHlo(R"(HloModule m
ENTRY e {
  p = f32[2,2,2] parameter(0)
  ROOT c = f32[2,2,2] cholesky(p), lower=true
})", std::move(args));
  std::vector<double> v = Values(r);
  ASSERT_EQ(v.size(), 8u);
  // [[4,0],[2,9]] lower: L = [[2,0],[1,sqrt(8)]].
  EXPECT_DOUBLE_EQ(v[0], 2);
  EXPECT_DOUBLE_EQ(v[1], 0);
  EXPECT_DOUBLE_EQ(v[2], 1);
  EXPECT_NEAR(v[3], std::sqrt(8.0), 1e-6);
  for (int i = 4; i < 8; ++i) EXPECT_TRUE(std::isnan(v[i])) << i;
}

TEST(CholeskyTest, BadOperandIsAnError) {
  Status s = RunStatus(R"(HloModule m
ENTRY e {
  p = s32[2,2] parameter(0)
  ROOT c = s32[2,2] cholesky(p), lower=true
})", [] { std::vector<Literal> a; a.push_back(rttest::S32({2, 2}, {1, 0, 0, 1})); return a; }());
  EXPECT_FALSE(s.ok());
}

// ---- triangular-solve ---------------------------------------------------------

struct SolveCase {
  bool left_side, lower, unit_diagonal;
  const char* transpose;
};

class TriangularSolveTest : public ::testing::TestWithParam<SolveCase> {};

TEST_P(TriangularSolveTest, SolutionSatisfiesTheSystem) {
  const SolveCase c = GetParam();
  const int64_t batch0 = 2, batch1 = 3, m = 4, other = 3;
  std::vector<int64_t> adims{batch0, batch1, m, m};
  std::vector<int64_t> bdims{batch0, batch1, c.left_side ? m : other, c.left_side ? other : m};
  const int64_t nb = batch0 * batch1;
  std::vector<double> a = RandomValues(nb * m * m, 11), b = RandomValues(nb * m * other, 12);
  // Well conditioned: a strong diagonal (ignored with unit_diagonal, where the
  // off-diagonal part is small enough anyway).
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t d = 0; d < m; ++d) a[i * m * m + d * m + d] += 4.0;
  std::string hlo = "HloModule m\nENTRY e {\n  a = f64[" + Dims(adims) +
                    "] parameter(0)\n  b = f64[" + Dims(bdims) + "] parameter(1)\n" +
                    "  ROOT x = f64[" + Dims(bdims) + "] triangular-solve(a, b), left_side=" +
                    (c.left_side ? "true" : "false") + ", lower=" + (c.lower ? "true" : "false") +
                    ", unit_diagonal=" + (c.unit_diagonal ? "true" : "false") +
                    ", transpose_a=" + c.transpose + "\n}\n";
  std::vector<Literal> args;
  args.push_back(rttest::Make(PrimitiveType::F64, adims, a));
  args.push_back(rttest::Make(PrimitiveType::F64, bdims, b));
  std::vector<double> x = Values(RunHlo(hlo, std::move(args)));
  ASSERT_EQ(x.size(), b.size());
  const bool transpose = std::string(c.transpose) != "NO_TRANSPOSE";
  const int64_t rows = bdims[2], cols = bdims[3];
  for (int64_t i = 0; i < nb; ++i) {
    // The effective triangular matrix t (what the solver may read), then
    // op(t) = t or t^T.
    auto t = [&](int64_t r, int64_t s) {
      if (c.lower ? s > r : s < r) return 0.0;
      if (r == s && c.unit_diagonal) return 1.0;
      return a[i * m * m + r * m + s];
    };
    auto op = [&](int64_t r, int64_t s) { return transpose ? t(s, r) : t(r, s); };
    const double* xi = x.data() + i * rows * cols;
    const double* bi = b.data() + i * rows * cols;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t s = 0; s < cols; ++s) {
        double sum = 0;
        for (int64_t p = 0; p < m; ++p)
          sum += c.left_side ? op(r, p) * xi[p * cols + s] : xi[r * cols + p] * op(p, s);
        EXPECT_NEAR(sum, bi[r * cols + s], 1e-10) << "batch " << i << " at " << r << "," << s;
      }
  }
}

std::vector<SolveCase> AllSolveCases() {
  std::vector<SolveCase> v;
  for (bool left : {true, false})
    for (bool lower : {true, false})
      for (bool unit : {true, false})
        for (const char* t : {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"})
          v.push_back({left, lower, unit, t});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllOptions, TriangularSolveTest, ::testing::ValuesIn(AllSolveCases()));

TEST(TriangularSolveTest, F32SmallExample) {
  // [[2,0],[1,4]] x = [[2],[9]] -> x = [1, 2].
  std::vector<Literal> args;
  args.push_back(F32({2, 2}, {2, 77, 1, 4}));  // 77 lies in the unread triangle
  args.push_back(F32({2, 1}, {2, 9}));
  Literal r = RunHlo(R"(HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  b = f32[2,1] parameter(1)
  ROOT x = f32[2,1] triangular-solve(a, b), left_side=true, lower=true, unit_diagonal=false, transpose_a=NO_TRANSPOSE
})", std::move(args));
  rttest::ExpectNear(r, {1, 2});
}

// ---- ragged-dot ----------------------------------------------------------------

// Group index of row r given sizes (the first group whose running sum
// passes r), or -1 past the last group.
int64_t GroupOf(const std::vector<int64_t>& sizes, int64_t r) {
  int64_t end = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t start = end;
    end += sizes[i];
    if (start <= r && r < end) return static_cast<int64_t>(i);
  }
  return -1;
}

TEST(RaggedDotTest, NonContractingModeWithBatch) {
  // lhs [b=2, m=5, k=3], rhs [g=3, b=2, k=3, n=2], group_sizes [b=2, g=3].
  const int64_t B = 2, M = 5, K = 3, G = 3, N = 2;
  std::vector<double> lhs = RandomValues(B * M * K, 1), rhs = RandomValues(G * B * K * N, 2);
  std::vector<std::vector<int64_t>> sizes{{2, 0, 2}, {1, 3, 1}};  // row 4 of batch 0: no group
  std::vector<Literal> args;
  args.push_back(F32({B, M, K}, lhs));
  args.push_back(F32({G, B, K, N}, rhs));
  args.push_back(rttest::S32({B, G}, {2, 0, 2, 1, 3, 1}));
  Literal r = RunHlo(R"(HloModule m
ENTRY e {
  a = f32[2,5,3] parameter(0)
  b = f32[3,2,3,2] parameter(1)
  c = s32[2,3] parameter(2)
  ROOT d = f32[2,5,2] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}
})", std::move(args));
  std::vector<double> want(B * M * N, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m) {
      int64_t g = GroupOf(sizes[b], m);
      if (g < 0) continue;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          want[(b * M + m) * N + n] +=
              lhs[(b * M + m) * K + k] * rhs[((g * B + b) * K + k) * N + n];
    }
  rttest::ExpectNear(r, want);
  // The row outside every group is exactly zero.
  EXPECT_EQ(Values(r)[4 * N], 0.0);
}

TEST(RaggedDotTest, NonContractingModeBroadcastGroupSizes) {
  // lhs [m=4, k=2], rhs [g=2, k=2, n=3], group_sizes [g] = {3, 1}.
  const int64_t M = 4, K = 2, G = 2, N = 3;
  std::vector<double> lhs = RandomValues(M * K, 3), rhs = RandomValues(G * K * N, 4);
  std::vector<Literal> args;
  args.push_back(F32({M, K}, lhs));
  args.push_back(F32({G, K, N}, rhs));
  args.push_back(rttest::Make(PrimitiveType::U32, {G}, {3, 1}));
  Literal r = RunHlo(R"(HloModule m
ENTRY e {
  a = f32[4,2] parameter(0)
  b = f32[2,2,3] parameter(1)
  c = u32[2] parameter(2)
  ROOT d = f32[4,3] ragged-dot(a, b, c), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
})", std::move(args));
  std::vector<double> want(M * N, 0.0);
  for (int64_t m = 0; m < M; ++m) {
    int64_t g = GroupOf({3, 1}, m);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) want[m * N + n] += lhs[m * K + k] * rhs[(g * K + k) * N + n];
  }
  rttest::ExpectNear(r, want);
}

TEST(RaggedDotTest, ContractingMode) {
  // lhs [m=2, k=5], rhs [k=5, n=3], group_sizes [g=3] -> [g, m, n]: slice g
  // sums over the k of group g only.
  const int64_t M = 2, K = 5, G = 3, N = 3;
  std::vector<int64_t> sizes{1, 3, 0};  // k=4 in no group
  std::vector<double> lhs = RandomValues(M * K, 5), rhs = RandomValues(K * N, 6);
  std::vector<Literal> args;
  args.push_back(F32({M, K}, lhs));
  args.push_back(F32({K, N}, rhs));
  args.push_back(rttest::S32({G}, {1, 3, 0}));
  Literal r = RunHlo(R"(HloModule m
ENTRY e {
  a = f32[2,5] parameter(0)
  b = f32[5,3] parameter(1)
  c = s32[3] parameter(2)
  ROOT d = f32[3,2,3] ragged-dot(a, b, c), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}
})", std::move(args));
  std::vector<double> want(G * M * N, 0.0);
  for (int64_t k = 0; k < K; ++k) {
    int64_t g = GroupOf(sizes, k);
    if (g < 0) continue;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) want[(g * M + m) * N + n] += lhs[m * K + k] * rhs[k * N + n];
  }
  rttest::ExpectNear(r, want);
  // Group 2 is empty: its slice is zero.
  for (int64_t i = 2 * M * N; i < 3 * M * N; ++i) EXPECT_EQ(Values(r)[i], 0.0);
}

TEST(RaggedDotTest, BatchModeIsAPlainDot) {
  const int64_t B = 3, M = 2, K = 4, N = 2;
  std::vector<double> lhs = RandomValues(B * M * K, 7), rhs = RandomValues(B * K * N, 8);
  std::vector<Literal> args;
  args.push_back(F32({B, M, K}, lhs));
  args.push_back(F32({B, K, N}, rhs));
  args.push_back(rttest::Make(PrimitiveType::U32, {2}, {1, 1}));
  Literal r = RunHlo(R"(HloModule m
ENTRY e {
  a = f32[3,2,4] parameter(0)
  b = f32[3,4,2] parameter(1)
  c = u32[2] parameter(2)
  ROOT d = f32[3,2,2] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={0}
})", std::move(args));
  std::vector<double> want(B * M * N, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          want[(b * M + m) * N + n] += lhs[(b * M + m) * K + k] * rhs[(b * K + k) * N + n];
  rttest::ExpectNear(r, want);
}

TEST(RaggedDotTest, MissingRaggedDimsIsAnError) {
  std::vector<Literal> args;
  args.push_back(F32({2, 2}, {1, 2, 3, 4}));
  args.push_back(F32({1, 2, 2}, {1, 0, 0, 1}));
  args.push_back(rttest::S32({1}, {2}));
  Status s = RunStatus(R"(HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  b = f32[1,2,2] parameter(1)
  c = s32[1] parameter(2)
  ROOT d = f32[2,2] ragged-dot(a, b, c), lhs_contracting_dims={1}, rhs_contracting_dims={1}
})", std::move(args));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("lhs_ragged_dims"), std::string::npos) << s.message();
}

// ---- TopK ---------------------------------------------------------------------

// The first k of a stable sort of each row by `less`.
template <typename Less>
void ReferenceTopK(const std::vector<double>& in, int64_t rows, int64_t n, int64_t k, Less less,
                   std::vector<double>* values, std::vector<int64_t>* indices) {
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return less(in[r * n + a], in[r * n + b]);
    });
    for (int64_t j = 0; j < k; ++j) {
      values->push_back(in[r * n + order[j]]);
      indices->push_back(order[j]);
    }
  }
}

std::vector<double> TupleValues(const Literal& t, int i) {
  if (!t.shape().IsTuple()) return {};
  return Values(t.elements()[i]);
}

TEST(TopKTest, NoComparatorMeansLargest) {
  std::vector<double> in{3, 1, 4, 1, 5, 9, 2, 6, -1, -2, 7, 7};
  std::vector<Literal> args;
  args.push_back(F32({2, 6}, in));
  Literal r = RunHlo(R"(HloModule m
ENTRY e {
  p = f32[2,6] parameter(0)
  ROOT t = (f32[2,3], s32[2,3]) custom-call(p), custom_call_target="TopK"
})", std::move(args));
  std::vector<double> v;
  std::vector<int64_t> idx;
  ReferenceTopK(in, 2, 6, 3, [](double a, double b) { return a > b; }, &v, &idx);
  EXPECT_EQ(TupleValues(r, 0), v);
  std::vector<double> idx_d(idx.begin(), idx.end());
  EXPECT_EQ(TupleValues(r, 1), idx_d);
}

constexpr char kAbsTopK[] = R"(HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  aa = f32[] abs(a)
  ab = f32[] abs(b)
  ROOT gt = pred[] compare(aa, ab), direction=GT
}
ENTRY e {
  p = f32[3,8] parameter(0)
  ROOT t = (f32[3,4], s32[3,4]) custom-call(p), custom_call_target="TopK", to_apply=cmp
})";

// Largest magnitude first; |x| ties keep index order. abs is not compiled, so
// this runs the comparator through the interpreter.
TEST(TopKTest, InterpretedComparatorByMagnitude) {
  std::vector<double> in{1, -3, 3, 0, -2, 2, 5, -5, 0, 0, 1, -1, 0.5, 7, -7, 2,
                         4, 4, -4, 1, 1, -1, 8, 0};
  std::vector<Literal> args;
  args.push_back(F32({3, 8}, in));
  Literal r = RunHlo(kAbsTopK, std::move(args));
  std::vector<double> v;
  std::vector<int64_t> idx;
  ReferenceTopK(in, 3, 8, 4, [](double a, double b) { return std::fabs(a) > std::fabs(b); }, &v,
                &idx);
  EXPECT_EQ(TupleValues(r, 0), v);
  std::vector<double> idx_d(idx.begin(), idx.end());
  EXPECT_EQ(TupleValues(r, 1), idx_d);
}

// (value, index) comparator as XLA's TopK rewriter leaves it: larger value
// first, on ties the larger index first (the opposite of stable order, so a
// kernel ignoring the index parameters would fail). Runs both compiled and,
// with compiled comparators off, interpreted.
TEST(TopKTest, FourParameterComparatorCompiledAndInterpreted) {
  constexpr char kHlo[] = R"(HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ia = s32[] parameter(2)
  ib = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  igt = pred[] compare(ia, ib), direction=GT
  tie = pred[] and(eq, igt)
  ROOT r = pred[] or(gt, tie)
}
ENTRY e {
  p = f32[2,5] parameter(0)
  ROOT t = (f32[2,2], s32[2,2]) custom-call(p), custom_call_target="TopK", to_apply=cmp
})";
  std::vector<double> in{2, 5, 5, 1, 5, 0, -1, 0, 3, 3};
  for (bool compiled : {true, false}) {
    interp::SetScalarProgramsEnabled(compiled);
    std::vector<Literal> args;
    args.push_back(F32({2, 5}, in));
    Literal r = RunHlo(kHlo, std::move(args));
    EXPECT_EQ(TupleValues(r, 0), (std::vector<double>{5, 5, 3, 3})) << compiled;
    EXPECT_EQ(TupleValues(r, 1), (std::vector<double>{4, 2, 4, 3})) << compiled;
  }
  interp::SetScalarProgramsEnabled(true);
}

}  // namespace
}  // namespace meshsplit
