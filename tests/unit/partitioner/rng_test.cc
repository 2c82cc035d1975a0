// Partition-invariant rng: a tiled rng, partitioned and evaluated on every
// partition, must draw exactly the unpartitioned values of its tile, element
// for element (even and uneven tilings, partial replication, permuted
// device orders), without collectives; and the tiles of different
// partitions must not all be equal.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/partitioned_rng.h"
#include "partitioner/partitioner.h"
#include "runtime/interpreter.h"
#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit {
namespace {

struct RngCase {
  std::string type;  // element type of the rng
  std::string dims;  // "5,6"
  std::string lo, hi;
  std::string distribution;
  std::string sharding;
  int64_t n;
};

std::vector<int64_t> ParseDims(const std::string& s) {
  std::vector<int64_t> out;
  size_t p = 0;
  while (p < s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    out.push_back(std::stoll(s.substr(p, q - p)));
    p = q + 1;
  }
  return out;
}

// Element i as a double: exact for the types drawn here (f32, bf16 without
// NaNs; s32), so == compares the values exactly.
double At(const Literal& l, int64_t i) { return l.GetDouble(i); }

void CheckInvariant(const RngCase& c, uint64_t seed = 42) {
  SCOPED_TRACE(c.type + "[" + c.dims + "] " + c.distribution + " " + c.sharding);
  const std::string text = "HloModule t, num_partitions=" + std::to_string(c.n) +
                           "\nENTRY e {\n  lo = " + c.type + "[] constant(" + c.lo + ")\n  hi = " +
                           c.type + "[] constant(" + c.hi + ")\n  ROOT r = " + c.type + "[" +
                           c.dims + "] rng(lo, hi), distribution=" + c.distribution +
                           ", sharding=" + c.sharding + "\n}\n";
  auto module = ParseModuleText(text);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  PartitionOptions opts;
  opts.strict = true;
  auto out = PartitionModule(**module, opts);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::string printed = PrintModule(**out);
  // A tiled rng needs no data from other partitions, and it became the
  // partition-invariant custom-call, not a per-device rng of the tile.
  for (const char* op : {"all-reduce", "all-gather", "collective-permute", "all-to-all", " rng("})
    EXPECT_EQ(printed.find(op), std::string::npos) << op << " in\n" << printed;
  EXPECT_NE(printed.find(kPartitionInvariantRngTarget), std::string::npos) << printed;
  // The partitioned module prints and parses back to the same values.
  auto reparsed = ParseModuleText(printed);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString() << "\n" << printed;

  EvalContext whole_ctx;
  whole_ctx.rng_seed = seed;
  auto whole = EvaluateModule(**module, {}, whole_ctx);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::vector<int64_t> dims = ParseDims(c.dims);
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t d = static_cast<int64_t>(dims.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dims[d + 1];
  auto sharding = Sharding::Parse(c.sharding);
  ASSERT_TRUE(sharding.ok());
  std::set<std::vector<double>> distinct_tiles;
  int64_t covered = 0;
  for (int64_t p = 0; p < c.n; ++p) {
    EvalContext ctx;
    ctx.partition_id = p;
    ctx.rng_seed = seed;
    auto local = EvaluateModule(**reparsed, {}, ctx);
    ASSERT_TRUE(local.ok()) << local.status().ToString() << "\n" << printed;
    const std::vector<int64_t> off = sharding->TileOffsetForDevice(dims, p);
    const std::vector<int64_t> lim = sharding->TileLimitForDevice(dims, p);
    const std::vector<int64_t>& ld = local->shape().dimensions();
    std::vector<double> tile;
    // Walk the valid part of the tile (row-major over the local shape).
    std::vector<int64_t> idx(dims.size(), 0);
    for (int64_t j = 0; j < local->element_count(); ++j) {
      bool valid = true;
      int64_t g = 0;
      for (size_t d = 0; d < dims.size(); ++d) {
        valid &= off[d] + idx[d] < lim[d];
        g += (off[d] + idx[d]) * strides[d];
      }
      if (valid) {
        ASSERT_EQ(At(*local, j), At(*whole, g)) << "partition " << p << " local element " << j;
        tile.push_back(At(*local, j));
        ++covered;
      }
      for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
        if (++idx[d] < ld[d]) break;
        idx[d] = 0;
      }
    }
    if (!tile.empty()) distinct_tiles.insert(tile);
  }
  // Every element is held by (replication count) partitions.
  EXPECT_EQ(covered % whole->element_count(), 0);
  EXPECT_GE(covered, whole->element_count());
  // Different tiles hold different draws: as many distinct tiles as there
  // are tile positions with elements.
  int64_t positions = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    const int64_t k = sharding->TileDim(static_cast<int64_t>(d));
    const int64_t size = (dims[d] + k - 1) / k;
    positions *= (dims[d] + size - 1) / size;  // tiles that hold at least one element
  }
  EXPECT_EQ(static_cast<int64_t>(distinct_tiles.size()), positions);
}

