// Tests of the N-device reference semantics (runtime/reference.h) and the
// per-device verification built on it: manual regions with collectives,
// partition-id, unreduced and manual entry values, infeed / outfeed. Each
// correct program is paired with a deliberately wrong one that must fail.
#include "runtime/reference.h"

#include <gtest/gtest.h>

#include "runtime/device_layout.h"
#include "runtime/executor.h"
#include "verify/verify.h"
#include "text/parser.h"

#include "parse_for_test.h"

namespace meshsplit {
namespace {

using spmd_test::Parse;

VerifyResult Verify(const std::string& original, const std::string& partitioned, int64_t n,
                    uint64_t seed = 1) {
  auto o = Parse(original);
  auto p = Parse(partitioned);
  if (!o || !p) return VerifyResult{"parse"};
  VerifyOptions opts;
  opts.num_partitions = n;
  opts.seed = seed;
  opts.propagate = false;
  return VerifyPartitioned(*o, *p, opts);
}

constexpr char kAdd[] = R"(
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
)";

// A manual region summing the two row blocks of p across the devices.
std::string ManualAllReduceOriginal() {
  return std::string("HloModule m, num_partitions=2\n") + kAdd + R"(
ENTRY e {
  p = f32[4,3] parameter(0), sharding={devices=[2,1]0,1}
  m = f32[2,3] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={manual}
  ar = f32[2,3] all-reduce(m), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add, sharding={manual}
  ROOT f = f32[4,3] custom-call(ar), custom_call_target="SPMDShardToFullShape", sharding={devices=[2,1]0,1}
})";
}

std::string ManualAllReducePartitioned(const std::string& groups) {
  return std::string("HloModule m, num_partitions=2\n") + kAdd + R"(
ENTRY e {
  p = f32[2,3] parameter(0), sharding={devices=[2,1]0,1}
  m = f32[2,3] copy(p)
  ar = f32[2,3] all-reduce(m), channel_id=1, replica_groups=)" +
         groups + R"(, use_global_device_ids=true, to_apply=add
  ROOT f = f32[2,3] copy(ar), sharding={devices=[2,1]0,1}
})";
}

TEST(Reference, ManualRegionRunsOnAllDevices) {
  auto m = Parse(ManualAllReduceOriginal());
  ASSERT_TRUE(m);
  EXPECT_NE(DeviceReferenceReason(*m), "");
  // p = rows 0..3 with value 10*row + col.
  Literal p(Shape(PrimitiveType::F32, {4, 3}));
  for (int64_t i = 0; i < 12; ++i) p.SetDouble(i, 10 * (i / 3) + i % 3);
  std::vector<std::vector<Literal>> args(2);
  args[0].push_back(p);
  args[1].push_back(p);
  FeedState feeds(*m, 2, 0, true);
  auto out = RunOnDevices(*m, std::move(args), 2, ReferenceRunOptions(&feeds, true));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // Each device saw its block; the all-reduce summed them; the result is
  // the sum block twice, whole on both devices.
  for (int d = 0; d < 2; ++d)
    for (int64_t i = 0; i < 12; ++i) {
      int64_t r = (i / 3) % 2, c = i % 3;
      EXPECT_EQ((*out)[d].GetDouble(i), (10 * r + c) + (10 * (r + 2) + c)) << d << " " << i;
    }
}

TEST(Reference, ManualAllReduceVerifies) {
  VerifyResult r = Verify(ManualAllReduceOriginal(), ManualAllReducePartitioned("{{0,1}}"), 2);
  EXPECT_TRUE(r.ok()) << r.status << ": " << r.message;
  EXPECT_NE(r.reference_reason, "");
}

TEST(Reference, CorruptedAllReduceGroupFails) {
  VerifyResult r = Verify(ManualAllReduceOriginal(), ManualAllReducePartitioned("{{0},{1}}"), 2);
  EXPECT_EQ(r.status, "mismatch") << r.message;
}

