// Tests of the collective checker (compiler/collective_check.h): programs
// the partitioner emits pass with their collectives compared against a
// sharding; the same programs with one collective's groups or pairs broken
// (the kinds of mistake a wrong group construction would make) are reported,
// naming the collective and the input instruction it serves.
#include "compiler/collective_check.h"

#include <gtest/gtest.h>

#include "verify/verify.h"

#include "parse_for_test.h"

namespace meshsplit {
namespace {

using spmd_test::Parse;

// Partitions `text` (no propagation) for its header's device count.
struct Partitioned {
  std::unique_ptr<Module> original, program;
};

Partitioned PartitionText(const std::string& text) {
  Partitioned p;
  p.original = Parse(text);
  if (!p.original) return p;
  auto out = PropagateAndPartition(*p.original, p.original->num_partitions(),
                                   /*propagate=*/false, /*strict=*/false);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (out.ok()) p.program = std::move(out).value();
  return p;
}

Instruction* First(Module& m, Opcode op) {
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions())
      if (i->opcode() == op) return i.get();
  return nullptr;
}

ReplicaGroups Explicit(std::vector<std::vector<int64_t>> groups) {
  ReplicaGroups g;
  g.groups = std::move(groups);
  return g;
}

std::string Problems(const CollectiveCheckResult& r) { return r.ToStatus().ToString(); }

// x is tiled 2 x 2 over a transposed iota and gathered whole along dim 0;
// its groups are the device pairs that differ in their dim-0 tile.
constexpr char kGather[] = R"(
HloModule g, num_partitions=4
ENTRY e {
  x = f32[8,6] parameter(0), sharding={devices=[2,2]<=[2,2]T(1,0)}
  ROOT c = f32[8,6] copy(x), sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}
})";

TEST(CollectiveCheck, PartitionerGatherAgreesWithShardings) {
  Partitioned p = PartitionText(kGather);
  ASSERT_TRUE(p.program);
  ASSERT_NE(First(*p.program, Opcode::kAllGather), nullptr);
  CollectiveCheckResult r = CheckCollectives(*p.program, p.original.get(), 4);
  EXPECT_TRUE(r.ok()) << Problems(r);
  EXPECT_GE(r.checked, 1);
}

TEST(CollectiveCheck, GatherInWrongOrderIsReported) {
  Partitioned p = PartitionText(kGather);
  ASSERT_TRUE(p.program);
  Instruction* ag = First(*p.program, Opcode::kAllGather);
  ASSERT_NE(ag, nullptr);
  std::vector<std::vector<int64_t>> groups = ag->attrs().replica_groups->Expand();
  for (auto& g : groups) std::reverse(g.begin(), g.end());  // tile 1 before tile 0
  ag->mutable_attrs().replica_groups = Explicit(groups);
  CollectiveCheckResult r = CheckCollectives(*p.program, p.original.get(), 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Problems(r).find("all-gather %" + ag->name()), std::string::npos) << Problems(r);
  EXPECT_NE(Problems(r).find("for %c"), std::string::npos) << Problems(r);
  EXPECT_NE(Problems(r).find("not in tile order"), std::string::npos) << Problems(r);
}

TEST(CollectiveCheck, GatherOfTheWrongDevicesIsReported) {
  Partitioned p = PartitionText(kGather);
  ASSERT_TRUE(p.program);
  Instruction* ag = First(*p.program, Opcode::kAllGather);
  ASSERT_NE(ag, nullptr);
  // Pairs that differ in the dim-1 tile (and hold the same dim-0 rows):
  // with [2,2]<=[2,2]T(1,0) devices 0,1 share dim-0 tile 0... (0:(0,0),
  // 1:(1,0), 2:(0,1), 3:(1,1)), so {0,2} and {1,3} differ only in dim 1.
  ag->mutable_attrs().replica_groups = Explicit({{0, 2}, {1, 3}});
  CollectiveCheckResult r = CheckCollectives(*p.program, p.original.get(), 4);
  EXPECT_TRUE(r.ok()) << "a gather along dim 1 also agrees with the operand: "
                      << Problems(r);
  // Devices that hold the same piece: a gather would concatenate it twice.
  ag->mutable_attrs().replica_groups = Explicit({{0, 0}, {1, 3}});
  EXPECT_FALSE(CheckCollectives(*p.program, p.original.get(), 4).ok());
}

// Partial sums of a dot over a contracting dim split 2 ways, each piece on
// two devices (partially replicated): devices 0, 1 hold piece 0 and 2, 3
// piece 1, so the sums run over {0,2} and {1,3}.
constexpr char kDot[] = R"(
HloModule d, num_partitions=4
ENTRY e {
  a = f32[4,8] parameter(0), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}
  b = f32[8,6] parameter(1), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
  ROOT d = f32[4,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
})";