TEST(PartitionInvariantRng, EvenTiling) {
  CheckInvariant({"f32", "8", "0", "1", "rng_uniform", "{devices=[4]<=[4]}", 4});
  CheckInvariant({"s32", "4", "0", "1000000", "rng_uniform", "{devices=[2]0,1}", 2});
  CheckInvariant({"f32", "6,8", "0", "1", "rng_normal", "{devices=[2,4]<=[8]}", 8});
}

TEST(PartitionInvariantRng, UnevenTiling) {
  CheckInvariant({"f32", "7", "-1", "1", "rng_uniform", "{devices=[4]<=[4]}", 4});
  CheckInvariant({"s32", "5,7", "-5", "5000", "rng_uniform", "{devices=[2,3]<=[6]}", 6});
  CheckInvariant({"f32", "50,100", "0", "1", "rng_uniform", "{devices=[3,1]<=[3]}", 3});
  CheckInvariant({"bf16", "9,3", "0", "1", "rng_normal", "{devices=[4,1]<=[4]}", 4});
}

TEST(PartitionInvariantRng, PartialReplicationAndDeviceOrder) {
  CheckInvariant({"s32", "8", "0", "100000", "rng_uniform",
                  "{devices=[2,4]<=[8] last_tile_dim_replicate}", 8});
  CheckInvariant({"f32", "6,5", "0", "1", "rng_uniform",
                  "{devices=[2,2,2]<=[2,2,2]T(2,0,1) last_tile_dim_replicate}", 8});
  CheckInvariant({"f32", "4,6", "0", "1", "rng_normal", "{devices=[2,2]3,1,0,2}", 4});
}

TEST(PartitionInvariantRng, SeedStillMatters) {
  // Same module, another seed: still invariant (checked inside), and a
  // different stream from seed 42.
  CheckInvariant({"f32", "8", "0", "1", "rng_uniform", "{devices=[4]<=[4]}", 4}, 7);
  auto m = ParseModuleText(
      "HloModule t\nENTRY e {\n  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
      "  ROOT r = f32[8] rng(lo, hi), distribution=rng_uniform\n}\n");
  ASSERT_TRUE(m.ok());
  EvalContext a, b;
  a.rng_seed = 42;
  b.rng_seed = 7;
  auto va = EvaluateModule(**m, {}, a), vb = EvaluateModule(**m, {}, b);
  ASSERT_TRUE(va.ok() && vb.ok());
  EXPECT_FALSE(va->BitwiseEqual(*vb));
}

