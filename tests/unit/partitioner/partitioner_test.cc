// Unit tests of the partitioner's math: sharding projection, tile offsets
// computed from partition-id (evaluated per partition with the reference
// interpreter and compared with Sharding::TileOffsetForDevice), and the
// device-count independence of the program size.
#include <gtest/gtest.h>

#include "partitioner/partitioner.h"
#include "partitioner/sharding_helpers.h"
#include "runtime/interpreter.h"
#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit {
namespace {

Sharding S(const std::string& text) {
  auto s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? *s : Sharding();
}

TEST(ShardingHelpers, PartialReplicationMovesTilingIntoSubgroup) {
  EXPECT_EQ(spmd::PartiallyReplicateTiledShardingOnDims(S("{devices=[2,2]<=[4]}"), {1}),
            S("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"));
  EXPECT_EQ(spmd::PartiallyReplicateTiledShardingOnDims(S("{devices=[2,2]<=[4]}"), {0}),
            S("{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"));
  EXPECT_EQ(spmd::PartiallyReplicateTiledShardingOnDims(S("{devices=[2,2]<=[4]}"), {0, 1}),
            Sharding::Replicate());
}

TEST(ShardingHelpers, ProjectDropsUnmappedDimsAsRequested) {
  // Iteration space [m, n, k] tiled [2,1,2]: the result [m, n] keeps m and
  // holds partial sums over k.
  Sharding it = S("{devices=[2,1,2]<=[4]}");
  Sharding out = spmd::ProjectSharding(it, {0, 1}, SubgroupType::kUnreduced);
  EXPECT_EQ(out, Sharding::Subgroup(TileAssignment::Iota({2, 1, 2}), {SubgroupType::kUnreduced}));
  EXPECT_EQ(spmd::ReduceUnreduced(out), S("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"));
  // lhs [m, k] of the same space: no dim dropped.
  EXPECT_EQ(spmd::ProjectSharding(it, {0, 2}), S("{devices=[2,2]<=[4]}"));
  // Transposed mapping.
  EXPECT_EQ(spmd::ProjectSharding(S("{devices=[2,4]<=[8]}"), {1, 0}),
            S("{devices=[4,2]<=[2,4]T(1,0)}"));
}

// Partitions `copy(p0)` from replicated to `sharding` and checks every
// partition's local tile against the tiles Sharding says it owns.
void CheckTiles(const std::string& sharding, int64_t n, int64_t rows, int64_t cols) {
  std::string text = "HloModule t, num_partitions=" + std::to_string(n) +
                     "\nENTRY e {\n  p = s32[" + std::to_string(rows) + "," +
                     std::to_string(cols) + "] parameter(0), sharding={replicated}\n" +
                     "  ROOT c = s32[" + std::to_string(rows) + "," + std::to_string(cols) +
                     "] copy(p), sharding=" + sharding + "\n}\n";
  auto module = ParseModuleText(text);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto out = PartitionModule(**module, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Literal input(Shape(PrimitiveType::S32, {rows, cols}));
  for (int64_t i = 0; i < rows * cols; ++i) input.SetInt(i, i);
  Sharding s = S(sharding);
  for (int64_t p = 0; p < n; ++p) {
    EvalContext ctx;
    ctx.partition_id = p;
    std::vector<Literal> args;
    args.push_back(input);
    auto local = EvaluateModule(**out, std::move(args), ctx);
    ASSERT_TRUE(local.ok()) << local.status().ToString() << "\n" << PrintModule(**out);
    std::vector<int64_t> offset = s.TileOffsetForDevice({rows, cols}, p);
    std::vector<int64_t> limit = s.TileLimitForDevice({rows, cols}, p);
    const std::vector<int64_t>& ld = local->shape().dimensions();
    for (int64_t i = 0; i < limit[0] - offset[0]; ++i)
      for (int64_t j = 0; j < limit[1] - offset[1]; ++j)
        EXPECT_EQ(local->GetInt(i * ld[1] + j), (offset[0] + i) * cols + offset[1] + j)
            << sharding << " partition " << p << " at " << i << "," << j;
  }
}

TEST(TileOffsets, IotaAssignments) {
  CheckTiles("{devices=[4,1]<=[4]}", 4, 8, 3);
  CheckTiles("{devices=[2,4]<=[8]}", 8, 4, 8);
  CheckTiles("{devices=[2,4]<=[4,2]T(1,0)}", 8, 4, 8);
  CheckTiles("{devices=[2,2,2]<=[2,2,2]T(2,0,1) last_tile_dim_replicate}", 8, 6, 6);
}

TEST(TileOffsets, UnevenDims) {
  CheckTiles("{devices=[4,1]<=[4]}", 4, 7, 3);
  CheckTiles("{devices=[3,2]<=[2,3]T(1,0)}", 6, 5, 3);
}

TEST(TileOffsets, ExplicitAssignment) {
  CheckTiles("{devices=[2,2]3,1,0,2}", 4, 4, 4);
}

int64_t PartitionedInstructionCount(int64_t n) {
  std::string text =
      "HloModule t\nENTRY e {\n"
      "  x = f32[8192,1024] parameter(0), sharding={devices=[" + std::to_string(n / 4) +
      ",4]<=[4," + std::to_string(n / 4) + "]T(1,0)}\n"
      "  w = f32[1024,1024] parameter(1), sharding={devices=[4,1," + std::to_string(n / 4) +
      "]<=[" + std::to_string(n) + "] last_tile_dim_replicate}\n"
      "  ROOT d = f32[8192,1024] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
      " sharding={devices=[" + std::to_string(n / 4) + ",1,4]<=[4," + std::to_string(n / 4) +
      "]T(1,0) last_tile_dim_replicate}\n}\n";
  auto module = ParseModuleText(text);
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  PartitionOptions options;
  options.num_partitions = n;
  auto out = PartitionModule(**module, options);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (getenv("MS_DEBUG_SCALING")) std::fprintf(stderr, "%s\n", PrintModule(**out).c_str());
  return out.ok() ? (*out)->entry()->instruction_count() : -1;
}

TEST(Scaling, ProgramSizeDoesNotGrowWithDevices) {
  // (Below ~64 partitions the dot's cost model may pick another strategy,
  // so compare two large meshes with the same strategy.)
  int64_t small = PartitionedInstructionCount(512);
  EXPECT_GT(small, 3);
  EXPECT_EQ(small, PartitionedInstructionCount(8192));
}

TEST(Partitioner, RejectsShardingOfWrongRank) {
  auto module = ParseModuleText(
      "HloModule t, num_partitions=2\nENTRY e {\n"
      "  ROOT p = f32[4] parameter(0), sharding={devices=[2,1]<=[2]}\n}\n");
  ASSERT_TRUE(module.ok());
  auto out = PartitionModule(**module, {});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("rank"), std::string::npos) << out.status().message();
}

TEST(Partitioner, PassReplacesComputations) {
  auto module = ParseModuleText(
      "HloModule t, num_partitions=2\nENTRY e {\n"
      "  p = f32[4] parameter(0), sharding={devices=[2]<=[2]}\n"
      "  ROOT n = f32[4] negate(p), sharding={devices=[2]<=[2]}\n}\n");
  ASSERT_TRUE(module.ok());
  PartitionPass pass;
  auto changed = pass.Run(**module);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_TRUE(*changed);
  EXPECT_EQ((*module)->entry()->root()->shape().dimensions(), std::vector<int64_t>{2});
}

}  // namespace
}  // namespace meshsplit
