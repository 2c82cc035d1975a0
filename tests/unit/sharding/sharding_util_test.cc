// Sharding algebra: transpose / reshape / reverse checked element by element
// against a brute-force "which device holds which element" model, plus
// partial replication, broadcast/reduce helpers, merge and ordering.
#include "sharding/sharding_util.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <set>

namespace meshsplit {
namespace {

using namespace sharding_util;  // NOLINT

Sharding P(std::string_view text) {
  StatusOr<Sharding> s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? *s : Sharding();
}

std::vector<int64_t> Unflatten(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (int64_t i = (int64_t)dims.size() - 1; i >= 0; --i) {
    idx[i] = flat % dims[i];
    flat /= dims[i];
  }
  return idx;
}

// device -> set of row-major element positions it holds.
std::map<int64_t, std::set<int64_t>> Holdings(const Sharding& s,
                                              const std::vector<int64_t>& dims,
                                              int64_t num_devices) {
  std::map<int64_t, std::set<int64_t>> out;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  for (int64_t dev = 0; dev < num_devices; ++dev) {
    if (!s.UsesDevice(dev)) continue;
    auto lo = s.TileOffsetForDevice(dims, dev);
    auto hi = s.TileLimitForDevice(dims, dev);
    for (int64_t e = 0; e < n; ++e) {
      auto idx = Unflatten(e, dims);
      bool in = true;
      for (size_t i = 0; i < dims.size(); ++i)
        in &= idx[i] >= lo[i] && idx[i] < hi[i];
      if (in) out[dev].insert(e);
    }
  }
  return out;
}

TEST(ShardingUtil, Transpose) {
  Sharding s = P("{devices=[2,4,1]<=[8]}");
  Sharding t = TransposeSharding(s, {1, 2, 0});
  EXPECT_EQ(t.ToString(), "{devices=[4,1,2]<=[2,4]T(1,0)}");
  Sharding p = P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  EXPECT_EQ(TransposeSharding(p, {1, 0}).ToString(),
            "{devices=[1,2,2]<=[4] last_tile_dim_replicate}");
  EXPECT_EQ(TransposeSharding(Sharding::Replicate(), {1, 0}),
            Sharding::Replicate());
  // Element check: element (i,j,k) of x is element (j,k,i) of transpose.
  std::vector<int64_t> dims = {4, 8, 3}, tdims = {8, 3, 4};
  auto h = Holdings(s, dims, 8), th = Holdings(t, tdims, 8);
  for (int64_t dev = 0; dev < 8; ++dev) {
    std::set<int64_t> mapped;
    for (int64_t e : h[dev]) {
      auto i = Unflatten(e, dims);
      mapped.insert((i[1] * 3 + i[2]) * 4 + i[0]);
    }
    EXPECT_EQ(mapped, th[dev]) << dev;
  }
}

TEST(ShardingUtil, ReshapeKnownCases) {
  auto R = [](std::vector<int64_t> from, std::vector<int64_t> to,
              std::string_view s) -> std::string {
    auto r = ReshapeSharding(from, to, P(s));
    return r ? r->ToString() : "none";
  };
  EXPECT_EQ(R({8}, {2, 4}, "{devices=[2]0,1}"), "{devices=[2,1]<=[2]}");
  EXPECT_EQ(R({8}, {2, 4}, "{devices=[4]<=[4]}"), "{devices=[2,2]<=[4]}");
  EXPECT_EQ(R({2, 4}, {8}, "{devices=[2,1]0,1}"), "{devices=[2]<=[2]}");
  EXPECT_EQ(R({2, 4}, {8}, "{devices=[1,2]0,1}"), "none");
  EXPECT_EQ(R({2, 4}, {8}, "{devices=[2,2]0,2,1,3}"),
            "{devices=[4]<=[2,2]T(1,0)}");
  EXPECT_EQ(R({6}, {2, 3}, "{devices=[3]0,1,2}"), "none");
  EXPECT_EQ(R({6}, {2, 3}, "{devices=[2]0,1}"), "{devices=[2,1]<=[2]}");
  EXPECT_EQ(R({4, 1, 6}, {4, 6}, "{devices=[2,1,2]<=[4]}"),
            "{devices=[2,2]<=[4]}");
  EXPECT_EQ(R({16, 4}, {4, 4, 4},
              "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
            "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}");
  // Uneven dims survive only as whole dims.
  EXPECT_EQ(R({5, 4}, {5, 2, 2}, "{devices=[2,1]0,1}"),
            "{devices=[2,1,1]<=[2]}");
  EXPECT_EQ(R({5, 4}, {20}, "{devices=[2,1]0,1}"), "none");
  EXPECT_EQ(R({2, 3}, {3, 2}, "{replicated}"), "{replicated}");
  // Tiles on a size-1 dim become replication.
  EXPECT_EQ(R({1, 8}, {8}, "{devices=[2,4]<=[8]}"),
            "{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
}

TEST(ShardingUtil, ReshapeRandomMatchesElementModel) {
  std::mt19937 rng(3);
  int found = 0;
  for (int trial = 0; trial < 600; ++trial) {
    // A shape of total size 2^a*3^b, tiled on random dims.
    std::vector<int64_t> from, to;
    const int64_t primes[] = {2, 2, 2, 3, 2, 2};
    std::vector<int64_t> factors;
    for (int i = 0; i < 5; ++i) factors.push_back(primes[rng() % 6]);
    auto group = [&](std::vector<int64_t>& dims) {
      dims.clear();
      int64_t cur = 1;
      for (int64_t f : factors) {
        cur *= f;
        if (rng() % 2) {
          dims.push_back(cur);
          cur = 1;
        }
      }
      dims.push_back(cur);
    };
    group(from);
    std::shuffle(factors.begin(), factors.end(), rng);
    group(to);
    std::vector<int64_t> tiles;
    int64_t devices = 1;
    for (int64_t d : from) {
      std::vector<int64_t> divs;
      for (int64_t k = 1; k <= d && k <= 6; ++k)
        if (d % k == 0) divs.push_back(k);
      tiles.push_back(divs[rng() % divs.size()]);
      devices *= tiles.back();
    }
    Sharding s = Sharding::Tile(TileAssignment::Iota(tiles));
    auto r = ReshapeSharding(from, to, s);
    if (!r) {
      // Completeness: no reshape of the tile array onto `to` (tile counts
      // dividing the dims) may hold the same elements.
      std::vector<std::vector<int64_t>> cands = {{}};
      for (int64_t d : to) {
        std::vector<std::vector<int64_t>> next;
        for (auto& c : cands)
          for (int64_t k = 1; k <= d; ++k)
            if (d % k == 0) {
              next.push_back(c);
              next.back().push_back(k);
            }
        cands = std::move(next);
      }
      auto want = Holdings(s, from, devices);
      for (auto& c : cands) {
        int64_t prod = 1;
        for (int64_t k : c) prod *= k;
        if (prod != devices) continue;
        Sharding cand = Sharding::Tile(s.tile_assignment().Reshape(c));
        ASSERT_NE(Holdings(cand, to, devices), want)
            << "missed " << cand.ToString() << " for " << s.ToString() << " from " << ::testing::PrintToString(from) << " to " << ::testing::PrintToString(to);
      }
      continue;
    }
    ++found;
    // Row-major positions are the same elements in both shapes.
    ASSERT_EQ(Holdings(s, from, devices), Holdings(*r, to, devices))
        << s.ToString() << " -> " << r->ToString();
    Sharding best = ReshapeShardingBestEffort(from, to, s);
    EXPECT_EQ(best, *r);
  }
  EXPECT_GT(found, 100);
}

TEST(ShardingUtil, ReshapeBestEffort) {
  // [4,6] tiled [2,3] -> [24]: dim 1's tiles cannot survive (tile of 2
  // columns is not contiguous after merging); dim 0 keeps its 2 tiles.
  Sharding s = P("{devices=[2,3]<=[6]}");
  EXPECT_FALSE(ReshapeSharding({4, 6}, {24}, s).has_value());
  Sharding b = ReshapeShardingBestEffort({4, 6}, {24}, s);
  EXPECT_EQ(b.ToString(), "{devices=[2,3]<=[6] last_tile_dim_replicate}");
  // Check it really holds what it claims.
  auto want = Holdings(PartiallyReplicateTiledShardingOnDims(s, {1}), {4, 6}, 6);
  EXPECT_EQ(Holdings(b, {24}, 6), want);
  // [6] tiled 3 -> [2,3]: nothing can be kept.
  EXPECT_EQ(ReshapeShardingBestEffort({6}, {2, 3}, P("{devices=[3]<=[3]}")),
            Sharding::Replicate());
  // [12] tiled 6 -> [3,4]: tiles of 2 elements fit rows of 4 exactly.
  EXPECT_EQ(ReshapeShardingBestEffort({12}, {3, 4}, P("{devices=[6]<=[6]}"))
                .ToString(),
            "{devices=[3,2]<=[6]}");
  // [12] tiled 4 -> [6,2]: tiles of 3 elements straddle rows; keeping 2 of
  // the 4 tiles (6 elements = 3 rows) works, the rest is replicated.
  EXPECT_FALSE(ReshapeSharding({12}, {6, 2}, P("{devices=[4]<=[4]}")));
  Sharding k = ReshapeShardingBestEffort({12}, {6, 2}, P("{devices=[4]<=[4]}"));
  EXPECT_EQ(k.ToString(), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  auto held = Holdings(k, {6, 2}, 4);
  EXPECT_EQ(held[1], (std::set<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(held[2], (std::set<int64_t>{6, 7, 8, 9, 10, 11}));
}

TEST(ShardingUtil, Reverse) {
  Sharding s = P("{devices=[2,2]<=[4]}");
  Sharding r = ReverseSharding(s, {0});
  EXPECT_EQ(r.ToString(), "{devices=[2,2]2,3,0,1}");
  EXPECT_EQ(ReverseSharding(r, {0}), s);
  EXPECT_EQ(ReverseSharding(P("{devices=[1,2]0,1}"), {0}), P("{devices=[1,2]0,1}"));
}

TEST(ShardingUtil, PartialReplication) {
  Sharding s = P("{devices=[2,2,2]<=[8]}");
  EXPECT_EQ(PartiallyReplicateTiledShardingOnDims(s, {1}).ToString(),
            "{devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}");
  EXPECT_EQ(PartiallyReplicateTiledShardingOnAllDimsExcept(s, {2}).ToString(),
            "{devices=[1,1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(PartiallyReplicateTiledShardingOnDims(s, {0, 1, 2}),
            Sharding::Replicate());
  // Merges into an existing replicated subgroup.
  Sharding p = P("{devices=[2,2,2]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(PartiallyReplicateTiledShardingOnDims(p, {0}).ToString(),
            "{devices=[1,2,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}");
  // Manual subgroup kept.
  Sharding m = P("{devices=[2,1,2]<=[4] last_tile_dims={manual}}");
  EXPECT_EQ(ReplicateAllDataDims(m).ToString(),
            "{devices=[1,1,2,2]<=[2,2]T(1,0) last_tile_dims={manual, "
            "replicated}}");
  EXPECT_EQ(ReplicateAllDataDims(m, 3).ToString(),
            "{devices=[1,1,1,2,2]<=[2,2]T(1,0) last_tile_dims={manual, "
            "replicated}}");
  EXPECT_EQ(ReplicateAllDataDims(s), Sharding::Replicate());
  // Holdings agree: the replicated dim's devices hold the whole dim.
  auto h = Holdings(PartiallyReplicateTiledShardingOnDims(s, {1}), {4, 4, 4}, 8);
  for (auto& [dev, elems] : h) EXPECT_EQ(elems.size(), 16u) << dev;
}

TEST(ShardingUtil, BroadcastReduceHelpers) {
  // Reduce dim 1 of [2,4,1]: keep dims 0 and 2.
  Sharding s = P("{devices=[2,2,2]<=[8]}");
  EXPECT_EQ(RemoveShapeDimensions(s, {1}).ToString(),
            "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}");
  EXPECT_EQ(InsertShapeDimensions(P("{devices=[2,2]<=[4]}"), 1, 2).ToString(),
            "{devices=[2,1,1,2]<=[4]}");
  // Broadcast operand dims {0,1} to output dims {2,0} of rank 3.
  Sharding b = PropagateShardingAlongDimsAndReplicateOthers(
      P("{devices=[2,4]<=[8]}"), {0, 1}, {2, 0}, 3);
  EXPECT_EQ(b.ToString(), "{devices=[4,1,2]<=[2,4]T(1,0)}");
  // Check: output element (j, *, i) lives where operand (i, j) lives.
  auto in = Holdings(P("{devices=[2,4]<=[8]}"), {2, 4}, 8);
  auto out = Holdings(b, {4, 3, 2}, 8);
  for (auto& [dev, elems] : out) {
    std::set<int64_t> back;
    for (int64_t e : elems) {
      auto i = Unflatten(e, {4, 3, 2});
      back.insert(i[2] * 4 + i[0]);
    }
    EXPECT_EQ(back, in[dev]);
  }
  // Dropping a source dim replicates it.
  EXPECT_EQ(PropagateShardingAlongDimsAndReplicateOthers(
                P("{devices=[2,4]<=[8]}"), {1}, {0}, 1)
                .ToString(),
            "{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(MoveAndMergeShardingTiles(P("{devices=[2,4,1]<=[8]}"), 1, 0)
                .ToString(),
            "{devices=[8,1,1]<=[8]}");
  EXPECT_EQ(MoveAndMergeShardingTiles(P("{devices=[2,4,1]<=[8]}"), 0, 2)
                .ToString(),
            "{devices=[1,4,2]<=[2,4]T(1,0)}");
}

TEST(ShardingUtil, MoreSpecific) {
  EXPECT_TRUE(IsShardingMoreSpecific(P("{devices=[2,2]<=[4]}"),
                                     P("{devices=[2,1,2]<=[4] "
                                       "last_tile_dim_replicate}")));
  EXPECT_FALSE(IsShardingMoreSpecific(P("{devices=[4,1]<=[4]}"),
                                      P("{devices=[1,4]<=[4]}")));
  EXPECT_TRUE(IsShardingMoreSpecific(P("{maximal device=0}"),
                                     P("{replicated}")));
  EXPECT_TRUE(IsShardingMoreSpecific(P("{devices=[2]0,1}"),
                                     P("{maximal device=0}")));
  EXPECT_TRUE(IsShardingMoreSpecific(P("{manual}"), P("{replicated}")));
  EXPECT_FALSE(IsShardingMoreSpecific(P("{manual}"), P("{devices=[2]0,1}")));
  EXPECT_TRUE(IsShardingMoreSpecific(P("{{devices=[2]0,1}, {replicated}}"),
                                     P("{{replicated}, {replicated}}")));
  EXPECT_FALSE(IsShardingMoreSpecific(P("{{devices=[2]0,1}, {replicated}}"),
                                      P("{{replicated}, {devices=[2]0,1}}")));
}

TEST(ShardingUtil, MergeCompatiblePartialShardings) {
  // Dim 0 tiled on the major mesh axis, dim 1 on the minor one.
  Sharding dst = P("{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  Sharding to_merge = P("{devices=[1,2,2]<=[2,2]T(1,0) "
                        "last_tile_dim_replicate}");
  EXPECT_TRUE(MergeSharding(to_merge, &dst, true));
  EXPECT_EQ(dst.ToString(), "{devices=[2,2]<=[4]}");
  // Incompatible: both use the major axis.
  Sharding d2 = P("{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  Sharding m2 = P("{devices=[1,2,2]<=[4] last_tile_dim_replicate}");
  EXPECT_FALSE(MergeShardingIfCompatible(m2, 3, &d2));
  EXPECT_EQ(d2, P("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"));
  // Without may_combine: only the ordering.
  Sharding d3 = P("{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  EXPECT_FALSE(MergeSharding(to_merge, &d3, false));
  // Partial merge on 8 devices keeps a replicated remainder.
  Sharding d4 = P("{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  Sharding m4 = P("{devices=[1,2,4]<=[2,2,2]T(1,0,2) "
                  "last_tile_dim_replicate}");
  EXPECT_TRUE(MergeSharding(m4, &d4, true));
  EXPECT_EQ(d4.ToString(), "{devices=[2,2,2]<=[8] last_tile_dim_replicate}");
  // The merged sharding holds the intersection of what both held.
  auto a = Holdings(P("{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
                    {4, 4}, 8);
  auto b = Holdings(m4, {4, 4}, 8);
  auto c = Holdings(d4, {4, 4}, 8);
  for (int64_t dev = 0; dev < 8; ++dev) {
    std::set<int64_t> both;
    std::set_intersection(a[dev].begin(), a[dev].end(), b[dev].begin(),
                          b[dev].end(), std::inserter(both, both.end()));
    EXPECT_EQ(both, c[dev]) << dev;
  }
  // Replicated dst takes to_merge.
  Sharding r = Sharding::Replicate();
  EXPECT_TRUE(MergeShardingIfCompatible(m4, 1, &r));
  EXPECT_EQ(r, m4);
}

TEST(ShardingUtil, SubTiling) {
  EXPECT_TRUE(IsSubTilingOrEqualSharding({8, 8}, P("{devices=[2,2]<=[4]}"),
                                         P("{devices=[2,1,2]<=[4] "
                                           "last_tile_dim_replicate}")));
  EXPECT_FALSE(IsSubTilingOrEqualSharding({8, 8}, P("{devices=[2,2]<=[4]}"),
                                          P("{devices=[1,2,2]<=[4] "
                                            "last_tile_dim_replicate}")));
  EXPECT_TRUE(IsSubTilingOrEqualSharding({8}, P("{devices=[2]0,1}"),
                                         P("{replicated}")));
  EXPECT_FALSE(IsSubTilingOrEqualSharding({8}, P("{replicated}"),
                                          P("{devices=[2]0,1}")));
}

}  // namespace
}  // namespace meshsplit

namespace meshsplit {
namespace {

using namespace sharding_util;  // NOLINT

Sharding Q(std::string_view text) { return *Sharding::Parse(text); }

TEST(ShardingGatherScatter, IndexAndOutput) {
  // indices s32[8,4,2] (index_vector_dim=2), output [8,4,16] with
  // offset_dims={2}: output dims 0,1 follow indices dims 0,1.
  Sharding idx = Q("{devices=[2,2,2]<=[8]}");
  EXPECT_EQ(GatherOutputShardingFromIndex(idx, 2, {2}, 3).ToString(),
            "{devices=[2,2,1,2]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(GatherIndexShardingFromOutput(Q("{devices=[2,1,4]<=[8]}"), 2, {2}, 3)
                .ToString(),
            "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}");
  // Offset dim in the middle: output [8,16,4], offset_dims={1}.
  EXPECT_EQ(GatherOutputShardingFromIndex(Q("{devices=[2,4,1]<=[8]}"), 2, {1}, 3)
                .ToString(),
            "{devices=[2,1,4]<=[8]}");
  EXPECT_EQ(ScatterUpdateShardingFromIndex(Q("{devices=[4,1]<=[4]}"), 1, {1}, 2)
                .ToString(),
            "{devices=[4,1]<=[4]}");
}

TEST(ShardingGatherScatter, OperandPassthrough) {
  // operand [16,32], gather rows: collapsed {0}, slice_sizes {1,32},
  // offset_dims {1} in output [N,32]. Dim 1 passes through.
  Sharding op = Q("{devices=[2,4]<=[8]}");
  auto out = GatherOutputShardingFromOperandPassthrough(op, {16, 32}, {1, 32},
                                                        {1}, {0}, {}, 2);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->ToString(),
            "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  auto back = GatherOperandShardingFromOutputPassthrough(
      Q("{devices=[1,4]<=[4]}"), {16, 32}, {1, 32}, {1}, {0}, {});
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->ToString(), "{devices=[1,4]<=[4]}");
  // Only dim 0 tiled: nothing passes through.
  EXPECT_FALSE(GatherOutputShardingFromOperandPassthrough(
                   Q("{devices=[8,1]<=[8]}"), {16, 32}, {1, 32}, {1}, {0}, {},
                   2)
                   .has_value());
  // Scatter: operand [16,32], updates [N,32], update_window_dims {1},
  // inserted_window_dims {0}.
  auto upd = ScatterUpdateShardingFromOutputPassthrough(
      Q("{devices=[1,4]<=[4]}"), {16, 32}, {5, 32}, {1}, {0}, {});
  ASSERT_TRUE(upd.has_value());
  EXPECT_EQ(upd->ToString(), "{devices=[1,4]<=[4]}");
}

}  // namespace
}  // namespace meshsplit
