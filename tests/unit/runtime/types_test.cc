// Interpreter tests for the f8 and complex element types, fft and the
// block-scaled dot custom-call. Expected values are computed in the tests
// themselves from definitions (a naive DFT in double, a dequantize + triple
// loop dot, std::complex arithmetic) or worked out by hand from the f8 bit
// layouts; never by the interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>

#include "ir/float8.h"
#include "runtime_test_util.h"

namespace meshsplit::rttest {
namespace {

using Cd = std::complex<double>;

Literal C64(std::vector<int64_t> dims, const std::vector<Cd>& v) {
  Literal l(Shape(PrimitiveType::C64, std::move(dims)));
  EXPECT_EQ(static_cast<int64_t>(v.size()), l.element_count());
  for (size_t i = 0; i < v.size(); ++i) {
    l.data<float>()[2 * i] = static_cast<float>(v[i].real());
    l.data<float>()[2 * i + 1] = static_cast<float>(v[i].imag());
  }
  return l;
}

std::vector<Cd> ComplexValues(const Literal& l) {
  std::vector<Cd> out;
  for (int64_t i = 0; i < l.element_count(); ++i) {
    if (l.element_type() == PrimitiveType::C64)
      out.emplace_back(l.data<float>()[2 * i], l.data<float>()[2 * i + 1]);
    else
      out.emplace_back(l.data<double>()[2 * i], l.data<double>()[2 * i + 1]);
  }
  return out;
}

std::vector<Cd> RandomComplex(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<Cd> v(n);
  for (Cd& c : v) {
    // Values representable in f32, so the test's double math starts from
    // exactly what the c64 literal holds.
    c = Cd(static_cast<float>(d(rng)), static_cast<float>(d(rng)));
  }
  return v;
}

void ExpectComplexNear(const std::vector<Cd>& got, const std::vector<Cd>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(std::abs(got[i] - want[i]), tol * (1 + std::abs(want[i]))) << "at " << i;
}

// ---- f8 ----------------------------------------------------------------

TEST(Types, F8ConvertRoundsToNearestEven) {
  const std::string hlo = R"(HloModule m
ENTRY e {
  p = f32[6] parameter(0)
  c = f8e4m3fn[6] convert(p)
  ROOT r = f32[6] convert(c)
})";
  // 0.3 = 1.2 * 2^-2 -> 1.25 * 2^-2; 1.0625 is halfway between 1 and 1.125 ->
  // 1; 464 is halfway between 448 and (NaN) 480 -> 448; 500 overflows -> NaN.
  Literal out = RunHlo(hlo, {F32({6}, {1.0, 0.3, 1.0625, 464, 500, -448})});
  ExpectNear(out, {1.0, 0.3125, 1.0, 448, NAN, -448}, 0);
}

TEST(Types, F8ArithmeticRoundsEachResult) {
  const std::string hlo = R"(HloModule m
ENTRY e {
  a = f8e4m3fn[3] parameter(0)
  b = f8e4m3fn[3] parameter(1)
  ROOT r = f8e4m3fn[3] add(a, b)
})";
  // 1 + 0.0625 = 1.0625 -> 1 (tie to even); 1.125 + 0.0625 = 1.1875 -> 1.25
  // (tie to even); 256 + 256 = 512 -> NaN (above 448, no infinity).
  Literal a = Make(PrimitiveType::F8E4M3FN, {3}, {1.0, 1.125, 256});
  Literal b = Make(PrimitiveType::F8E4M3FN, {3}, {0.0625, 0.0625, 256});
  Literal out = RunHlo(hlo, {std::move(a), std::move(b)});
  ExpectNear(out, {1.0, 1.25, NAN}, 0);
}

