// Differential tests for the runtime's fast paths: compiled scalar
// comparators (ScalarProgram, used by sort) and the row-vectorised
// reduce-window. Each compares the fast path bit for bit against the generic
// interpreter path (fast paths disabled) on random data with NaNs, signed
// zeros, infinities and many ties.
#include <cstring>
#include <random>

#include "runtime/fast_scalar.h"
#include "runtime_test_util.h"

namespace meshsplit::rttest {
namespace {

using interp::ScalarProgram;
using interp::SetScalarProgramsEnabled;

// Restores the fast paths when a test ends.
struct FastPathsOff {
  FastPathsOff() { SetScalarProgramsEnabled(false); }
  ~FastPathsOff() { SetScalarProgramsEnabled(true); }
};

// Random element bits of type t drawn so that ties and special values are
// frequent.
void FillRandom(Literal& l, std::mt19937_64& rng) {
  PrimitiveType t = l.element_type();
  int64_t n = l.element_count();
  std::uniform_int_distribution<int> pick(0, 9);
  for (int64_t i = 0; i < n; ++i) {
    int c = pick(rng);
    double v = static_cast<double>(static_cast<int>(rng() % 7) - 3) * 0.5;  // ties
    if (t == PrimitiveType::F32 || t == PrimitiveType::F64 || t == PrimitiveType::BF16 ||
        t == PrimitiveType::F16) {
      if (c == 0) v = std::nan("");
      if (c == 1) v = -std::nan("");
      if (c == 2) v = -0.0;
      if (c == 3) v = (rng() & 1) ? INFINITY : -INFINITY;
      if (c == 4) v = std::ldexp(static_cast<double>(rng() % 1000) - 500, -3);
    } else if (c < 3) {
      v = static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000);
    }
    l.SetDouble(i, v);
  }
}

bool SameBits(const Literal& a, const Literal& b) {
  if (a.shape().IsTuple() != b.shape().IsTuple()) return false;
  if (a.shape().IsTuple()) {
    if (a.elements().size() != b.elements().size()) return false;
    for (size_t i = 0; i < a.elements().size(); ++i)
      if (!SameBits(a.elements()[i], b.elements()[i])) return false;
    return true;
  }
  return a.size_bytes() == b.size_bytes() && std::memcmp(a.raw(), b.raw(), a.size_bytes()) == 0;
}

// Bit equality except that any two NaNs match (the sign/payload of a NaN
// produced by an addition is unspecified and the compiler may commute it).
bool SameValuesNanAgnostic(const Literal& a, const Literal& b) {
  if (!a.shape().IsArray() || a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.element_count(); ++i) {
    double x = a.GetDouble(i), y = b.GetDouble(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::memcmp(&x, &y, sizeof(double)) != 0) return false;
  }
  return true;
}

// Runs `hlo` on the same random inputs with and without fast paths.
void ExpectFastMatchesGeneric(const std::string& hlo, const std::vector<Shape>& params,
                              uint64_t seed, bool nan_agnostic = false) {
  std::mt19937_64 rng(seed);
  std::vector<Literal> args;
  for (const Shape& s : params) {
    args.emplace_back(s);
    FillRandom(args.back(), rng);
  }
  std::vector<Literal> args2 = args;
  Literal fast = RunHlo(hlo, std::move(args));
  Literal generic;
  {
    FastPathsOff off;
    generic = RunHlo(hlo, std::move(args2));
  }
  if (nan_agnostic) EXPECT_TRUE(SameValuesNanAgnostic(fast, generic)) << hlo;
  else EXPECT_TRUE(SameBits(fast, generic)) << hlo;
}

// XLA's TopK comparator on bf16 keys: a sign-magnitude -> two's complement
// total-order key through bitcast-convert, ties broken by the s32 operand.
constexpr const char* kTopKComparator = R"(
cmp {
  p0 = bf16[] parameter(0)
  p1 = bf16[] parameter(1)
  i0 = s32[] parameter(2)
  i1 = s32[] parameter(3)
  f0 = f32[] convert(p0)
  b0 = s32[] bitcast-convert(f0)
  zero = s32[] constant(0)
  neg0 = pred[] compare(b0, zero), direction=LT
  big = u32[] constant(2147483647)
  u0 = u32[] bitcast-convert(f0)
  s0 = u32[] subtract(big, u0)
  k0a = s32[] bitcast-convert(s0)
  k0 = s32[] select(neg0, k0a, b0)
  f1 = f32[] convert(p1)
  b1 = s32[] bitcast-convert(f1)
  neg1 = pred[] compare(b1, zero), direction=LT
  u1 = u32[] bitcast-convert(f1)
  s1 = u32[] subtract(big, u1)
  k1a = s32[] bitcast-convert(s1)
  k1 = s32[] select(neg1, k1a, b1)
  gt = pred[] compare(k0, k1), direction=GT
  lt = pred[] compare(k1, k0), direction=GT
  tie = pred[] compare(gt, lt), direction=EQ
  idx = pred[] compare(i0, i1), direction=LT
  ROOT r = pred[] select(tie, idx, gt)
}
)";