// rng-bit-generator with tiled bits: each partition draws only its tile
// (the custom-call's bits are the tile shape) and the new state, both equal
// to the unpartitioned op's, byte for byte.
void CheckBitGenerator(const std::string& type, const std::string& dims,
                       const std::string& sharding, int64_t n) {
  SCOPED_TRACE(type + "[" + dims + "] " + sharding);
  const std::string text = "HloModule t, num_partitions=" + std::to_string(n) +
                           "\nENTRY e {\n  st = u64[2] parameter(0), sharding={replicated}\n"
                           "  ROOT g = (u64[2], " + type + "[" + dims +
                           "]) rng-bit-generator(st), algorithm=rng_default, "
                           "sharding={{replicated}, " + sharding + "}\n}\n";
  auto module = ParseModuleText(text);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto out = PartitionModule(**module, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::string printed = PrintModule(**out);
  EXPECT_NE(printed.find(kPartitionInvariantRngBitGeneratorTarget), std::string::npos) << printed;
  EXPECT_EQ(printed.find("rng-bit-generator("), std::string::npos) << printed;
  auto reparsed = ParseModuleText(printed);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
  Literal state(Shape(PrimitiveType::U64, {2}));
  state.data<uint64_t>()[0] = 0x1234567890abcdefull;
  state.data<uint64_t>()[1] = 77;
  auto whole = EvaluateModule(**module, {state}, {});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const Literal& wbits = whole->elements()[1];
  const std::vector<int64_t> gd = ParseDims(dims);
  auto s = Sharding::Parse(sharding);
  ASSERT_TRUE(s.ok());
  const int64_t size = wbits.size_bytes() / wbits.element_count();
  std::set<std::string> distinct;
  for (int64_t p = 0; p < n; ++p) {
    EvalContext ctx;
    ctx.partition_id = p;
    auto local = EvaluateModule(**reparsed, {state}, ctx);
    ASSERT_TRUE(local.ok()) << local.status().ToString() << "\n" << printed;
    EXPECT_TRUE(local->elements()[0].BitwiseEqual(whole->elements()[0])) << "state, partition " << p;
    const Literal& lbits = local->elements()[1];
    const std::vector<int64_t> off = s->TileOffsetForDevice(gd, p);
    const std::vector<int64_t> lim = s->TileLimitForDevice(gd, p);
    const std::vector<int64_t>& ld = lbits.shape().dimensions();
    ASSERT_EQ(gd.size(), 2u);
    std::string tile;
    for (int64_t i = 0; i < lim[0] - off[0]; ++i)
      for (int64_t j = 0; j < lim[1] - off[1]; ++j) {
        const int64_t g = (off[0] + i) * gd[1] + off[1] + j, l = i * ld[1] + j;
        const std::string want(reinterpret_cast<const char*>(wbits.raw()) + g * size, size);
        const std::string got(reinterpret_cast<const char*>(lbits.raw()) + l * size, size);
        ASSERT_EQ(got, want) << "partition " << p << " at " << i << "," << j;
        tile += got;
      }
    if (!tile.empty()) distinct.insert(tile);
  }
  EXPECT_GT(distinct.size(), 1u);
}

TEST(PartitionInvariantRng, BitGeneratorTiles) {
  CheckBitGenerator("u32", "8,4", "{devices=[4,1]<=[4]}", 4);
  CheckBitGenerator("u8", "5,7", "{devices=[2,3]<=[6]}", 6);
  CheckBitGenerator("u64", "3,5", "{devices=[1,2,2]<=[4] last_tile_dim_replicate}", 4);
  CheckBitGenerator("s16", "9,3", "{devices=[4,1]3,1,0,2}", 4);
}

TEST(PartitionInvariantRng, ReplicatedRngStillDrawsOnOneDeviceAndBroadcasts) {
  auto m = ParseModuleText(
      "HloModule t, num_partitions=2\nENTRY e {\n  lo = f32[] constant(0)\n"
      "  hi = f32[] constant(1)\n  ROOT r = f32[8] rng(lo, hi), distribution=rng_uniform, "
      "sharding={replicated}\n}\n");
  ASSERT_TRUE(m.ok());
  auto out = PartitionModule(**m, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::string printed = PrintModule(**out);
  EXPECT_NE(printed.find("f32[8] rng("), std::string::npos) << printed;
  EXPECT_NE(printed.find("all-reduce"), std::string::npos) << printed;
  EXPECT_EQ(printed.find(kPartitionInvariantRngTarget), std::string::npos) << printed;
}

}  // namespace
}  // namespace meshsplit
