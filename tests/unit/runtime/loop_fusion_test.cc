// Fused elementwise loops (runtime/loop_fusion.h): which chains the plan
// fuses, and that every fused result is bit-identical to the unfused
// interpreter (fusion off) on random data with NaNs, infinities, signed
// zeros, denormals and integer edge values, for sizes ragged against the
// loop's chunks and large enough to stream the output.
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <atomic>

#include "runtime/kernels.h"
#include "runtime/loop_fusion.h"
#include "runtime/parallel.h"
#include "runtime/streaming.h"
#include "runtime_test_util.h"

namespace meshsplit::rttest {
namespace {

using interp::LoopFusionPlan;
using interp::PlanLoopFusions;
using interp::SetLoopFusionEnabled;

struct FusionOff {
  FusionOff() { SetLoopFusionEnabled(false); }
  ~FusionOff() { SetLoopFusionEnabled(true); }
};

// Random bits per type, with special values frequent.
void FillRandom(Literal& l, std::mt19937_64& rng) {
  PrimitiveType t = l.element_type();
  int64_t n = l.element_count();
  std::uniform_int_distribution<int> pick(0, 11);
  for (int64_t i = 0; i < n; ++i) {
    int c = pick(rng);
    double v = static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000) / 64.0;
    if (IsFloatingPoint(t)) {
      if (c == 0) v = std::nan("");
      if (c == 1) v = -0.0;
      if (c == 2) v = (rng() & 1) ? INFINITY : -INFINITY;
      if (c == 3) v = std::ldexp(1.0, -140);  // an f32 denormal
      if (c == 4) v = 0.0;
    } else if (t == PrimitiveType::PRED) {
      v = static_cast<double>(rng() & 1);
    } else {
      v = static_cast<double>(static_cast<int64_t>(rng() % 200) - 100);
      if (c == 0) v = 0;
      if (c == 1) v = IsSignedInteger(t) ? -1 : 1;
    }
    l.SetDouble(i, v);
  }
}

bool SameBits(const Literal& a, const Literal& b) {
  if (a.shape().IsTuple() && b.shape().IsTuple()) {
    if (a.elements().size() != b.elements().size()) return false;
    for (size_t i = 0; i < a.elements().size(); ++i)
      if (!SameBits(a.elements()[i], b.elements()[i])) return false;
    return true;
  }
  return a.shape().IsArray() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.size_bytes()) == 0;
}

// The fused loops planned for `hlo`'s entry.
LoopFusionPlan PlanOf(const Module& m) {
  const Computation& c = *m.entry();
  std::vector<const Instruction*> order;
  for (const Instruction* i : c.MakePostOrder()) order.push_back(i);
  return PlanLoopFusions(order, c.root());
}

// Runs `hlo` with fusion on and off on the same random inputs (moved in, so
// buffers are donated as in a real run) and expects the same bits.
void ExpectFusedMatchesUnfused(const std::string& hlo, uint64_t seed) {
  auto module = ParseModuleText(hlo);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  const Computation& c = *(*module)->entry();
  std::mt19937_64 rng(seed);
  std::vector<Literal> args;
  for (int i = 0; i < c.parameter_count(); ++i) {
    args.emplace_back(c.parameter(i)->shape());
    FillRandom(args.back(), rng);
  }
  std::vector<Literal> args2;
  for (const Literal& a : args) args2.push_back(a);
  auto fused = EvaluateModule(**module, std::move(args));
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  StatusOr<Literal> unfused = Status::Error("not run");
  {
    FusionOff off;
    unfused = EvaluateModule(**module, std::move(args2));
  }
  ASSERT_TRUE(unfused.ok()) << unfused.status().ToString();
  EXPECT_TRUE(SameBits(*fused, *unfused)) << hlo;
}

// A chain with a row bias, a column scale, a scalar constant, compare /
// select, clamp and a round trip through bf16, over dims {M, N}.
std::string MixedChain(int64_t m, int64_t n) {
  std::string d = std::to_string(m) + "," + std::to_string(n);
  return "HloModule chain\nENTRY e {\n"
         "  x = f32[" + d + "] parameter(0)\n"
         "  b = f32[" + std::to_string(n) + "] parameter(1)\n"
         "  s = f32[" + std::to_string(m) + "] parameter(2)\n"
         "  bb = f32[" + d + "] broadcast(b), dimensions={1}\n"
         "  sb = f32[" + d + "] broadcast(s), dimensions={0}\n"
         "  half = f32[] constant(0.5)\n"
         "  hb = f32[" + d + "] broadcast(half), dimensions={}\n"
         "  a = f32[" + d + "] add(x, bb)\n"
         "  mu = f32[" + d + "] multiply(a, sb)\n"
         "  t = f32[" + d + "] tanh(mu)\n"
         "  e = f32[" + d + "] exponential(t)\n"
         "  g = pred[" + d + "] compare(e, hb), direction=GT\n"
         "  sel = f32[" + d + "] select(g, e, mu)\n"
         "  lo = f32[] constant(-2)\n"
         "  hi = f32[] constant(3)\n"
         "  cl = f32[" + d + "] clamp(lo, sel, hi)\n"
         "  h = bf16[" + d + "] convert(cl)\n"
         "  h2 = bf16[" + d + "] multiply(h, h)\n"
         "  back = f32[" + d + "] convert(h2)\n"
         "  ROOT r = f32[" + d + "] subtract(back, x)\n}\n";
}

