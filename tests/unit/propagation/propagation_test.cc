// End-to-end tests of the propagation driver on small modules: forward and
// backward passes, aggressiveness, merging, user shardings kept, control
// flow, strict mode, provenance; and the conformance regression gate.
#include <gtest/gtest.h>

#include <filesystem>

#include "../shared_data.h"
#include "ir/computation.h"
#include "verify/conformance_propagation.h"
#include "propagation/propagation.h"
#include "sharding/sharding.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

class PropagationTest : public ::testing::Test {
 protected:
  StatusOr<bool> Run(const std::string& text, PropagationOptions o = {}) {
    auto m = ParseModuleText(text);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return m.status();
    module_ = std::move(*m);
    report_ = PropagationReport();
    return PropagateShardings(*module_, o, &report_);
  }
  std::string S(const std::string& name) {
    for (const auto& c : module_->computations())
      if (Instruction* i = c->Find(name))
        return i->has_sharding() ? i->sharding()->ToString(false) : "<none>";
    return "<missing>";
  }
  bool Same(const std::string& name, const std::string& want) {
    std::string got = S(name);
    if (got == "<none>" || got == "<missing>") return false;
    auto a = Sharding::Parse(got);
    auto b = Sharding::Parse(want);
    return a.ok() && b.ok() && *a == *b;
  }
  std::unique_ptr<Module> module_;
  PropagationReport report_;
};

TEST_F(PropagationTest, ForwardThroughElementwiseAndTranspose) {
  ASSERT_TRUE(Run(R"(HloModule m
ENTRY e {
  p = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}
  n = f32[8,4] negate(p)
  t = f32[4,8] transpose(n), dimensions={1,0}
  ROOT c = f32[4,8] copy(t)
})").ok());
  EXPECT_TRUE(Same("n", "{devices=[2,1]0,1}"));
  EXPECT_TRUE(Same("t", "{devices=[1,2]0,1}"));
  EXPECT_EQ(S("c"), "<none>");  // the entry root is not ours to change
}

// An annotation that does not fit its value (wrong tile rank, a tuple
// sharding on an array) is a located input error, not a crash.
TEST_F(PropagationTest, AnnotationNotFittingTheShapeIsAnError) {
  auto r = Run(R"(HloModule m
ENTRY e {
  p = f32[8,4] parameter(0), sharding={{devices=[2,1]0,1}, {replicated}}
  ROOT n = f32[8,4] negate(p)
})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not fit"), std::string::npos)
      << r.status().ToString();
  r = Run(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0), sharding={devices=[2,2]<=[4]}
  ROOT n = f32[8] negate(p)
})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not fit"), std::string::npos);
}

// An unknown sharding becomes the replicated one it stands for; like XLA,
// that alone is not reported as a change.
TEST_F(PropagationTest, UnknownToReplicatedIsNoChange) {
  auto r = Run(R"(HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  n = f32[8] negate(a), sharding={unknown}
  ROOT c = f32[8] copy(n)
})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(S("n"), "{replicated}");
}

// A while body whose channel all-reduce sits on one device cannot hold an
// instruction placed on another (XLA rejects the module the same way).
TEST_F(PropagationTest, WhileBodyDeviceConflictIsAnError) {
  auto r = Run(R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
cond {
  cp = (f32[8], s32[]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=1
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}
body {
  bp = (f32[8], s32[]) parameter(0)
  x = f32[8] get-tuple-element(bp), index=0
  i = s32[] get-tuple-element(bp), index=1
  n = f32[8] negate(x), sharding={maximal device=0}
  ar = f32[8] all-reduce(n), channel_id=1, replica_groups={}, to_apply=add, sharding={maximal device=1}
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (f32[8], s32[]) tuple(ar, j)
}
ENTRY e {
  a = f32[8] parameter(0)
  z = s32[] constant(0)
  init = (f32[8], s32[]) tuple(a, z)
  w = (f32[8], s32[]) while(init), condition=cond, body=body
  ROOT out = f32[8] get-tuple-element(w), index=0
})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("conflicts with device 1"),
            std::string::npos)
      << r.status().ToString();
}

// Removing a shard barrier that nothing flowed through is not a change (XLA
// does not count it either); an annotation read as a copy is.
TEST_F(PropagationTest, BarrierRemovalAloneIsNoChange) {
  auto r = Run(R"(HloModule m
ENTRY e {
  a = f32[8,4] parameter(0)
  n = f32[8,4] negate(a), sharding={devices=[2,1]0,1}
  b = f32[8,4] custom-call(n), custom_call_target="ShardBarrierFrom", custom_call_has_side_effect=true
  ROOT c = f32[8,4] copy(b)
})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  r = Run(R"(HloModule m
ENTRY e {
  a = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}
  s = f32[8,4] custom-call(a), custom_call_target="Sharding", sharding={devices=[2,1]0,1}
  ROOT c = f32[8,4] copy(s)
})");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
}