TEST(CollectiveCheck, PartialSumOverTheSamePieceTwiceIsReported) {
  Partitioned p = PartitionText(kDot);
  ASSERT_TRUE(p.program);
  Instruction* ar = First(*p.program, Opcode::kAllReduce);
  ASSERT_NE(ar, nullptr);
  CollectiveCheckResult ok = CheckCollectives(*p.program, p.original.get(), 4);
  EXPECT_TRUE(ok.ok()) << Problems(ok);
  EXPECT_GE(ok.checked, 1);
  // Summing the two copies of one piece counts it twice.
  ar->mutable_attrs().replica_groups = Explicit({{0, 1}, {2, 3}});
  CollectiveCheckResult r = CheckCollectives(*p.program, p.original.get(), 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Problems(r).find("all-reduce %" + ar->name()), std::string::npos) << Problems(r);
  EXPECT_NE(Problems(r).find("for %d"), std::string::npos) << Problems(r);
  EXPECT_NE(Problems(r).find("piece twice"), std::string::npos) << Problems(r);
}

TEST(CollectiveCheck, StructuralRules) {
  Partitioned p = PartitionText(kDot);
  ASSERT_TRUE(p.program);
  Instruction* ar = First(*p.program, Opcode::kAllReduce);
  ASSERT_NE(ar, nullptr);
  auto problems = [&](ReplicaGroups g) {
    ar->mutable_attrs().replica_groups = std::move(g);
    return Problems(CheckCollectives(*p.program, p.original.get(), 4));
  };
  EXPECT_NE(problems(Explicit({{0, 1}, {2}})).find("different sizes"), std::string::npos);
  EXPECT_NE(problems(Explicit({{0, 1}, {1, 2}})).find("device 1 is in two groups"),
            std::string::npos);
  EXPECT_NE(problems(Explicit({{0, 1}, {2, 5}})).find("outside [0, 4)"), std::string::npos);
  EXPECT_NE(problems(Explicit({{0, 1, 2}})).find("device 3 is in no replica group"),
            std::string::npos);
}

TEST(CollectiveCheck, PermutePairsMustBeAPermutation) {
  // x tiled over devices in one order, the result in another: a
  // collective-permute moves each tile to its new device.
  Partitioned p = PartitionText(R"(
HloModule p, num_partitions=4
ENTRY e {
  x = f32[8] parameter(0), sharding={devices=[4]0,1,2,3}
  ROOT c = f32[8] copy(x), sharding={devices=[4]1,0,3,2}
})");
  ASSERT_TRUE(p.program);
  Instruction* cp = First(*p.program, Opcode::kCollectivePermute);
  ASSERT_NE(cp, nullptr);
  EXPECT_TRUE(CheckCollectives(*p.program, p.original.get(), 4).ok());
  auto pairs = cp->attrs().source_target_pairs;
  ASSERT_GE(pairs.size(), 2u);
  pairs[1].second = pairs[0].second;
  cp->mutable_attrs().source_target_pairs = pairs;
  std::string why = Problems(CheckCollectives(*p.program, p.original.get(), 4));
  EXPECT_NE(why.find("collective-permute %" + cp->name()), std::string::npos) << why;
  EXPECT_NE(why.find("is the target of two pairs"), std::string::npos) << why;
}

// Partially manual: data=2 x stage=2 with stage manual. A collective over
// the data dim stays inside each manual subgroup; one across subgroups is
// reported.
TEST(CollectiveCheck, GroupsCrossingManualSubgroupsAreReported) {
  Partitioned p = PartitionText(R"(
HloModule m, num_partitions=4
ENTRY e {
  x = f32[8,6] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dims={manual}}
  ROOT c = f32[8,6] copy(x), sharding={devices=[1,1,2,2]<=[4] last_tile_dims={replicated, manual}}
})");
  ASSERT_TRUE(p.program);
  Instruction* ag = First(*p.program, Opcode::kAllGather);
  ASSERT_NE(ag, nullptr);
  CollectiveCheckResult ok = CheckCollectives(*p.program, p.original.get(), 4);
  EXPECT_TRUE(ok.ok()) << Problems(ok);
  // Devices (data, stage): 0 (0,0), 1 (0,1), 2 (1,0), 3 (1,1). {0,3} holds
  // both data tiles but crosses stages.
  ag->mutable_attrs().replica_groups = Explicit({{0, 3}, {2, 1}});
  std::string why = Problems(CheckCollectives(*p.program, p.original.get(), 4));
  EXPECT_NE(why.find("crosses manual subgroups"), std::string::npos) << why;
}

}  // namespace
}  // namespace meshsplit
