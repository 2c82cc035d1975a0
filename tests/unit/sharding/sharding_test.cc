// Sharding semantics: the README's normalisation rules (checked one by one
// and against a literal reference implementation on random inputs), tile
// offsets and sizes per device, device groups and validation.
#include "sharding/sharding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

namespace meshsplit {
namespace {

Sharding P(std::string_view text) {
  StatusOr<Sharding> s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? *s : Sharding();
}

TEST(ShardingNormalise, MetadataIgnored) {
  EXPECT_EQ(P("{devices=[2,1]0,1 metadata={op_name=\"a\"}}"),
            P("{devices=[2,1]0,1}"));
  EXPECT_EQ(P("{{replicated metadata={op_name=\"a\"}}, {manual}}"),
            P("{{replicated}, /*index=1*/{manual}}"));
}

TEST(ShardingNormalise, IotaEqualsExplicit) {
  EXPECT_EQ(P("{devices=[2,4]<=[2,2,2]T(2,1,0)}"),
            P("{devices=[2,4]0,4,2,6,1,5,3,7}"));
  EXPECT_EQ(P("{devices=[4,2]<=[8]}"), P("{devices=[4,2]0,1,2,3,4,5,6,7}"));
  EXPECT_NE(P("{devices=[4,2]<=[8]}"), P("{devices=[4,2]0,1,2,3,4,5,7,6}"));
  EXPECT_NE(P("{devices=[4,2]<=[8]}"), P("{devices=[2,4]<=[8]}"));
}

TEST(ShardingNormalise, LastTileDimReplicate) {
  EXPECT_EQ(P("{devices=[2,2]<=[4] last_tile_dim_replicate}"),
            P("{devices=[2,2]<=[4] last_tile_dims={replicated}}"));
  EXPECT_EQ(P("{devices=[2,2]<=[4] last_tile_dims={replicated}}").ToString(),
            "{devices=[2,2]<=[4] last_tile_dim_replicate}");
}

TEST(ShardingNormalise, DropSizeOneSubgroups) {
  EXPECT_EQ(P("{devices=[2,2,1]0,1,2,3 last_tile_dims={replicated, manual}}")
                .ToString(),
            "{devices=[2,2]<=[4] last_tile_dim_replicate}");
  EXPECT_EQ(P("{devices=[4,1]0,1,2,3 last_tile_dim_replicate}").ToString(),
            "{devices=[4]<=[4]}");
}

TEST(ShardingNormalise, MergeSameTypes) {
  EXPECT_EQ(P("{devices=[2,2,2]<=[8] last_tile_dims={replicated, "
              "replicated}}")
                .ToString(),
            "{devices=[2,4]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(P("{devices=[2,2,2]<=[8] last_tile_dims={manual, manual}}"),
            P("{devices=[2,4]<=[8] last_tile_dims={manual}}"));
}

TEST(ShardingNormalise, OrderManualUnreducedReplicated) {
  // Swapping the two subgroup dims transposes the device array.
  EXPECT_EQ(P("{devices=[1,1,1,4,2]0,2,1,3,4,6,5,7 last_tile_dims={"
              "replicated,manual}}"),
            P("{devices=[1,1,1,2,4]0,1,4,5,2,3,6,7 last_tile_dims={manual, "
              "replicated}}"));
  EXPECT_EQ(P("{devices=[2,2]<=[4] last_tile_dims={replicated,manual}}")
                .ToString(),
            "{devices=[2,2]<=[2,2]T(1,0) last_tile_dims={manual, replicated}}");
  EXPECT_EQ(P("{devices=[2,2,2]<=[8] last_tile_dims={replicated, unreduced}}")
                .ToString(),
            "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={unreduced, "
            "replicated}}");
}

TEST(ShardingNormalise, SortReplicatedGroups) {
  EXPECT_EQ(P("{devices=[2,2]1,0,3,2 last_tile_dim_replicate}").ToString(),
            "{devices=[2,2]<=[4] last_tile_dim_replicate}");
  EXPECT_EQ(P("{devices=[1,1,2,1,2]0,4,1,5 last_tile_dim_replicate}"),
            P("{devices=[1,1,2,1,2]4,0,5,1 last_tile_dim_replicate}"));
  // Manual groups keep their order.
  EXPECT_NE(P("{devices=[2,2]1,0,3,2 last_tile_dims={manual}}"),
            P("{devices=[2,2]0,1,2,3 last_tile_dims={manual}}"));
}

TEST(ShardingNormalise, Collapse) {
  EXPECT_EQ(P("{devices=[1,1,4]<=[4] last_tile_dim_replicate}"),
            Sharding::Replicate());
  EXPECT_EQ(P("{devices=[1,2,2]<=[4] last_tile_dims={replicated, "
              "replicated}}")
                .ToString(),
            "{replicated}");
  EXPECT_EQ(P("{devices=[1,4]<=[4] last_tile_dims={manual}}").ToString(),
            "{manual}");
  EXPECT_EQ(P("{devices=[1,2,2]<=[4] last_tile_dims={unreduced, unreduced}}")
                .ToString(),
            "{unreduced}");
  EXPECT_EQ(P("{devices=[2,1]0,1 last_tile_dims={manual}}").ToString(),
            "{devices=[2]<=[2]}");
  // Manual + replicated over all devices stays a subgroup sharding.
  EXPECT_TRUE(P("{devices=[2,2]<=[4] last_tile_dims={manual, replicated}}")
                  .IsTiled());
  EXPECT_EQ(P("{devices=[1,2,1]0,1 last_tile_dims={manual, replicated}}")
                .ToString(),
            "{manual}");
}

TEST(ShardingNormalise, HashAgreesWithEquality) {
  EXPECT_EQ(P("{devices=[2,4]<=[2,2,2]T(2,1,0)}").Hash(),
            P("{devices=[2,4]0,4,2,6,1,5,3,7 metadata={op_name=\"a\"}}").Hash());
  EXPECT_EQ(P("{devices=[2,2]1,0,3,2 last_tile_dim_replicate}").Hash(),
            P("{devices=[2,2]<=[4] last_tile_dims={replicated}}").Hash());
  EXPECT_NE(P("{devices=[2,4]<=[8]}").Hash(), P("{devices=[4,2]<=[8]}").Hash());
  EXPECT_NE(P("{maximal device=0}").Hash(), P("{maximal device=1}").Hash());
}

TEST(ShardingNormalise, TupleAndExactKinds) {
  EXPECT_EQ(P("{{devices=[2]0,1}, {maximal device=1}}"),
            P("{{devices=[2]<=[2]}, {maximal device=1}}"));
  EXPECT_NE(P("{{maximal device=0}}"), P("{{maximal device=1}}"));
  EXPECT_NE(P("{maximal device=0}"), P("{replicated}"));
  EXPECT_NE(P("{unknown shard_as 0}"), P("{unknown shard_as 1}"));
  EXPECT_NE(P("{unknown shard_as 0}"), P("{unknown shard_like 0}"));
  EXPECT_NE(P("{unknown shard_as 0}"), P("{unknown}"));
  EXPECT_NE(P("{{replicated}, {manual}}"), P("{{replicated}}"));
  EXPECT_TRUE(P("{{replicated}, {replicated}}").IsReplicated());
  EXPECT_FALSE(P("{{replicated}, {manual}}").IsReplicated());
}

// The README's normalisation, applied literally to explicit arrays.
struct RefSharding {
  std::string kind;  // "replicated", "manual", "unreduced", "tiled"
  std::vector<int64_t> dims, devices;
  std::vector<SubgroupType> types;
};

std::vector<int64_t> TransposeRef(const std::vector<int64_t>& a,
                                  const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& perm) {
  std::vector<int64_t> nd(dims.size()), strides(dims.size(), 1), out;
  for (size_t i = 0; i < perm.size(); ++i) nd[i] = dims[perm[i]];
  for (int i = (int)dims.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t n = 0; n < a.size(); ++n) {
    int64_t s = 0;
    for (size_t i = 0; i < idx.size(); ++i) s += idx[i] * strides[perm[i]];
    out.push_back(a[s]);
    for (int i = (int)idx.size() - 1; i >= 0; --i) {
      if (++idx[i] < nd[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

RefSharding Normalise(std::vector<int64_t> dims, std::vector<int64_t> devs,
                      std::vector<SubgroupType> types) {
  const size_t data = dims.size() - types.size();
  std::vector<int64_t> perm(data), new_dims(dims.begin(), dims.begin() + data);
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<SubgroupType> new_types;
  for (SubgroupType t : {SubgroupType::kManual, SubgroupType::kUnreduced,
                         SubgroupType::kReplicated}) {
    int64_t size = 1;
    for (size_t i = data; i < dims.size(); ++i)
      if (types[i - data] == t && dims[i] > 1) {
        perm.push_back(i);
        size *= dims[i];
      }
    if (size > 1) {
      new_dims.push_back(size);
      new_types.push_back(t);
    }
  }
  for (size_t i = data; i < dims.size(); ++i)
    if (dims[i] == 1) perm.push_back(i);
  devs = TransposeRef(devs, dims, perm);
  if (!new_types.empty() && new_types.back() == SubgroupType::kReplicated)
    for (size_t i = 0; i < devs.size(); i += new_dims.back())
      std::sort(devs.begin() + i, devs.begin() + i + new_dims.back());
  int64_t data_tiles = 1;
  for (size_t i = 0; i < data; ++i) data_tiles *= new_dims[i];
  if (data_tiles == 1 && new_types.size() == 1) {
    if (new_types[0] == SubgroupType::kReplicated) return {"replicated"};
    if (new_types[0] == SubgroupType::kManual) return {"manual"};
    return {"unreduced"};
  }
  return {"tiled", new_dims, devs, new_types};
}

TEST(ShardingNormalise, MatchesLiteralReferenceOnRandomInputs) {
  std::mt19937 rng(11);
  const SubgroupType kTypes[] = {SubgroupType::kManual,
                                 SubgroupType::kUnreduced,
                                 SubgroupType::kReplicated};
  for (int trial = 0; trial < 2000; ++trial) {
    int rank = 1 + rng() % 4;
    std::vector<int64_t> dims;
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) {
      dims.push_back(1 + rng() % 3);
      n *= dims.back();
    }
    std::vector<SubgroupType> types;
    int num_types = rng() % (rank + 1);
    for (int i = 0; i < num_types; ++i) types.push_back(kTypes[rng() % 3]);
    std::vector<int64_t> devs(n);
    std::iota(devs.begin(), devs.end(), 0);
    if (rng() % 2) std::shuffle(devs.begin(), devs.end(), rng);
    Sharding s = Sharding::Subgroup(TileAssignment::FromDevices(dims, devs),
                                    types);
    RefSharding ref = Normalise(dims, devs, types);
    std::string what = s.ToString();
    if (ref.kind == "replicated") {
      ASSERT_TRUE(s.IsReplicated()) << what;
    } else if (ref.kind == "manual") {
      ASSERT_TRUE(s.IsManual()) << what;
    } else if (ref.kind == "unreduced") {
      ASSERT_TRUE(s.IsUnreduced()) << what;
    } else {
      ASSERT_TRUE(s.IsTiled()) << what;
      ASSERT_EQ(s.tile_assignment().dims(), ref.dims) << what;
      ASSERT_EQ(s.tile_assignment().Devices(), ref.devices) << what;
      ASSERT_EQ(s.subgroup_types(), ref.types) << what;
      // Printing and parsing give the same value.
      ASSERT_EQ(P(what), s) << what;
    }
  }
}

TEST(ShardingQueries, UnevenTiles) {
  // f32[10,7] over [4,2]: tiles of 3x4; row offsets 0,3,6,9, so the last
  // row of tiles holds one row and the last column of tiles three columns.
  Sharding s = P("{devices=[4,2]<=[8]}");
  std::vector<int64_t> dims = {10, 7};
  EXPECT_EQ(s.TileShape(dims), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(s.TileOffsetForDevice(dims, 7), (std::vector<int64_t>{9, 4}));
  EXPECT_EQ(s.TileLimitForDevice(dims, 7), (std::vector<int64_t>{10, 7}));
  EXPECT_EQ(s.TileOffsetForDevice(dims, 2), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(s.TileLimitForDevice(dims, 2), (std::vector<int64_t>{6, 4}));
  // 5 elements over 4 tiles: tile size 2, the last tile is empty.
  Sharding t = P("{devices=[4]<=[4]}");
  EXPECT_EQ(t.TileOffsetForDevice({5}, 3), (std::vector<int64_t>{5}));
  EXPECT_EQ(t.TileLimitForDevice({5}, 3), (std::vector<int64_t>{5}));
  EXPECT_EQ(t.TileOffsetForDevice({5}, 2), (std::vector<int64_t>{4}));
  EXPECT_EQ(t.TileLimitForDevice({5}, 2), (std::vector<int64_t>{5}));
  // Replicated / maximal: the whole value.
  EXPECT_EQ(Sharding::Replicate().TileOffsetForDevice(dims, 3),
            (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(Sharding::Maximal(1).TileLimitForDevice(dims, 1), dims);
}

TEST(ShardingQueries, TileIndexAndDevice) {
  Sharding s = P("{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}");
  // Devices: 0,4,2,6,1,5,3,7.
  EXPECT_EQ(s.TiledDataRank(), 2);
  EXPECT_EQ(s.NumTiles(), 4);
  EXPECT_TRUE(s.HasPartialReplication());
  EXPECT_TRUE(s.ReplicateOnLastTileDim());
  EXPECT_EQ(s.SubgroupSize(SubgroupType::kReplicated), 2);
  EXPECT_EQ(*s.TileIndexForDevice(5), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(*s.TileIndexForDevice(6), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.DeviceForTileIndex({1, 1}), 3);
  EXPECT_EQ(s.DeviceForTileIndex({1, 1, 1}), 7);
  Sharding sub = P("{devices=[2,1,2,1]0,1,4,5}");
  EXPECT_FALSE(sub.TileIndexForDevice(2).has_value());
  EXPECT_FALSE(sub.UsesDevice(3));
  EXPECT_EQ(*sub.TileIndexForDevice(4), (std::vector<int64_t>{1, 0, 0, 0}));
}

TEST(ShardingQueries, GroupsAlongMeshAxes) {
  // Mesh [2,4] (data, model) in iota order: groups along model are rows.
  Sharding s = P("{devices=[2,4]<=[8]}");
  DeviceGroups model = s.GroupsAlongDims({1});
  EXPECT_EQ(model.devices.ToString(), "[2,4]<=[8]");
  DeviceGroups data = s.GroupsAlongDims({0});
  EXPECT_EQ(data.devices.ToString(), "[4,2]<=[2,4]T(1,0)");
  EXPECT_EQ(data.Expand(),
            (std::vector<std::vector<int64_t>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(s.GroupsAlongAllDimsExcept({1}).devices, data.devices);
  ASSERT_TRUE(data.AsIota().has_value());
  EXPECT_EQ(data.AsIota()->group_dims, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(data.AsIota()->reshape_dims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(data.AsIota()->transpose_perm, (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(model.AsIota()->transpose_perm.empty());
  EXPECT_EQ(data.ToString(), "[4,2]<=[2,4]T(1,0)");
  // Partial replication: the replicated subgroup dim is dim 2.
  Sharding r = P("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}");
  EXPECT_EQ(r.GroupsAlongDims({2}).Expand(),
            (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3}}));
  Sharding e = P("{devices=[2,2]0,1,4,5}");
  EXPECT_EQ(e.GroupsAlongDims({0}).Expand(),
            (std::vector<std::vector<int64_t>>{{0, 4}, {1, 5}}));
  EXPECT_FALSE(e.GroupsAlongDims({0}).AsIota().has_value());
  EXPECT_EQ(e.GroupsAlongDims({0}).ToString(), "{{0,4},{1,5}}");
  // 8192 devices: the groups stay iota.
  Sharding big = P("{devices=[8,16,64]<=[8192]}");
  DeviceGroups g = big.GroupsAlongDims({0, 2});
  EXPECT_TRUE(g.devices.is_iota());
  EXPECT_EQ(g.num_groups(), 16);
  EXPECT_EQ(g.group_size(), 512);
  EXPECT_EQ(g.devices.ToString(), "[16,512]<=[8,16,64]T(1,0,2)");
}

TEST(ShardingQueries, LargeIotaNoPerDeviceWork) {
  const int64_t expansions_before = TileAssignment::iota_expansions();
  Sharding s = P("{devices=[32,4,64]<=[64,128]T(1,0)}");
  auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> dims = {1024, 12, 4096};
  int64_t total = 0;
  for (int64_t dev = 0; dev < 8192; ++dev) {
    auto off = s.TileOffsetForDevice(dims, dev);
    total += off[0] + off[2];
    EXPECT_TRUE(s.UsesDevice(dev));
  }
  EXPECT_TRUE(s.Validate(3, 8192).ok());
  EXPECT_EQ(s.ToString(), "{devices=[32,4,64]<=[64,128]T(1,0)}");
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  EXPECT_GT(total, 0);
  EXPECT_LT(ms, 100.0);
  // Derived shardings and groups stay symbolic too.
  EXPECT_TRUE(s.GroupsAlongDims({1}).devices.is_iota());
  Sharding p = Sharding::Subgroup(s.tile_assignment(),
                                  {SubgroupType::kReplicated});
  EXPECT_TRUE(p.tile_assignment().is_iota());
  EXPECT_EQ(p, P(p.ToString()));
  EXPECT_EQ(TileAssignment::iota_expansions(), expansions_before)
      << "an O(devices) expansion happened";
  // And the counter does count.
  (void)s.tile_assignment().Devices();
  EXPECT_EQ(TileAssignment::iota_expansions(), expansions_before + 1);
}

TEST(ShardingQueries, UniqueDeviceAndSingleTuple) {
  EXPECT_EQ(*P("{maximal device=3}").UniqueDevice(), 3);
  EXPECT_EQ(*P("{{maximal device=1}, {maximal device=1}}").UniqueDevice(), 1);
  EXPECT_FALSE(P("{{maximal device=0}, {maximal device=1}}").UniqueDevice());
  EXPECT_FALSE(P("{replicated}").UniqueDevice());
  EXPECT_EQ(Sharding::SingleTuple(2, P("{devices=[2]0,1}")),
            P("{{devices=[2]0,1}, {devices=[2]0,1}}"));
}

TEST(ShardingValidate, Messages) {
  EXPECT_EQ(P("{devices=[2,2,2]<=[8]}").Validate(2, 8).message(),
            "sharding has 3 tile dims but the shape has rank 2");
  EXPECT_TRUE(P("{devices=[2,2,2]<=[8] last_tile_dim_replicate}")
                  .Validate(2, 8)
                  .ok());
  EXPECT_EQ(P("{devices=[2,2]<=[4]}").Validate(2, 2).message(),
            "sharding uses device 3 but there are only 2 devices");
  EXPECT_FALSE(P("{maximal device=4}").Validate(1, 4).ok());
  EXPECT_TRUE(P("{maximal device=3}").Validate(1, 4).ok());
  EXPECT_TRUE(P("{replicated}").Validate(5, 1).ok());
  EXPECT_FALSE(P("{{replicated}}").Validate(1, 2).ok());
  EXPECT_TRUE(P("{{replicated}, {devices=[2]0,1}}").ValidateTuple({0, 1}, 2).ok());
  EXPECT_FALSE(P("{{replicated}, {devices=[2]0,1}}").ValidateTuple({1, 1, 1}, 2).ok());
  EXPECT_FALSE(P("{{replicated}, {devices=[2]0,1}}").ValidateTuple({1, 2}, 2).ok());
}

}  // namespace
}  // namespace meshsplit