TEST_F(PropagationTest, BackwardThroughBroadcastNeedsAggressiveness) {
  ASSERT_TRUE(Run(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  c = f32[8] copy(p)
  b = f32[4,8] broadcast(c), dimensions={1}
  ROOT r = f32[4,8] copy(b), sharding={devices=[2,2]0,1,2,3}
})").ok());
  EXPECT_TRUE(Same("b", "{devices=[2,2]0,1,2,3}"));
  EXPECT_TRUE(Same("c", "{devices=[2,2]0,2,1,3 last_tile_dim_replicate}"));
}

TEST_F(PropagationTest, MergesPartialShardingsFromTwoOperands) {
  ASSERT_TRUE(Run(R"(HloModule m
ENTRY e {
  a = f32[8,8] parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}
  b = f32[8,8] parameter(1), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}
  s = f32[8,8] add(a, b)
  ROOT r = f32[8,8] copy(s)
})").ok());
  EXPECT_TRUE(Same("s", "{devices=[2,2]0,1,2,3}"));
}

TEST_F(PropagationTest, NoMergingOutsideSpmd) {
  PropagationOptions o;
  o.is_spmd = false;
  ASSERT_TRUE(Run(R"(HloModule m
ENTRY e {
  a = f32[8,8] parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}
  b = f32[8,8] parameter(1), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}
  s = f32[8,8] add(a, b)
  ROOT r = f32[8,8] copy(s)
})", o).ok());
  EXPECT_TRUE(Same("s", "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"));
}

TEST_F(PropagationTest, UserShardingsAreKept) {
  auto changed = Run(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0), sharding={devices=[2]0,1}
  c = f32[8] copy(p), sharding={replicated}
  ROOT r = f32[8] copy(c), sharding={devices=[2]1,0}
})");
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(S("c"), "{replicated}");
}

TEST_F(PropagationTest, WhileLoopValuesShareOneSharding) {
  ASSERT_TRUE(Run(R"(HloModule m
cond {
  cp = (f32[8], s32[]) parameter(0)
  i = s32[] get-tuple-element(cp), index=1
  four = s32[] constant(4)
  ROOT lt = pred[] compare(i, four), direction=LT
}
body {
  bp = (f32[8], s32[]) parameter(0)
  x = f32[8] get-tuple-element(bp), index=0
  i = s32[] get-tuple-element(bp), index=1
  y = f32[8] negate(x)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (f32[8], s32[]) tuple(y, j)
}
ENTRY e {
  p = f32[8] parameter(0), sharding={devices=[2]0,1}
  z = s32[] constant(0)
  init = (f32[8], s32[]) tuple(p, z)
  w = (f32[8], s32[]) while(init), condition=cond, body=body
  ROOT out = f32[8] get-tuple-element(w), index=0
})").ok());
  const std::string want = "{{devices=[2]0,1}, {replicated}}";
  EXPECT_TRUE(Same("w", want)) << S("w");
  EXPECT_TRUE(Same("bp", want)) << S("bp");
  EXPECT_TRUE(Same("cp", want)) << S("cp");
  EXPECT_TRUE(Same("t", want)) << S("t");
  EXPECT_TRUE(Same("y", "{devices=[2]0,1}"));
}

TEST_F(PropagationTest, StrictRejectsOpsWithoutRules) {
  PropagationOptions o;
  o.strict = true;
  auto r = Run(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0), sharding={devices=[2]0,1}
  ROOT b = s32[8] bitcast(p)
})", o);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bitcast"), std::string::npos);
  auto w = Run(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0), sharding={devices=[2]0,1}
  ROOT b = s32[8] bitcast(p)
})");
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(report_.warnings.size(), 1u);
  EXPECT_NE(report_.warnings[0].find("bitcast"), std::string::npos);
}

TEST_F(PropagationTest, RecordsProvenance) {
  ASSERT_TRUE(Run(R"(HloModule m
ENTRY e {
  p = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}
  n = f32[8,4] negate(p)
  ROOT c = f32[8,4] copy(n)
})").ok());
  auto it = report_.history.find("n");
  ASSERT_NE(it, report_.history.end());
  ASSERT_FALSE(it->second.empty());
  EXPECT_EQ(it->second.back().sources, std::vector<std::string>{"p"});
  EXPECT_EQ(it->second.back().rule, "elementwise");
}