TEST(Reference, PartitionerOutputWithCorruptedCollectiveFails) {
  // The real partitioner on a module with a manual region, a replicated
  // column sum (an all-reduce) and a replicated copy (an all-gather).
  // Breaking either collective of its output must make verification fail.
  const std::string original = std::string("HloModule m, num_partitions=2\n") + kAdd + R"(
ENTRY e {
  p = f32[4,3] parameter(0), sharding={devices=[2,1]0,1}
  m = f32[2,3] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={manual}
  n = f32[2,3] negate(m), sharding={manual}
  f = f32[4,3] custom-call(n), custom_call_target="SPMDShardToFullShape", sharding={devices=[2,1]0,1}
  zero = f32[] constant(0)
  r = f32[3] reduce(p, zero), dimensions={0}, to_apply=add, sharding={replicated}
  g = f32[4,3] copy(p), sharding={replicated}
  ROOT t = (f32[4,3], f32[3], f32[4,3]) tuple(f, r, g), sharding={{devices=[2,1]0,1}, {replicated}, {replicated}}
})";
  VerifyOptions opts;
  opts.num_partitions = 2;
  opts.propagate = false;
  int kinds_broken = 0;
  for (Opcode kind : {Opcode::kAllGather, Opcode::kAllReduce}) {
    auto o = Parse(original);
    ASSERT_TRUE(o);
    auto p = PropagateAndPartition(*o, 2, /*propagate=*/false, /*strict=*/false);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    VerifyResult good = VerifyPartitioned(*o, **p, opts);
    ASSERT_TRUE(good.ok()) << good.status << ": " << good.message;
    EXPECT_NE(good.reference_reason, "");
    for (const auto& instr : (*p)->entry()->instructions()) {
      if (instr->opcode() != kind) continue;
      ReplicaGroups g;
      // all-reduce: each device alone; all-gather: the blocks swapped.
      g.groups = kind == Opcode::kAllReduce ? std::vector<std::vector<int64_t>>{{0}, {1}}
                                            : std::vector<std::vector<int64_t>>{{1, 0}};
      instr->mutable_attrs().replica_groups = g;
      ++kinds_broken;
      break;
    }
    // A wrong replicated value shows either as a wrong value or as
    // replicas that disagree.
    VerifyResult bad = VerifyPartitioned(*o, **p, opts);
    EXPECT_TRUE(bad.status == "mismatch" || bad.status == "assemble")
        << OpcodeName(kind) << ": " << bad.status << ": " << bad.message;
  }
  EXPECT_EQ(kinds_broken, 2);
}

TEST(Reference, PartitionIdUnderManualSharding) {
  const char* original = R"(HloModule m, num_partitions=4
ENTRY e {
  ROOT id = u32[] partition-id(), sharding={manual}
})";
  EXPECT_TRUE(Verify(original, R"(HloModule m, num_partitions=4
ENTRY e {
  ROOT id = u32[] partition-id(), sharding={manual}
})", 4).ok());
  VerifyResult bad = Verify(original, R"(HloModule m, num_partitions=4
ENTRY e {
  ROOT id = u32[] constant(0), sharding={manual}
})", 4);
  EXPECT_EQ(bad.status, "mismatch") << bad.message;
}

TEST(Reference, NonManualValueThatDependsOnTheDeviceIsNoReference) {
  // partition-id outside a manual region has no whole value: the reference
  // is refused, never compared as if it were one.
  VerifyResult r = Verify(R"(HloModule m, num_partitions=2
ENTRY e {
  ROOT id = u32[] partition-id(), sharding={replicated}
})", R"(HloModule m, num_partitions=2
ENTRY e {
  ROOT id = u32[] partition-id(), sharding={replicated}
})", 2);
  EXPECT_EQ(r.status, "reference") << r.message;
}

TEST(Reference, UnreducedParametersAreSummed) {
  const char* original = R"(HloModule m, num_partitions=2
ENTRY e {
  a = s32[2,4] parameter(0), sharding={unreduced}
  ROOT n = s32[2,4] negate(a), sharding={unreduced}
})";
  // Negation is linear: applying it to each partial value is correct.
  EXPECT_TRUE(Verify(original, R"(HloModule m, num_partitions=2
ENTRY e {
  a = s32[2,4] parameter(0), sharding={unreduced}
  ROOT n = s32[2,4] negate(a), sharding={unreduced}
})", 2).ok());
  // Squaring is not: the partial squares do not add up to the square.
  VerifyResult bad = Verify(R"(HloModule m, num_partitions=2
ENTRY e {
  a = s32[2,4] parameter(0), sharding={unreduced}
  ROOT n = s32[2,4] multiply(a, a), sharding={unreduced}
})", R"(HloModule m, num_partitions=2
ENTRY e {
  a = s32[2,4] parameter(0), sharding={unreduced}
  ROOT n = s32[2,4] multiply(a, a), sharding={unreduced}
})", 2);
  EXPECT_EQ(bad.status, "mismatch") << bad.message;
}