TEST(Types, F8ReduceAndSelectAndE8M0Convert) {
  const std::string hlo = R"(HloModule m
add {
  x = f8e5m2[] parameter(0)
  y = f8e5m2[] parameter(1)
  ROOT s = f8e5m2[] add(x, y)
}
ENTRY e {
  a = f8e5m2[4] parameter(0)
  z = f8e5m2[] constant(0)
  s = f8e5m2[] reduce(a, z), dimensions={0}, to_apply=add
  p = pred[4] constant({true, false, true, false})
  b = f8e5m2[4] negate(a)
  sel = f8e5m2[4] select(p, a, b)
  scale = f8e8m0fnu[4] convert(a)
  back = f32[4] convert(scale)
  ROOT t = (f8e5m2[], f8e5m2[4], f32[4]) tuple(s, sel, back)
})";
  Literal a = Make(PrimitiveType::F8E5M2, {4}, {1, 2, 0.5, 4});
  Literal out = RunHlo(hlo, {std::move(a)});
  ASSERT_TRUE(out.shape().IsTuple());
  // 1 + 2 + 0.5 = 3.5 is exact in e5m2; 3.5 + 4 = 7.5 lies halfway between 7
  // (odd mantissa) and 8, so it rounds to 8.
  ExpectNear(out.elements()[0], {8}, 0);
  ExpectNear(out.elements()[1], {1, -2, 0.5, -4}, 0);
  ExpectNear(out.elements()[2], {1, 2, 0.5, 4}, 0);
}

// ---- complex -------------------------------------------------------------

TEST(Types, ComplexElementwise) {
  const std::vector<Cd> x = {{1, 2}, {-0.5, 0.25}, {3, -4}};
  const std::vector<Cd> y = {{0.5, -1}, {2, 2}, {-1, 0.5}};
  for (const char* op : {"add", "subtract", "multiply", "divide"}) {
    const std::string hlo = std::string("HloModule m\nENTRY e {\n  a = c64[3] parameter(0)\n") +
                            "  b = c64[3] parameter(1)\n  ROOT r = c64[3] " + op + "(a, b)\n}\n";
    Literal out = RunHlo(hlo, {C64({3}, x), C64({3}, y)});
    std::vector<Cd> want;
    for (int i = 0; i < 3; ++i) {
      const std::string o = op;
      want.push_back(o == "add" ? x[i] + y[i] : o == "subtract" ? x[i] - y[i]
                     : o == "multiply" ? x[i] * y[i] : x[i] / y[i]);
    }
    ExpectComplexNear(ComplexValues(out), want, 1e-6);
  }
  const std::string unary = R"(HloModule m
ENTRY e {
  a = c64[3] parameter(0)
  n = c64[3] negate(a)
  ab = f32[3] abs(a)
  re = f32[3] real(a)
  im = f32[3] imag(a)
  back = c64[3] complex(im, re)
  eq = pred[3] compare(a, n), direction=NE
  ROOT t = (c64[3], f32[3], f32[3], f32[3], c64[3], pred[3]) tuple(n, ab, re, im, back, eq)
})";
  Literal out = RunHlo(unary, {C64({3}, x)});
  ASSERT_TRUE(out.shape().IsTuple());
  ExpectComplexNear(ComplexValues(out.elements()[0]), {{-1, -2}, {0.5, -0.25}, {-3, 4}}, 0);
  ExpectNear(out.elements()[1], {std::sqrt(5.0), std::sqrt(0.3125), 5}, 1e-6);
  ExpectNear(out.elements()[2], {1, -0.5, 3}, 0);
  ExpectNear(out.elements()[3], {2, 0.25, -4}, 0);
  ExpectComplexNear(ComplexValues(out.elements()[4]), {{2, 1}, {0.25, -0.5}, {-4, 3}}, 0);
  EXPECT_EQ(Ints(out.elements()[5]), (std::vector<int64_t>{1, 1, 1}));
}