TEST_F(PropagationTest, CsePreventionOnlyMarksScalarBroadcasts) {
  const std::string text = R"(HloModule m
ENTRY e {
  p0 = f32[] parameter(0), sharding={replicated}
  br = f32[4] broadcast(p0), dimensions={}
  a = f32[4] add(br, br)
  p1 = f32[4] parameter(1), sharding={devices=[2]0,1}
  m = f32[4] multiply(a, p1)
  ROOT c = f32[4] copy(m), sharding={devices=[2]0,1}
})";
  PropagationOptions o;
  o.cse_prevention_only = true;
  ASSERT_TRUE(Run(text, o).ok());
  EXPECT_TRUE(Same("br", "{devices=[2]0,1}"));
  EXPECT_EQ(S("a"), "<none>");  // everything else is restored
  EXPECT_EQ(S("m"), "<none>");
  // A normal run afterwards drops the CSE-prevention sharding first.
  Instruction* br = module_->entry()->Find("br");
  ASSERT_NE(br, nullptr);
  EXPECT_NE(br->sharding()->ToString(true).find("cse_prevention"), std::string::npos);
}

// The public XLA propagation corpus: the pass rate must not drop below the
// rate reached when this test was written (203 of 203).
TEST(ConformanceTest, XlaPropagationCorpusDoesNotRegress) {
  const std::string dir =
      std::string(MESHSPLIT_SHARED_DIR) + "/conformance/xla/propagation";
  MESHSPLIT_SKIP_WITHOUT_SHARED("conformance/xla/propagation");
  auto summary = RunPropagationConformance(dir);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  for (const auto& c : summary->cases)
    if (!c.passed)
      ADD_FAILURE() << c.name << ": " << (c.failures.empty() ? "" : c.failures[0]);
  EXPECT_GE(summary->passed, 203);
}

// The audit cases (tests/golden/propagation/Inputs/audit, see
// docs/propagation_audit.md): small modules written for the audit against
// XLA's propagation code, in the corpus format, each with the result XLA's
// rules give. All must pass.
TEST(ConformanceTest, AuditCasesPass) {
  const std::string dir = std::string(MESHSPLIT_SOURCE_DIR) +
                          "/tests/golden/propagation/Inputs/audit";
  auto summary = RunPropagationConformance(dir);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  for (const auto& c : summary->cases)
    if (!c.passed)
      for (const auto& f : c.failures) ADD_FAILURE() << c.name << ": " << f;
  EXPECT_EQ(summary->failed, 0);
  EXPECT_GT(summary->passed, 0);
}

// Async ops whose wrapped computation runs on a thread the pass does not
// propagate over (execution_threads={main}) take a {manual} operand's
// sharding whole, as XLA does: tuple-shaped on the start and the update,
// plain on the done. The wrapped computation itself is left alone.
constexpr char kAsyncOnOtherThread[] = R"(HloModule m, num_partitions=2
wrapped {
  a = f32[8,4] parameter(0)
  ROOT n = f32[8,4] negate(a)
}, execution_thread="parallel_thread"

ENTRY e {
  p = f32[8,4] parameter(0), sharding={manual}
  start = ((f32[8,4]), f32[8,4], s32[]) async-start(p), calls=wrapped, async_execution_thread="parallel_thread"
  UPDATE
  done = f32[8,4] async-done(LAST), calls=wrapped
  ROOT r = f32[8,4] copy(done)
})";

std::string AsyncCase(bool with_update) {
  std::string text = kAsyncOnOtherThread;
  auto put = [&](const std::string& key, const std::string& value) {
    text.replace(text.find(key), key.size(), value);
  };
  put("UPDATE", with_update ? "update = ((f32[8,4]), f32[8,4], s32[]) async-update(start), calls=wrapped" : "");
  put("LAST", with_update ? "update" : "start");
  return text;
}

TEST_F(PropagationTest, AsyncStartAndDoneOnAnotherThreadTakeManual) {
  PropagationOptions o;
  o.execution_threads = {"main"};
  ASSERT_TRUE(Run(AsyncCase(/*with_update=*/false), o).ok());
  EXPECT_EQ(S("start"), "{{manual}, {manual}, {manual}}");
  EXPECT_EQ(S("done"), "{manual}");
  EXPECT_EQ(S("a"), "<none>");
  EXPECT_EQ(S("n"), "<none>");
}

TEST_F(PropagationTest, AsyncUpdateOnAnotherThreadTakesManual) {
  PropagationOptions o;
  o.execution_threads = {"main"};
  ASSERT_TRUE(Run(AsyncCase(/*with_update=*/true), o).ok());
  EXPECT_EQ(S("start"), "{{manual}, {manual}, {manual}}");
  EXPECT_EQ(S("update"), "{{manual}, {manual}, {manual}}");
  EXPECT_EQ(S("done"), "{manual}");
  EXPECT_EQ(S("n"), "<none>");
}

}  // namespace
}  // namespace meshsplit
