// The PartitionInvariantRng and PartitionInvariantRngBitGenerator
// custom-call kernels: a tile drawn with explicit offsets equals that window
// of the whole op's values, padding past the global shape holds the lower
// bound, and malformed records are located errors.
#include <gtest/gtest.h>

#include "runtime_test_util.h"

namespace meshsplit {
namespace {

using rttest::RunHlo;
using rttest::RunStatus;
using rttest::Values;

const char* kWhole = R"(HloModule m
ENTRY e {
  a = f32[] constant(-2)
  b = f32[] constant(3)
  ROOT r = f32[5,4] rng(a, b), distribution=rng_uniform
})";

// The tile [3:5, 2:4] of kWhole, padded to 3x3 (row 5 and column 4 lie
// past the global shape).
const char* kTile = R"(HloModule m
ENTRY e {
  a = f32[] constant(-2)
  b = f32[] constant(3)
  o0 = s32[] constant(3)
  o1 = s64[] constant(2)
  ROOT t = f32[3,3] custom-call(a, b, o0, o1), custom_call_target="PartitionInvariantRng", frontend_attributes={ms_rng_distribution="rng_uniform",ms_rng_global_dims="5,4",ms_rng_name="r"}
})";

TEST(PartitionInvariantRngKernel, TileIsTheWindowOfTheWholeDraw) {
  std::vector<double> whole = Values(RunHlo(kWhole));
  std::vector<double> tile = Values(RunHlo(kTile));
  ASSERT_EQ(whole.size(), 20u);
  ASSERT_EQ(tile.size(), 9u);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      if (3 + i < 5 && 2 + j < 4)
        EXPECT_EQ(tile[i * 3 + j], whole[(3 + i) * 4 + 2 + j]) << i << "," << j;
      else
        EXPECT_EQ(tile[i * 3 + j], -2.0) << "padding at " << i << "," << j;
    }
}

TEST(PartitionInvariantRngKernel, NameIsTheKey) {
  // Another recorded name draws another stream.
  std::string other = kTile;
  other.replace(other.find("ms_rng_name=\"r\""), 15, "ms_rng_name=\"q\"");
  EXPECT_NE(Values(RunHlo(kTile)), Values(RunHlo(other)));
}

TEST(PartitionInvariantRngKernel, MalformedRecordsAreErrors) {
  auto expect_error = [](std::string hlo, const std::string& from, const std::string& to,
                         const std::string& message) {
    size_t at = hlo.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    hlo.replace(at, from.size(), to);
    Status s = RunStatus(hlo);
    ASSERT_FALSE(s.ok()) << hlo;
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("%t"), std::string::npos) << s.message();
  };
  expect_error(kTile, "ms_rng_global_dims=\"5,4\",", "", "ms_rng_global_dims");
  expect_error(kTile, ",ms_rng_name=\"r\"", "", "ms_rng_name");
  expect_error(kTile, "\"5,4\"", "\"5,x\"", "comma-separated");
  expect_error(kTile, "\"5,4\"", "\"5,\"", "comma-separated");
  expect_error(kTile, "\"5,4\"", "\"5\"", "one offset per dim");
  expect_error(kTile, "(a, b, o0, o1)", "(a, b, o0)", "one offset per dim");
  expect_error(kTile, "s32[] constant(3)", "s32[] constant(-1)", "non-negative");
  expect_error(kTile, "rng_uniform", "rng_poisson", "unknown rng distribution");
  expect_error(kTile, "f32[] constant(3)", "f32[] constant(-3)", "a < b");
}

// A PartitionInvariantRngBitGenerator tile: rows [2:4) of the whole bits,
// the same new state; malformed operands are located errors.
TEST(PartitionInvariantRngKernel, BitGeneratorTileIsTheWindowOfTheWholeBits) {
  const char* whole = R"(HloModule m
ENTRY e {
  s = u64[2] constant({5, 9})
  ROOT g = (u64[2], u16[4,3]) rng-bit-generator(s), algorithm=rng_default
})";
  const char* tile = R"(HloModule m
ENTRY e {
  s = u64[2] constant({5, 9})
  o0 = s32[] constant(2)
  o1 = s32[] constant(0)
  ROOT t = (u64[2], u16[2,3]) custom-call(s, o0, o1), custom_call_target="PartitionInvariantRngBitGenerator", frontend_attributes={ms_rng_distribution="rng_default",ms_rng_global_dims="4,3",ms_rng_name="g"}
})";
  Literal w = RunHlo(whole), t = RunHlo(tile);
  ASSERT_EQ(w.elements().size(), 2u);
  ASSERT_EQ(t.elements().size(), 2u);
  EXPECT_TRUE(t.elements()[0].BitwiseEqual(w.elements()[0]));
  std::vector<double> wb = Values(w.elements()[1]), tb = Values(t.elements()[1]);
  ASSERT_EQ(tb.size(), 6u);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(tb[i], wb[6 + i]) << i;
  std::string bad = tile;
  bad.replace(bad.find("(s, o0, o1)"), 11, "(s, o0)");
  Status st = RunStatus(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("one offset per dim"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace meshsplit