TEST(Types, ComplexConvertReduceAndDot) {
  const std::string hlo = R"(HloModule m
add {
  x = c64[] parameter(0)
  y = c64[] parameter(1)
  ROOT s = c64[] add(x, y)
}
ENTRY e {
  a = c64[2,3] parameter(0)
  b = c64[3,2] parameter(1)
  f = f32[2] parameter(2)
  z = c64[] constant((0, 0))
  s = c64[2] reduce(a, z), dimensions={1}, to_apply=add
  d = c64[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  w = c128[2] convert(f)
  ROOT t = (c64[2], c64[2,2], c128[2]) tuple(s, d, w)
})";
  const std::vector<Cd> a = RandomComplex(6, 1), b = RandomComplex(6, 2);
  Literal out = RunHlo(hlo, {C64({2, 3}, a), C64({3, 2}, b), F32({2}, {1.5, -2})});
  ASSERT_TRUE(out.shape().IsTuple());
  std::vector<Cd> sums(2), dot(4);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) {
      sums[i] += a[i * 3 + k];
      for (int j = 0; j < 2; ++j) dot[i * 2 + j] += a[i * 3 + k] * b[k * 2 + j];
    }
  ExpectComplexNear(ComplexValues(out.elements()[0]), sums, 1e-6);
  ExpectComplexNear(ComplexValues(out.elements()[1]), dot, 1e-6);
  ExpectComplexNear(ComplexValues(out.elements()[2]), {{1.5, 0}, {-2, 0}}, 0);
}

// ---- fft -----------------------------------------------------------------

// Naive multi-dim DFT over the trailing `lens.size()` dims of `x` (dims
// `dims`), sign -1 forward / +1 inverse with 1/N.
std::vector<Cd> NaiveDft(const std::vector<Cd>& x, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& lens, bool inverse) {
  const int rank = dims.size(), k = lens.size();
  int64_t inner = 1;
  for (int d = rank - k; d < rank; ++d) inner *= dims[d];
  const int64_t outer = static_cast<int64_t>(x.size()) / inner;
  std::vector<Cd> out(x.size());
  const double sign = inverse ? 1 : -1;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t f = 0; f < inner; ++f) {
      Cd acc(0);
      for (int64_t n = 0; n < inner; ++n) {
        // Phase sum over the transformed dims of (f_d * n_d / L_d).
        double phase = 0;
        int64_t fr = f, nr = n;
        for (int d = k - 1; d >= 0; --d) {
          phase += static_cast<double>((fr % lens[d]) * (nr % lens[d])) / lens[d];
          fr /= lens[d];
          nr /= lens[d];
        }
        acc += x[o * inner + n] * std::polar(1.0, sign * 2 * std::numbers::pi * phase);
      }
      out[o * inner + f] = inverse ? acc / static_cast<double>(inner) : acc;
    }
  return out;
}

std::string FftModule(const std::string& in, const std::string& out, const std::string& type,
                      const std::string& len) {
  return "HloModule m\nENTRY e {\n  p = " + in + " parameter(0)\n  ROOT f = " + out +
         " fft(p), fft_type=" + type + ", fft_length={" + len + "}\n}\n";
}

TEST(Types, FftMatchesNaiveDft) {
  struct Case {
    std::vector<int64_t> dims, lens;
    std::string shape, len;
  } cases[] = {
      {{3, 8}, {8}, "c64[3,8]", "8"},          // radix-2
      {{2, 6}, {6}, "c64[2,6]", "6"},          // direct DFT
      {{2, 4, 6}, {4, 6}, "c64[2,4,6]", "4,6"},  // 2-D
      {{1, 1, 6}, {6}, "c64[1,1,6]", "6"},
  };
  for (const Case& c : cases) {
    int64_t n = 1;
    for (int64_t d : c.dims) n *= d;
    const std::vector<Cd> x = RandomComplex(n, n);
    for (bool inverse : {false, true}) {
      Literal out = RunHlo(FftModule(c.shape, c.shape, inverse ? "IFFT" : "FFT", c.len),
                           {C64(c.dims, x)});
      ExpectComplexNear(ComplexValues(out), NaiveDft(x, c.dims, c.lens, inverse), 1e-5);
    }
  }
}