TEST(LoopFusion, MixedChainIsOneLoop) {
  auto m = ParseModuleText(MixedChain(3, 5));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  LoopFusionPlan plan = PlanOf(**m);
  ASSERT_EQ(plan.loops.size(), 1u);
  const interp::LoopFusion& loop = *plan.loops[0];
  EXPECT_EQ(loop.root->name(), "r");
  EXPECT_EQ(loop.nodes.size(), 11u);  // a .. r
  // x, b, s and the three scalars; the broadcasts are read in place.
  EXPECT_EQ(loop.inputs.size(), 6u);
  for (const char* name : {"bb", "sb", "hb", "a", "t", "h2", "back"}) {
    bool found = false;
    for (const Instruction* i : plan.absorbed) found |= i->name() == name;
    EXPECT_TRUE(found) << name;
  }
}

TEST(LoopFusion, MixedChainMatchesUnfused) {
  // Ragged against the 1024-element chunks and the bias rows.
  for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {3, 5}, {37, 129}, {1, 1025}, {1025, 1}, {64, 768}, {33, 2049}})
    ExpectFusedMatchesUnfused(MixedChain(m, n), static_cast<uint64_t>(m * 7919 + n));
}

TEST(LoopFusion, StreamedOutputMatchesUnfused) {
  // Larger than StreamingBytes(): the root's chunks are streamed out.
  const std::string d = std::to_string(interp::StreamingBytes() / 4 / 256 + 3) + ",256";
  ExpectFusedMatchesUnfused("HloModule big\nENTRY e {\n  x = f32[" + d + "] parameter(0)\n"
                            "  v = f32[256] parameter(1)\n"
                            "  vb = f32[" + d + "] broadcast(v), dimensions={1}\n"
                            "  a = f32[" + d + "] add(x, vb)\n"
                            "  h = bf16[" + d + "] convert(a)\n"
                            "  ROOT r = bf16[" + d + "] multiply(h, h)\n}\n",
                            5);
}

// Loops of at least 64K elements split their chunks over the intra-op
// threads: 1, 2 and 3 threads (3 > this machine's cores is fine: a test of
// the split, not of speed) give the unfused bits, on a size whose chunk
// count does not divide evenly.
TEST(LoopFusion, ThreadedLoopsMatchUnfused) {
  const int saved = interp::IntraOpThreads();
  for (int threads : {1, 2, 3}) {
    interp::SetIntraOpThreads(threads);
    ExpectFusedMatchesUnfused(MixedChain(97, 1031), 41 + threads);
  }
  interp::SetIntraOpThreads(saved);
}

TEST(ParallelFor, RunsEveryPartOnce) {
  const int saved = interp::IntraOpThreads();
  interp::SetIntraOpThreads(2);
  for (int parts : {1, 2, 5, 64}) {
    std::vector<std::atomic<int>> runs(parts);
    interp::ParallelFor(parts, [&](int p) { runs[p].fetch_add(1); });
    for (int p = 0; p < parts; ++p) EXPECT_EQ(runs[p].load(), 1) << parts << " " << p;
  }
  // Two callers at once (two devices): the second runs its parts itself.
  std::vector<std::atomic<int>> a(8), b(8);
  std::thread other([&] {
    for (int r = 0; r < 50; ++r) interp::ParallelFor(8, [&](int p) { a[p].fetch_add(1); });
  });
  for (int r = 0; r < 50; ++r) interp::ParallelFor(8, [&](int p) { b[p].fetch_add(1); });
  other.join();
  for (int p = 0; p < 8; ++p) {
    EXPECT_EQ(a[p].load(), 50);
    EXPECT_EQ(b[p].load(), 50);
  }
  interp::SetIntraOpThreads(saved);
}

TEST(LoopFusion, IntegerAndPredChains) {
  ExpectFusedMatchesUnfused(R"(HloModule ints
ENTRY e {
  a = s32[7,300] parameter(0)
  b = s32[7,300] parameter(1)
  c = u8[300] parameter(2)
  d = s32[7,300] divide(a, b)
  r = s32[7,300] remainder(a, b)
  sh = s32[7,300] shift-right-arithmetic(d, r)
  x = s32[7,300] xor(sh, a)
  cb = u8[7,300] broadcast(c), dimensions={1}
  cw = s32[7,300] convert(cb)
  sum = s32[7,300] add(x, cw)
  p = pred[7,300] compare(sum, b), direction=LE
  q = pred[7,300] compare(a, cw), direction=NE
  pq = pred[7,300] and(p, q)
  np = pred[7,300] not(pq)
  f = f32[7,300] convert(sum)
  h = f16[7,300] convert(f)
  hs = f16[7,300] sqrt(h)
  z = s64[7,300] convert(hs)
  zb = s64[7,300] convert(np)
  ROOT o = s64[7,300] multiply(z, zb)
})", 11);
}