TEST(Reference, ManualParametersArePerDevice) {
  const char* original = R"(HloModule m, num_partitions=2
ENTRY e {
  a = f32[3] parameter(0), sharding={manual}
  ROOT t = f32[3] tanh(a), sharding={manual}
})";
  EXPECT_TRUE(Verify(original, original, 2).ok());
  // Swapping the devices' values is caught.
  VerifyResult bad = Verify(original, R"(HloModule m, num_partitions=2
ENTRY e {
  a = f32[3] parameter(0), sharding={manual}
  t = f32[3] tanh(a)
  ROOT s = f32[3] collective-permute(t), channel_id=1, source_target_pairs={{0,1},{1,0}}, sharding={manual}
})", 2);
  EXPECT_EQ(bad.status, "mismatch") << bad.message;
}

TEST(Reference, OutfeedPiecesAreCompared) {
  const char* original = R"(HloModule m, num_partitions=2
ENTRY e {
  tok = token[] after-all()
  d = f32[6] parameter(0), sharding={devices=[2]0,1}
  ROOT o = token[] outfeed(d, tok), sharding={devices=[2]0,1}
})";
  EXPECT_TRUE(Verify(original, R"(HloModule m, num_partitions=2
ENTRY e {
  tok = token[] after-all()
  d = f32[3] parameter(0), sharding={devices=[2]0,1}
  ROOT o = token[] outfeed(d, tok)
})", 2).ok());
  VerifyResult bad = Verify(original, R"(HloModule m, num_partitions=2
ENTRY e {
  tok = token[] after-all()
  d = f32[3] parameter(0), sharding={devices=[2]0,1}
  n = f32[3] negate(d)
  ROOT o = token[] outfeed(n, tok)
})", 2);
  EXPECT_EQ(bad.status, "mismatch") << bad.message;
}

TEST(Reference, InfeedGivesPiecesOrWholeValues) {
  const char* original = R"(HloModule m, num_partitions=2
ENTRY e {
  tok = token[] after-all()
  in = (f32[4,2], token[]) infeed(tok), sharding={{devices=[2,1]0,1}, {maximal device=0}}
  ROOT d = f32[4,2] get-tuple-element(in), index=0, sharding={devices=[2,1]0,1}
})";
  // The piece form (XLA's convention).
  EXPECT_TRUE(Verify(original, R"(HloModule m, num_partitions=2
ENTRY e {
  tok = token[] after-all()
  in = (f32[2,2], token[]) infeed(tok)
  ROOT d = f32[2,2] get-tuple-element(in), index=0, sharding={devices=[2,1]0,1}
})", 2).ok());
  // Reading the wrong rows of a whole infeed is caught.
  VerifyResult bad = Verify(original, R"(HloModule m, num_partitions=2
ENTRY e {
  tok = token[] after-all()
  in = (f32[4,2], token[]) infeed(tok)
  w = f32[4,2] get-tuple-element(in), index=0
  ROOT d = f32[2,2] slice(w), slice={[0:2], [0:2]}, sharding={devices=[2,1]0,1}
})", 2);
  EXPECT_EQ(bad.status, "mismatch") << bad.message;
}

TEST(DeviceLayout, PartiallyManualPlacement) {
  auto s = Sharding::Parse("{devices=[2,1,2]0,2,1,3 last_tile_dims={manual}}");
  ASSERT_TRUE(s.ok());
  auto places = PlaceDevices(*s, {4, 2}, 4);
  ASSERT_TRUE(places.ok()) << places.status().ToString();
  // The array is [[[0,2]],[[1,3]]]: devices 0 and 1 hold the two row tiles
  // of manual group 0, devices 2 and 3 those of group 1.
  EXPECT_EQ((*places)[0].manual_group, 0);
  EXPECT_EQ((*places)[1].manual_group, 0);
  EXPECT_EQ((*places)[2].manual_group, 1);
  EXPECT_EQ((*places)[3].manual_group, 1);
  EXPECT_EQ((*places)[0].offset, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ((*places)[1].offset, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ((*places)[2].offset, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ((*places)[3].offset, (std::vector<int64_t>{2, 0}));
}

}  // namespace
}  // namespace meshsplit