TEST(FastSort, TopKComparatorCompiles) {
  auto module = ParseModuleText(std::string(kTopKComparator) + R"(
ENTRY e {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] call(a, b, c, d), to_apply=cmp
})");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  const Computation* cmp = nullptr;
  for (const auto& c : (*module)->computations())
    if (c->name() == "cmp") cmp = c.get();
  ASSERT_NE(cmp, nullptr);
  auto program = ScalarProgram::Compile(*cmp);
  ASSERT_TRUE(program.has_value());
  EXPECT_EQ(program->param_count(), 4);
  EXPECT_EQ(program->root_type(), PrimitiveType::PRED);
}

TEST(FastSort, TopKComparatorMatchesInterpreter) {
  std::string hlo = std::string(kTopKComparator) + R"(
ENTRY e {
  k = bf16[3,777] parameter(0)
  v = s32[3,777] parameter(1)
  ROOT s = (bf16[3,777], s32[3,777]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp
})";
  for (uint64_t seed = 1; seed <= 3; ++seed)
    ExpectFastMatchesGeneric(hlo, {Shape(PrimitiveType::BF16, {3, 777}), Shape(PrimitiveType::S32, {3, 777})},
                             seed);
}

TEST(FastSort, MixedOpComparatorsMatchInterpreter) {
  // Float compare with NaN semantics (not total order), converts with
  // saturation, negate, arithmetic on f16/u8/f64 and logical ops.
  std::string hlo = R"(
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f16[] parameter(2)
  d = f16[] parameter(3)
  e = u8[] parameter(4)
  f = u8[] parameter(5)
  na = f32[] negate(a)
  ia = s32[] convert(na)
  ib = s32[] convert(b)
  ge = pred[] compare(ia, ib), direction=GE
  cd = f16[] add(c, d)
  cm = f16[] multiply(cd, c)
  half = f16[] constant(0.5)
  gt = pred[] compare(cm, half), direction=GT
  ef = u8[] subtract(e, f)
  e8 = u8[] constant(200)
  le = pred[] compare(ef, e8), direction=LE
  wide = f64[] convert(a)
  wb = f64[] convert(b)
  mx = f64[] maximum(wide, wb)
  tot = pred[] compare(mx, wb), direction=LT, type=TOTALORDER
  x1 = pred[] xor(ge, gt)
  o1 = pred[] or(x1, le)
  n1 = pred[] not(tot)
  ROOT r = pred[] and(o1, n1)
}
ENTRY e {
  k = f32[500] parameter(0)
  h = f16[500] parameter(1)
  u = u8[500] parameter(2)
  ROOT s = (f32[500], f16[500], u8[500]) sort(k, h, u), dimensions={0}, to_apply=cmp
})";
  for (uint64_t seed = 10; seed <= 12; ++seed)
    ExpectFastMatchesGeneric(hlo, {Shape(PrimitiveType::F32, {500}), Shape(PrimitiveType::F16, {500}),
                                   Shape(PrimitiveType::U8, {500})},
                             seed);
}

TEST(FastSort, TotalOrderGeComparatorOnF32MatchesInterpreter) {
  std::string hlo = R"(
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE, type=TOTALORDER
}
ENTRY e {
  k = f32[4,300] parameter(0)
  ROOT s = f32[4,300] sort(k), dimensions={1}, to_apply=cmp
})";
  ExpectFastMatchesGeneric(hlo, {Shape(PrimitiveType::F32, {4, 300})}, 21);
}

TEST(FastReduceWindow, AddAndMaxRowsMatchInterpreter) {
  // Dilated, padded, strided windows on the leading dims; the trailing dims
  // are untouched, so the row path runs.
  for (const char* reducer : {"add", "maximum"}) {
    std::string hlo = std::string(R"(
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] )") + reducer + R"((a, b)
}
ENTRY e {
  x = f32[3,5,4,6] parameter(0)
  z = f32[] constant(0)
  ROOT w = f32[3,6,4,6] reduce-window(x, z), window={size=2x3x1x1 stride=1x2x1x1 pad=1_0x3_3x0_0x0_0 lhs_dilate=1x2x1x1 rhs_dilate=1x2x1x1}, to_apply=red
})";
    ExpectFastMatchesGeneric(hlo, {Shape(PrimitiveType::F32, {3, 5, 4, 6})}, 31,
                             /*nan_agnostic=*/std::string(reducer) == "add");
  }
}

