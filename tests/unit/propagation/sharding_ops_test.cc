// Unit tests for propagation's sharding algebra: parsing and normal forms,
// merging of partial shardings, partial replication, factor projection,
// reshape and the "improve" decision.
#include <gtest/gtest.h>

#include "propagation/psharding.h"
#include "propagation/sharding_ops.h"

namespace meshsplit::propagation {
namespace {

PSharding P(const std::string& text) {
  auto s = PSharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? *s : PSharding();
}

void ExpectSame(const PSharding& got, const std::string& want) {
  EXPECT_TRUE(SemanticallyEqual(got, P(want)))
      << "got " << got.ToString() << ", want " << want;
}

TEST(PShardingTest, ParsesAndPrintsTheXlaForms) {
  EXPECT_EQ(P("{replicated}").ToString(), "{replicated}");
  EXPECT_EQ(P("{maximal device=3}").ToString(), "{maximal device=3}");
  EXPECT_EQ(P("{manual metadata={op_name=\"a\"}}").ToString(), "{manual}");
  EXPECT_EQ(P("{devices=[2,1]0,1}").ToString(), "{devices=[2,1]0,1}");
  EXPECT_EQ(P("{devices=[2,2]<=[4]}").ToString(), "{devices=[2,2]0,1,2,3}");
  EXPECT_EQ(P("{devices=[2,2]<=[2,2]T(1,0)}").ToString(), "{devices=[2,2]0,2,1,3}");
  EXPECT_EQ(P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}").ToString(),
            "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  EXPECT_EQ(P("{{replicated}, /*index=1*/{devices=[2]1,0}}").ToString(),
            "{{replicated}, {devices=[2]1,0}}");
  EXPECT_EQ(P("{unknown shard_as 2}").ToString(), "{unknown shard_as 2}");
  EXPECT_EQ(P("{devices=[2]0,1 shard_like 1}").ToString(),
            "{devices=[2]0,1 shard_like 1}");
  EXPECT_FALSE(PSharding::Parse("{devices=[2,2]0,1,2}").ok());
  EXPECT_FALSE(PSharding::Parse("{devices=[2]0,1").ok());
  EXPECT_FALSE(PSharding::Parse("{bogus}").ok());
}

TEST(PShardingTest, NormalisesSubgroupsLikeTheReadme) {
  // last_tile_dim_replicate == last_tile_dims={replicated}.
  ExpectSame(P("{devices=[2,2]0,1,2,3 last_tile_dims={replicated}}"),
             "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}");
  // Devices inside a replication group are unordered.
  ExpectSame(P("{devices=[2,2]1,0,3,2 last_tile_dim_replicate}"),
             "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}");
  // A size-1 subgroup dim disappears; all devices in one group = replicated.
  ExpectSame(P("{devices=[2,1]0,1 last_tile_dim_replicate}"), "{devices=[2]0,1}");
  ExpectSame(P("{devices=[1,4]0,1,2,3 last_tile_dim_replicate}"), "{replicated}");
  ExpectSame(P("{devices=[1,1,4]0,1,2,3 last_tile_dims={manual}}"), "{manual}");
  // Replicated then manual is reordered to manual then replicated.
  ExpectSame(P("{devices=[2,2,2]<=[8] last_tile_dims={replicated, manual}}"),
             "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={manual, replicated}}");
  EXPECT_FALSE(SemanticallyEqual(P("{devices=[2]0,1}"), P("{devices=[2]1,0}")));
  EXPECT_FALSE(SemanticallyEqual(P("{maximal device=0}"), P("{replicated}")));
}

TEST(MergeTest, CombinesCompatiblePartialShardings) {
  PSharding dst = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  PSharding from = P("{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}");
  ASSERT_TRUE(MergeShardingIfCompatible(from, &dst));
  ExpectSame(dst, "{devices=[2,2]0,1,2,3}");
}

TEST(MergeTest, RejectsIncompatibleDeviceGroups) {
  // Rows {0,1},{2,3} versus columns {0,1},{2,3}: no device is in both the
  // row-0 and column-1 groups.
  PSharding dst = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  PSharding from = P("{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}");
  EXPECT_FALSE(MergeShardingIfCompatible(from, &dst));
  // Tiling the same dim differently cannot merge either.
  PSharding a = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  EXPECT_FALSE(MergeShardingIfCompatible(P("{devices=[4,1]0,1,2,3}"), &a));
}

TEST(MergeTest, MergeShardingOnlyCombinesWhenAllowed) {
  PSharding dst = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  PSharding from = P("{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}");
  PSharding copy = dst;
  EXPECT_FALSE(MergeSharding(from, &copy, /*may_combine_partial_sharding=*/false));
  EXPECT_TRUE(MergeSharding(from, &dst, /*may_combine_partial_sharding=*/true));
  ExpectSame(dst, "{devices=[2,2]0,1,2,3}");
}

TEST(SpecificityTest, OrdersByTileCount) {
  EXPECT_TRUE(IsShardingMoreSpecific(P("{devices=[2,2]<=[4]}"),
                                     P("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")));
  EXPECT_TRUE(IsShardingMoreSpecific(P("{devices=[2]0,1}"), P("{replicated}")));
  EXPECT_FALSE(IsShardingMoreSpecific(P("{replicated}"), P("{devices=[2]0,1}")));
  EXPECT_TRUE(IsShardingMoreSpecific(P("{manual}"), P("{replicated}")));
  EXPECT_FALSE(IsShardingMoreSpecific(P("{devices=[2]0,1}"), P("{manual}")));
}

TEST(ImproveTest, KeepsExistingTilingUnlessCompatible) {
  Shape shape(PrimitiveType::F32, {8, 8});
  PSharding cur = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  // Same number of tiles but on another dim: not an improvement.
  EXPECT_FALSE(ReturnImprovedSharding(P("{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}"),
                                      &cur, shape, true, false));
  // A refinement of the current tiling is.
  auto r = ReturnImprovedSharding(P("{devices=[2,2]0,1,2,3}"), &cur, shape, true, false);
  ASSERT_TRUE(r.has_value());
  ExpectSame(*r, "{devices=[2,2]0,1,2,3}");
  // Anything spatially partitioned beats nothing; maximal never propagates.
  EXPECT_TRUE(ReturnImprovedSharding(P("{replicated}"), nullptr, shape, true, false));
  EXPECT_FALSE(ReturnImprovedSharding(P("{maximal device=1}"), nullptr, shape, true, false));
}

TEST(ReplicationTest, PartiallyReplicatesDims) {
  PSharding s = P("{devices=[2,2]0,1,2,3}");
  ExpectSame(PartiallyReplicateOnDims(s, {1}),
             "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  ExpectSame(PartiallyReplicateOnDims(s, {0}),
             "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}");
  ExpectSame(PartiallyReplicateOnDims(s, {0, 1}), "{replicated}");
  ExpectSame(PartiallyReplicateOnAllDimsExcept(s, {0}),
             "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  ExpectSame(ReplicateAllDataDims(P("{devices=[2,2]0,1,2,3 last_tile_dims={manual}}")),
             "{devices=[1,2,2]0,2,1,3 last_tile_dims={manual, replicated}}");
}

TEST(ProjectionTest, MapsFactorsAndReplicatesTheRest) {
  // A [batch, m, k] lhs onto a [batch, m, n] dot output: k is contracted.
  PSharding lhs = P("{devices=[2,1,2]0,1,2,3}");
  ExpectSame(ProjectSharding(lhs, {0, 1, -1}, 3),
             "{devices=[2,1,1,2]0,1,2,3 last_tile_dim_replicate}");
  // Transpose-like mapping.
  ExpectSame(ProjectSharding(P("{devices=[2,4]<=[8]}"), {1, 0}, 2),
             "{devices=[4,2]<=[2,4]T(1,0)}");
  // Broadcast-like mapping into a higher rank.
  ExpectSame(ProjectSharding(P("{devices=[2]0,1}"), {2}, 3), "{devices=[1,1,2]0,1}");
  // Collapsed dims must be untiled.
  EXPECT_FALSE(TransposeShardingWithCollapsedDims(P("{devices=[2,2]<=[4]}"), {0, -1},
                                                  {0}).has_value());
}

TEST(ReshapeTest, SplitsAndMergesDims) {
  Shape s24(PrimitiveType::F32, {24}), s64(PrimitiveType::F32, {6, 4}),
      s46(PrimitiveType::F32, {4, 6});
  auto r = ReshapeSharding(s64, s24, P("{devices=[2,1]0,1}"));
  ASSERT_TRUE(r.has_value());
  ExpectSame(*r, "{devices=[2]0,1}");
  r = ReshapeSharding(s24, s64, P("{devices=[2]0,1}"));
  ASSERT_TRUE(r.has_value());
  ExpectSame(*r, "{devices=[2,1]0,1}");
  // Minor-dim sharding cannot survive the merge.
  EXPECT_FALSE(ReshapeSharding(s64, s24, P("{devices=[1,2]0,1}")).has_value());
  // Transposed sizes keep the gcd.
  r = ReshapeSharding(s64, s46, P("{devices=[6,1]<=[6]}"));
  ASSERT_TRUE(r.has_value());
  ExpectSame(*r, "{devices=[2,1,3]<=[6] last_tile_dim_replicate}");
  // The best-effort form replicates what cannot be kept.
  ExpectSame(PropagateShardingThroughReshape(s64, s24, P("{devices=[1,2]0,1}")),
             "{replicated}");
}

TEST(ReverseTest, ReversesDeviceOrder) {
  ExpectSame(ReverseSharding(P("{devices=[4,1]0,1,2,3}"), {0}), "{devices=[4,1]3,2,1,0}");
  ExpectSame(ReverseSharding(P("{devices=[4,1]0,1,2,3}"), {1}), "{devices=[4,1]0,1,2,3}");
}

TEST(SubTilingTest, RecognisesRefinements) {
  Shape shape(PrimitiveType::F32, {8, 8});
  EXPECT_TRUE(IsSubTilingOrEqualSharding(shape, P("{devices=[2,2]0,1,2,3}"),
                                         P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}")));
  EXPECT_FALSE(IsSubTilingOrEqualSharding(shape, P("{devices=[2,2]0,2,1,3}"),
                                          P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}")));
}

}  // namespace
}  // namespace meshsplit::propagation
