// Tests for the sharding algebra that sharding propagation relies on: the
// symbolic merge of iota partial shardings (checked against a device walk on
// seeded random shardings), XLA's reshape rules and KeepTilesOnDim, and
// that they keep iota tile assignments symbolic over many devices.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "sharding/sharding.h"
#include "sharding/sharding_util.h"

namespace meshsplit::sharding_util {
namespace {

Sharding P(const std::string& text) {
  auto s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? *s : Sharding();
}

// Reference merge by walking the devices: each device's merged tile index
// takes each data dim from whichever side tiles it (both must agree), and
// every merged tile must get the same number of devices.
std::optional<Sharding> ReferenceMerge(const Sharding& m, const Sharding& d) {
  const TileAssignment& mt = m.tile_assignment();
  const TileAssignment& dt = d.tile_assignment();
  const int64_t rank = m.TiledDataRank();
  std::vector<int64_t> merged;
  for (int64_t i = 0; i < rank; ++i) {
    if (mt.dim(i) > 1 && dt.dim(i) > 1 && mt.dim(i) != dt.dim(i))
      return std::nullopt;
    merged.push_back(std::max(mt.dim(i), dt.dim(i)));
  }
  int64_t tiles = 1;
  for (int64_t x : merged) tiles *= x;
  if (mt.num_devices() % tiles != 0) return std::nullopt;
  std::map<std::vector<int64_t>, std::vector<int64_t>> cells;
  for (int64_t dev = 0; dev < mt.num_devices(); ++dev) {
    std::vector<int64_t> a = *mt.IndexOfDevice(dev), b = *dt.IndexOfDevice(dev);
    std::vector<int64_t> key;
    for (int64_t i = 0; i < rank; ++i) {
      if (mt.dim(i) > 1 && dt.dim(i) > 1 && a[i] != b[i]) return std::nullopt;
      key.push_back(mt.dim(i) > 1 ? a[i] : b[i]);
    }
    cells[key].push_back(dev);
  }
  const int64_t replication = mt.num_devices() / tiles;
  if (static_cast<int64_t>(cells.size()) != tiles) return std::nullopt;
  std::vector<int64_t> devices;
  for (auto& [key, devs] : cells) {
    if (static_cast<int64_t>(devs.size()) != replication) return std::nullopt;
    devices.insert(devices.end(), devs.begin(), devs.end());
  }
  merged.push_back(replication);
  return Sharding::PartialTile(
      TileAssignment::FromDevices(merged, std::move(devices)));
}

// A random rank-2 partially replicated iota sharding over `n` devices: the
// prime factors of n are dealt to dim 0, dim 1 or the replicated group, and
// the iota is reshaped and transposed at random.
Sharding RandomPartial(std::mt19937& rng, int64_t n) {
  std::vector<int64_t> primes;
  for (int64_t x = n, p = 2; x > 1;) {
    if (x % p == 0) {
      primes.push_back(p);
      x /= p;
    } else {
      ++p;
    }
  }
  std::shuffle(primes.begin(), primes.end(), rng);
  std::vector<int64_t> dims = {1, 1, 1};
  for (int64_t p : primes) dims[rng() % 3] *= p;
  // Reshape dims: a random grouping of the (shuffled) primes.
  std::shuffle(primes.begin(), primes.end(), rng);
  std::vector<int64_t> reshape;
  for (int64_t p : primes) {
    if (!reshape.empty() && rng() % 2 == 0) {
      reshape.back() *= p;
    } else {
      reshape.push_back(p);
    }
  }
  std::vector<int64_t> perm(reshape.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::shuffle(perm.begin(), perm.end(), rng);
  return Sharding::PartialTile(TileAssignment::Iota(dims, reshape, perm));
}

TEST(SymbolicMergeTest, AgreesWithADeviceWalk) {
  std::mt19937 rng(1234);
  int merged_count = 0, checked = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const int64_t n = std::vector<int64_t>{8, 12, 16, 24, 36}[iter % 5];
    Sharding m = RandomPartial(rng, n), d = RandomPartial(rng, n);
    if (!m.HasPartialReplication() || !d.HasPartialReplication()) continue;
    ++checked;
    Sharding got = d;
    const bool ok = MergeShardingIfCompatible(m, /*minimum_tiles=*/1, &got);
    std::optional<Sharding> want = ReferenceMerge(m, d);
    ASSERT_EQ(ok, want.has_value()) << "seed 1234 iter " << iter << ": "
                                    << m.ToString() << " into " << d.ToString();
    if (ok) {
      ++merged_count;
      EXPECT_EQ(got, *want)
          << m.ToString() << " into " << d.ToString() << ": got "
          << got.ToString() << ", want " << want->ToString();
    }
  }
  // The generator must exercise both outcomes.
  EXPECT_GT(merged_count, 100);
  EXPECT_GT(checked - merged_count, 100);
}

TEST(SymbolicMergeTest, ManySymbolicDevices) {
  const int64_t before = TileAssignment::iota_expansions();
  Sharding rows = P("{devices=[8,1,1024]<=[8192] last_tile_dim_replicate}");
  Sharding cols =
      P("{devices=[1,16,512]<=[16,512]T(1,0) last_tile_dim_replicate}");
  ASSERT_TRUE(MergeShardingIfCompatible(cols, 2, &rows));
  EXPECT_EQ(rows, P("{devices=[8,16,64]<=[8,2,16,32]T(0,2,1,3) "
                    "last_tile_dim_replicate}"));
  // Both tile dim 0 but with different devices: no merge.
  Sharding a = P("{devices=[8,1,1024]<=[8192] last_tile_dim_replicate}");
  Sharding b =
      P("{devices=[8,1,1024]<=[8,1024]T(1,0) last_tile_dim_replicate}");
  Sharding c = P("{devices=[1,4,2048]<=[8192] last_tile_dim_replicate}");
  EXPECT_FALSE(MergeShardingIfCompatible(b, 2, &a));
  // Overlapping device digits (dim 0 of `a` and dim 1 of `c` both use the
  // top bits): no merge either.
  EXPECT_FALSE(MergeShardingIfCompatible(c, 2, &a));
  EXPECT_EQ(TileAssignment::iota_expansions(), before);
}

TEST(ReshapeXlaTest, SplitsMergesAndStaysSymbolic) {
  const int64_t before = TileAssignment::iota_expansions();
  auto r = ReshapeShardingXla({6, 4}, {24}, P("{devices=[2,1]0,1}"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, P("{devices=[2]0,1}"));
  EXPECT_FALSE(ReshapeShardingXla({6, 4}, {24}, P("{devices=[1,2]0,1}")));
  r = ReshapeShardingXla({6, 4}, {4, 6}, P("{devices=[6,1]<=[6]}"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, P("{devices=[2,1,3]<=[6] last_tile_dim_replicate}"));
  EXPECT_EQ(
      PropagateShardingThroughReshape({6, 4}, {24}, P("{devices=[1,2]0,1}")),
      Sharding::Replicate());
  // [64,128] tiled 8 ways on dim 0 over 8192 devices -> [64,8,16].
  Sharding big = P("{devices=[8,1,1024]<=[8192] last_tile_dim_replicate}");
  EXPECT_EQ(PropagateShardingThroughReshape({64, 128}, {64, 8, 16}, big),
            P("{devices=[8,1,1,1024]<=[8192] last_tile_dim_replicate}"));
  // Manual groups are reshaped alike.
  Sharding manual = P("{devices=[4,1,2]<=[8] last_tile_dims={manual}}");
  EXPECT_EQ(PropagateShardingThroughReshape({8, 6}, {8, 2, 3}, manual),
            P("{devices=[4,1,1,2]<=[8] last_tile_dims={manual}}"));
  Sharding manual_t =
      P("{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dims={manual}}");
  EXPECT_EQ(PropagateShardingThroughReshape({8, 6}, {2, 4, 6}, manual_t),
            P("{devices=[2,1,1,4]<=[4,2]T(1,0) last_tile_dims={manual}}"));
  EXPECT_EQ(TileAssignment::iota_expansions(), before);
}

TEST(KeepTilesOnDimTest, CoarsensADim) {
  EXPECT_EQ(KeepTilesOnDim(P("{devices=[4,2]<=[8]}"), 0, 2),
            P("{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}"));
  EXPECT_EQ(KeepTilesOnDim(P("{devices=[4,2]<=[8]}"), 1, 1),
            P("{devices=[4,1,2]<=[8] last_tile_dim_replicate}"));
}

}  // namespace
}  // namespace meshsplit::sharding_util