TEST(FastReduceWindow, Bf16AddRowsMatchInterpreter) {
  std::string hlo = R"(
red {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] add(a, b)
}
ENTRY e {
  x = bf16[4,7,9] parameter(0)
  z = bf16[] constant(0)
  ROOT w = bf16[4,3,9] reduce-window(x, z), window={size=3x3x1 stride=1x3x1 pad=1_1x1_1x0_0}, to_apply=red
})";
  ExpectFastMatchesGeneric(hlo, {Shape(PrimitiveType::BF16, {4, 7, 9})}, 41, /*nan_agnostic=*/true);
}

TEST(FastReduceWindow, RowPathValuesByHand) {
  // x = [[1,2],[3,4],[5,6]], window 2 along dim 0: rows [1+3, 2+4], [3+5, 4+6].
  Literal out = RunHlo(R"(
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  x = f32[3,2] parameter(0)
  z = f32[] constant(0)
  ROOT w = f32[2,2] reduce-window(x, z), window={size=2x1}, to_apply=red
})", [] {
    std::vector<Literal> a;
    a.push_back(F32({3, 2}, {1, 2, 3, 4, 5, 6}));
    return a;
  }());
  ExpectNear(out, {4, 6, 8, 10});
}


// Reducers outside the add/max/... kinds: a select on a comparison, a
// reducer that returns one of its parameters, integer arithmetic and a bf16
// expression. They run compiled (CompiledReducer) when fast paths are on and
// through the interpreter when off; both must give the same values, the
// same bits but for the sign and payload of NaNs (which XLA leaves open).
constexpr const char* kGeneralReducers[][2] = {
    {"f32", "  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  c = pred[] compare(a, b), direction=GT\n  ROOT r = f32[] select(c, a, b)\n"},
    // No ROOT: the last instruction, parameter 1, is the result.
    {"f32", "  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"},
    {"f32", "  b = f32[] parameter(1)\n  a = f32[] parameter(0)\n"},
    {"s32", "  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  m = s32[] multiply(a, b)\n"
            "  k = s32[] constant(7)\n  ROOT r = s32[] xor(m, k)\n"},
    {"bf16", "  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n"
             "  s = bf16[] subtract(a, b)\n  ROOT r = bf16[] multiply(s, b)\n"},
};

std::string GeneralReducer(const char* body) { return std::string("red {\n") + body + "}\n"; }

PrimitiveType TypeNamed(const std::string& t) {
  if (t == "s32") return PrimitiveType::S32;
  if (t == "bf16") return PrimitiveType::BF16;
  return PrimitiveType::F32;
}

TEST(CompiledReducer, ReduceWithGeneralReducersMatchesInterpreter) {
  for (const auto& [type, body] : kGeneralReducers) {
    std::string t = type;
    std::string hlo = GeneralReducer(body) + "ENTRY e {\n  x = " + t +
                      "[5,6,7] parameter(0)\n  z = " + t + "[] constant(1)\n  ROOT w = " + t +
                      "[6] reduce(x, z), dimensions={0,2}, to_apply=red\n}\n";
    ExpectFastMatchesGeneric(hlo, {Shape(TypeNamed(t), {5, 6, 7})}, 51, /*nan_agnostic=*/true);
  }
}

TEST(CompiledReducer, ReduceWindowWithGeneralReducersMatchesInterpreter) {
  for (const auto& [type, body] : kGeneralReducers) {
    std::string t = type;
    std::string hlo = GeneralReducer(body) + "ENTRY e {\n  x = " + t +
                      "[3,5,4] parameter(0)\n  z = " + t + "[] constant(0)\n  ROOT w = " + t +
                      "[3,6,3] reduce-window(x, z), window={size=2x3x2 stride=1x2x1 "
                      "pad=1_0x3_3x0_0 lhs_dilate=1x2x1 rhs_dilate=1x2x1}, to_apply=red\n}\n";
    ExpectFastMatchesGeneric(hlo, {Shape(TypeNamed(t), {3, 5, 4})}, 61, /*nan_agnostic=*/true);
  }
}

TEST(CompiledReducer, LastElementReducerValuesByHand) {
  // A reducer returning its second parameter keeps the last element of each
  // window in window order; padding positions are skipped, so the padded
  // window at the end still ends on x[2].
  Literal out = RunHlo(R"(
red {
  a = f32[] parameter(0)
  ROOT b = f32[] parameter(1)
}
ENTRY e {
  x = f32[3] parameter(0)
  z = f32[] constant(-1)
  ROOT w = f32[3] reduce-window(x, z), window={size=2 pad=0_1}, to_apply=red
})", [] {
    std::vector<Literal> a;
    a.push_back(F32({3}, {10, 20, 30}));
    return a;
  }());
  ExpectNear(out, {20, 30, 30});
}

}  // namespace
}  // namespace meshsplit::rttest