TEST(LoopFusion, TransposingAndScalarBroadcasts) {
  // A broadcast that transposes its operand, one into middle dims, select
  // with a scalar predicate and f64.
  ExpectFusedMatchesUnfused(R"(HloModule bcast
ENTRY e {
  x = f64[5,33,70] parameter(0)
  t = f64[70,5] parameter(1)
  m = f64[33] parameter(2)
  p = pred[] parameter(3)
  tb = f64[5,33,70] broadcast(t), dimensions={2,0}
  mb = f64[5,33,70] broadcast(m), dimensions={1}
  a = f64[5,33,70] atan2(x, tb)
  b = f64[5,33,70] power(mb, a)
  c = f64[5,33,70] maximum(b, x)
  d = f64[5,33,70] minimum(c, tb)
  ROOT s = f64[5,33,70] select(p, d, a)
})", 3);
}

TEST(LoopFusion, SharedValuesStayOutsideTheLoop) {
  // `a` is also a result, so it is computed on its own and read by the
  // loop; the broadcast feeds two loops and a non-loop user (a reduce), so
  // it is materialised once and also read in place by each loop.
  const std::string hlo = R"(HloModule shared
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
ENTRY e {
  x = f32[40,30] parameter(0)
  v = f32[30] parameter(1)
  vb = f32[40,30] broadcast(v), dimensions={1}
  a = f32[40,30] add(x, vb)
  n = f32[40,30] negate(a)
  l = f32[40,30] log(n)
  e2 = f32[40,30] exponential(x)
  m = f32[40,30] multiply(e2, vb)
  zero = f32[] constant(0)
  red = f32[40] reduce(vb, zero), dimensions={1}, to_apply=add
  rb = f32[40,30] broadcast(red), dimensions={0}
  k = f32[40,30] add(m, rb)
  ROOT out = (f32[40,30], f32[40,30], f32[40,30]) tuple(a, l, k)
})";
  auto m = ParseModuleText(hlo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  LoopFusionPlan plan = PlanOf(**m);
  ASSERT_EQ(plan.loops.size(), 3u);  // {a}+vb, {n, l}, {e2, m, k}+vb+rb
  std::set<std::string> absorbed;
  for (const Instruction* i : plan.absorbed) absorbed.insert(i->name());
  EXPECT_EQ(absorbed, (std::set<std::string>{"n", "e2", "m", "rb"}));
  ExpectFusedMatchesUnfused(hlo, 17);
}

// A large op on its own is a one-node loop, so that it too splits over the
// intra-op threads; the same bits on 1-3 threads, donated (the output takes
// x's buffer: written in place, not streamed) or not.
TEST(LoopFusion, LargeSingleOpIsALoop) {
  const std::string d = std::to_string(interp::StreamingBytes() / 4 / 512 + 3) + ",512";
  const std::string hlo = "HloModule big\nENTRY e {\n  x = f32[" + d + "] parameter(0)\n"
                          "  y = f32[" + d + "] parameter(1)\n"
                          "  ROOT a = f32[" + d + "] maximum(x, y)\n}\n";
  auto m = ParseModuleText(hlo);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(PlanOf(**m).loops.size(), 1u);
  const int saved = interp::IntraOpThreads();
  for (int threads : {1, 2, 3}) {
    interp::SetIntraOpThreads(threads);
    ExpectFusedMatchesUnfused(hlo, 60 + threads);
  }
  interp::SetIntraOpThreads(saved);
}

TEST(LoopFusion, SingleOpsAreNotFused) {
  auto m = ParseModuleText(R"(HloModule single
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  ROOT a = f32[8] add(x, y)
})");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(PlanOf(**m).loops.empty());
}

TEST(LoopFusion, OffMeansNoLoops) {
  auto m = ParseModuleText(MixedChain(3, 5));
  ASSERT_TRUE(m.ok());
  FusionOff off;
  EXPECT_TRUE(PlanOf(**m).loops.empty());
}

TEST(LoopFusion, InsideWhileBodies) {
  // The body's chain is fused too, and its state buffer is donated to the
  // loop's output on every iteration.
  ExpectFusedMatchesUnfused(R"(HloModule w
cond {
  s = (s32[], f32[300]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[300]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[300] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  k = f32[] constant(0.25)
  kb = f32[300] broadcast(k), dimensions={}
  m = f32[300] multiply(v, kb)
  c = f32[300] cosine(m)
  v2 = f32[300] add(c, v)
  ROOT t = (s32[], f32[300]) tuple(i2, v2)
}
ENTRY e {
  x = f32[300] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[300]) tuple(z, x)
  w = (s32[], f32[300]) while(t), condition=cond, body=body
  ROOT r = f32[300] get-tuple-element(w), index=1
})", 23);
}

}  // namespace
}  // namespace meshsplit::rttest
