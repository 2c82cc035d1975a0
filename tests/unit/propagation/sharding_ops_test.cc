// Unit tests for propagation's sharding decisions over the shared algebra:
// merging of partial shardings, the "more specific" order, the "improve"
// decision, partial replication, factor projection, reshape, tuple helpers,
// and that none of it expands an iota tile assignment over many devices.
#include "propagation/sharding_ops.h"

#include <gtest/gtest.h>

#include "sharding/sharding.h"

namespace meshsplit::propagation {
namespace {

Sharding P(const std::string& text) {
  auto s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? *s : Sharding();
}

void ExpectSame(const Sharding& got, const std::string& want) {
  EXPECT_EQ(got, P(want)) << "got " << got.ToString() << ", want " << want;
}

TEST(HelpersTest, TuplesUnknownAndCseMarker) {
  Sharding nested = FlatTuple(
      {P("{replicated}"), P("{{maximal device=1}, {devices=[2]0,1}}")});
  ASSERT_TRUE(nested.IsTuple());
  ASSERT_EQ(nested.tuple_elements().size(), 3u);
  ExpectSame(nested.tuple_elements()[2], "{devices=[2]0,1}");
  EXPECT_TRUE(IsUnknownSharding(P("{{unknown}, {unknown}}")));
  EXPECT_FALSE(IsUnknownSharding(P("{{unknown}, {replicated}}")));
  EXPECT_EQ(TileDimOr1(P("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"), 2),
            1);
  EXPECT_EQ(TileDimOr1(P("{replicated}"), 0), 1);
  Sharding s = P("{devices=[2]0,1 metadata={op_name=\"x\"}}");
  EXPECT_FALSE(HasCsePrevention(s));
  SetCsePrevention(&s, true);
  EXPECT_TRUE(HasCsePrevention(s));
  EXPECT_EQ(s, P("{devices=[2]0,1}"));  // metadata is not part of equality
  EXPECT_TRUE(HasCsePrevention(
      P("{replicated "
        "metadata={op_name=\"_sharding_propagation_cse_prevention\"}}")));
}

TEST(MergeTest, CombinesCompatiblePartialShardings) {
  Sharding dst = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  Sharding from = P("{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}");
  ASSERT_TRUE(MergeShardingIfCompatible(from, &dst));
  ExpectSame(dst, "{devices=[2,2]0,1,2,3}");
}

TEST(MergeTest, RejectsIncompatibleDeviceGroups) {
  // Rows {0,1},{2,3} versus columns {0,1},{2,3}: no device is in both the
  // row-0 and column-1 groups.
  Sharding dst = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  Sharding from = P("{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}");
  EXPECT_FALSE(MergeShardingIfCompatible(from, &dst));
  // Tiling the same dim differently cannot merge either.
  Sharding a = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  EXPECT_FALSE(MergeShardingIfCompatible(P("{devices=[4,1]0,1,2,3}"), &a));
}

TEST(MergeTest, MergeShardingOnlyCombinesWhenAllowed) {
  Sharding dst = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  Sharding from = P("{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}");
  Sharding copy = dst;
  EXPECT_FALSE(
      MergeSharding(from, &copy, /*may_combine_partial_sharding=*/false));
  EXPECT_TRUE(MergeSharding(from, &dst, /*may_combine_partial_sharding=*/true));
  ExpectSame(dst, "{devices=[2,2]0,1,2,3}");
}

TEST(SpecificityTest, OrdersByTileCount) {
  EXPECT_TRUE(IsShardingMoreSpecific(
      P("{devices=[2,2]<=[4]}"),
      P("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")));
  EXPECT_TRUE(IsShardingMoreSpecific(P("{devices=[2]0,1}"), P("{replicated}")));
  EXPECT_FALSE(
      IsShardingMoreSpecific(P("{replicated}"), P("{devices=[2]0,1}")));
  EXPECT_TRUE(IsShardingMoreSpecific(P("{manual}"), P("{replicated}")));
  EXPECT_FALSE(IsShardingMoreSpecific(P("{devices=[2]0,1}"), P("{manual}")));
}

TEST(ImproveTest, KeepsExistingTilingUnlessCompatible) {
  Shape shape(PrimitiveType::F32, {8, 8});
  Sharding cur = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  // Same number of tiles but on another dim: not an improvement.
  EXPECT_FALSE(ReturnImprovedSharding(
      P("{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}"), &cur, shape, true,
      false));
  // A refinement of the current tiling is.
  auto r = ReturnImprovedSharding(P("{devices=[2,2]0,1,2,3}"), &cur, shape,
                                  true, false);
  ASSERT_TRUE(r.has_value());
  ExpectSame(*r, "{devices=[2,2]0,1,2,3}");
  // Anything spatially partitioned beats nothing; maximal never propagates.
  EXPECT_TRUE(
      ReturnImprovedSharding(P("{replicated}"), nullptr, shape, true, false));
  EXPECT_FALSE(ReturnImprovedSharding(P("{maximal device=1}"), nullptr, shape,
                                      true, false));
}

TEST(ReplicationTest, PartiallyReplicatesDims) {
  Sharding s = P("{devices=[2,2]0,1,2,3}");
  ExpectSame(PartiallyReplicateOnDims(s, {1}),
             "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  ExpectSame(PartiallyReplicateOnDims(s, {0}),
             "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}");
  ExpectSame(PartiallyReplicateOnDims(s, {0, 1}), "{replicated}");
  ExpectSame(PartiallyReplicateOnAllDimsExcept(s, {0}),
             "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  ExpectSame(
      ReplicateAllDataDims(P("{devices=[2,2]0,1,2,3 last_tile_dims={manual}}")),
      "{devices=[1,2,2]0,2,1,3 last_tile_dims={manual, replicated}}");
}

TEST(ProjectionTest, MapsFactorsAndReplicatesTheRest) {
  // Each map gives, for every result dim, the source dim it takes (-1: none).
  // A [batch, m, k] lhs onto a [batch, m, n] dot output: k is contracted.
  Sharding lhs = P("{devices=[2,1,2]0,1,2,3}");
  ExpectSame(ProjectSharding(lhs, {0, 1, -1}),
             "{devices=[2,1,1,2]0,1,2,3 last_tile_dim_replicate}");
  // Transpose-like mapping.
  ExpectSame(ProjectSharding(P("{devices=[2,4]<=[8]}"), {1, 0}),
             "{devices=[4,2]<=[2,4]T(1,0)}");
  // Broadcast-like mapping into a higher rank.
  ExpectSame(ProjectSharding(P("{devices=[2]0,1}"), {-1, -1, 0}),
             "{devices=[1,1,2]0,1}");
  // Unmapped tiled dims are replicated.
  ExpectSame(ProjectSharding(P("{devices=[2,2]<=[4]}"), {0}),
             "{devices=[2,2]<=[4] last_tile_dim_replicate}");
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
  ExpectSame(ReverseSharding(P("{devices=[4,1]0,1,2,3}"), {0}),
             "{devices=[4,1]3,2,1,0}");
  ExpectSame(ReverseSharding(P("{devices=[4,1]0,1,2,3}"), {1}),
             "{devices=[4,1]0,1,2,3}");
}

TEST(SubTilingTest, RecognisesRefinements) {
  Shape shape(PrimitiveType::F32, {8, 8});
  EXPECT_TRUE(IsSubTilingOrEqualSharding(
      shape, P("{devices=[2,2]0,1,2,3}"),
      P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}")));
  EXPECT_FALSE(IsSubTilingOrEqualSharding(
      shape, P("{devices=[2,2]0,2,1,3}"),
      P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}")));
  // Uneven dim: 3 tiles of 2 and 4 tiles of 2 have the same tile size, but
  // fewer tiles is never a sub-tiling (XLA compares the tile counts first).
  Shape five(PrimitiveType::F32, {5});
  EXPECT_FALSE(IsSubTilingOrEqualSharding(five, P("{devices=[3]0,1,2}"),
                                          P("{devices=[4]0,1,2,3}")));
  EXPECT_TRUE(IsSubTilingOrEqualSharding(five, P("{devices=[4]0,1,2,3}"),
                                         P("{devices=[4]0,1,2,3}")));
}

// Over 8192 devices in iota form, the propagation rules stay symbolic: no
// call may expand the device list.
TEST(SymbolicTest, RulesDoNotExpandIotaAssignments) {
  const Sharding rows =
      P("{devices=[8,1,1024]<=[8192] last_tile_dim_replicate}");
  const Sharding cols =
      P("{devices=[1,16,512]<=[16,512]T(1,0) last_tile_dim_replicate}");
  const Shape shape(PrimitiveType::F32, {64, 128});
  const Shape shape3(PrimitiveType::F32, {64, 8, 16});
  const int64_t before = TileAssignment::iota_expansions();
  ExpectSame(TransposeSharding(rows, {1, 0}),
             "{devices=[1,8,1024]<=[8192] last_tile_dim_replicate}");
  EXPECT_TRUE(PropagateShardingThroughReshape(shape, shape3, rows).IsTiled());
  EXPECT_TRUE(ReshapeSharding(shape, shape3, rows).has_value());
  ExpectSame(ProjectSharding(rows, {0, -1}), rows.ToString());
  EXPECT_TRUE(PartiallyReplicateOnDims(rows, {0}).IsReplicated());
  Sharding merged = rows;
  ASSERT_TRUE(MergeShardingIfCompatible(cols, &merged));
  EXPECT_EQ(merged.NumTiles(), 128);
  EXPECT_TRUE(merged.tile_assignment().is_iota());
  Sharding again = rows;
  EXPECT_TRUE(
      MergeSharding(cols, &again, /*may_combine_partial_sharding=*/true));
  EXPECT_EQ(again, merged);
  EXPECT_TRUE(IsSubTilingOrEqualSharding(shape, merged, rows));
  auto improved = ReturnImprovedSharding(merged, &rows, shape, true, false);
  ASSERT_TRUE(improved.has_value());
  EXPECT_EQ(*improved, merged);
  EXPECT_EQ(TileAssignment::iota_expansions(), before);
}

}  // namespace
}  // namespace meshsplit::propagation