TEST(Types, RfftAndIrfft) {
  // RFFT of real data keeps the first L/2+1 frequencies of the full DFT;
  // IRFFT of that half spectrum gives the data back.
  for (int64_t L : {8, 5}) {
    const std::vector<int64_t> dims = {2, 3, L};
    const int64_t n = 2 * 3 * L, H = L / 2 + 1;
    std::vector<Cd> x = RandomComplex(n, 11);
    std::vector<double> real(n);
    for (int64_t i = 0; i < n; ++i) real[i] = x[i].real(), x[i] = Cd(x[i].real(), 0);
    const std::string len = "3," + std::to_string(L);
    const std::string full = "f32[2,3," + std::to_string(L) + "]";
    const std::string half = "c64[2,3," + std::to_string(H) + "]";
    Literal spec = RunHlo(FftModule(full, half, "RFFT", len), {F32(dims, real)});
    std::vector<Cd> want = NaiveDft(x, dims, {3, L}, false), want_half;
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t j = 0; j < H; ++j) want_half.push_back(want[r * L + j]);
    ExpectComplexNear(ComplexValues(spec), want_half, 1e-5);
    Literal back = RunHlo(FftModule(half, full, "IRFFT", len), {std::move(spec)});
    ExpectNear(back, real, 1e-5);
  }
}

// ---- block-scaled dot ------------------------------------------------------

TEST(Types, BlockScaledDotMatchesDequantizedDot) {
  // lhs [B, M, K] with scales [B, M, K/32], rhs [B, N, K] with scales
  // [B, N/2, K] (a coarser scale along N, blocks of 1 along K).
  const int64_t B = 2, M = 3, N = 4, K = 64;
  const std::string hlo = R"(HloModule m
ENTRY e {
  lhs = f8e4m3fn[2,3,64] parameter(0)
  rhs = f8e5m2[2,4,64] parameter(1)
  ls = f8e8m0fnu[2,3,2] parameter(2)
  rs = f8e4m3fn[2,2,64] parameter(3)
  ROOT d = f32[2,3,4] custom-call(lhs, rhs, ls, rs), custom_call_target="__op$block_scaled_dot"
})";
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> d(-2, 2);
  std::uniform_int_distribution<int> e(-2, 2);
  Literal lhs(Shape(PrimitiveType::F8E4M3FN, {B, M, K})), rhs(Shape(PrimitiveType::F8E5M2, {B, N, K}));
  Literal ls(Shape(PrimitiveType::F8E8M0FNU, {B, M, K / 32})), rs(Shape(PrimitiveType::F8E4M3FN, {B, N / 2, K}));
  for (int64_t i = 0; i < lhs.element_count(); ++i) lhs.SetDouble(i, d(rng));
  for (int64_t i = 0; i < rhs.element_count(); ++i) rhs.SetDouble(i, d(rng));
  for (int64_t i = 0; i < ls.element_count(); ++i) ls.SetDouble(i, std::ldexp(1.0, e(rng)));
  for (int64_t i = 0; i < rs.element_count(); ++i) rs.SetDouble(i, d(rng));
  std::vector<double> want(B * M * N, 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
          const double lv = lhs.GetDouble((b * M + m) * K + k) *
                            ls.GetDouble((b * M + m) * (K / 32) + k / 32);
          const double rv = rhs.GetDouble((b * N + n) * K + k) *
                            rs.GetDouble((b * (N / 2) + n / 2) * K + k);
          want[(b * M + m) * N + n] += lv * rv;
        }
  Literal out = RunHlo(hlo, {std::move(lhs), std::move(rhs), std::move(ls), std::move(rs)});
  ExpectNear(out, want, 1e-5);
}

TEST(Types, BlockScaledDotRejectsScalesThatDoNotBlock) {
  const std::string hlo = R"(HloModule m
ENTRY e {
  lhs = f8e4m3fn[4,64] parameter(0)
  rhs = f8e4m3fn[8,64] parameter(1)
  ls = f8e8m0fnu[4,3] parameter(2)
  rs = f8e8m0fnu[8,2] parameter(3)
  ROOT d = f32[4,8] custom-call(lhs, rhs, ls, rs), custom_call_target="__op$block_scaled_dot"
})";
  std::vector<Literal> args;
  args.emplace_back(Shape(PrimitiveType::F8E4M3FN, {4, 64}));
  args.emplace_back(Shape(PrimitiveType::F8E4M3FN, {8, 64}));
  args.emplace_back(Shape(PrimitiveType::F8E8M0FNU, {4, 3}));
  args.emplace_back(Shape(PrimitiveType::F8E8M0FNU, {8, 2}));
  Status s = RunStatus(hlo, std::move(args));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("does not divide"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace meshsplit::rttest
