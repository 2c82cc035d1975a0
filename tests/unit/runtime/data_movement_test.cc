// Interpreter tests for data movement: broadcast, reshape, transpose, slice,
// dynamic-slice/update-slice (with XLA's start clamping), pad (negative and
// interior), concatenate, reverse. Expected arrays are NumPy results.
#include <gtest/gtest.h>

#include "runtime_test_util.h"

namespace meshsplit::rttest {
namespace {

std::vector<double> Iota(int64_t n, double start = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

TEST(DataMovement, BroadcastIntoMiddleDims) {
  const char* hlo = R"(HloModule m
ENTRY e {
  p = s32[3] parameter(0)
  ROOT r = s32[2,3,2] broadcast(p), dimensions={1}
})";
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({3}, {7, 8, 9})})),
            (std::vector<int64_t>{7, 7, 8, 8, 9, 9, 7, 7, 8, 8, 9, 9}));
  const char* scalar = R"(HloModule m
ENTRY e {
  p = f32[] parameter(0)
  ROOT r = f32[2,3] broadcast(p), dimensions={}
})";
  ExpectNear(RunHlo(scalar, {F32({}, {2.5})}), std::vector<double>(6, 2.5), 0);
}

TEST(DataMovement, ReshapeAndTranspose) {
  const char* hlo = R"(HloModule m
ENTRY e {
  p = s32[24] parameter(0)
  r = s32[2,3,4] reshape(p)
  ROOT t = s32[4,2,3] transpose(r), dimensions={2,0,1}
})";
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({24}, Iota(24))})),
            (std::vector<int64_t>{0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22,
                                  3, 7, 11, 15, 19, 23}));
}

TEST(DataMovement, LargeTransposeUsesTilesCorrectly) {
  // 70x90 (not a multiple of the tile size): out[j][i] = in[i][j].
  const char* hlo = R"(HloModule m
ENTRY e {
  p = f32[70,90] parameter(0)
  ROOT t = f32[90,70] transpose(p), dimensions={1,0}
})";
  Literal r = RunHlo(hlo, {F32({70, 90}, Iota(70 * 90))});
  for (int64_t j = 0; j < 90; ++j)
    for (int64_t i = 0; i < 70; ++i) ASSERT_EQ(r.GetDouble(j * 70 + i), i * 90 + j);
}

TEST(DataMovement, SliceWithStrides) {
  const char* hlo = R"(HloModule m
ENTRY e {
  p = s32[2,3,4] parameter(0)
  ROOT s = s32[2,2,2] slice(p), slice={[0:2], [1:3], [0:4:3]}
})";
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({2, 3, 4}, Iota(24))})), (std::vector<int64_t>{4, 7, 8, 11, 16, 19, 20, 23}));
}

TEST(DataMovement, DynamicSliceClampsStarts) {
  const char* hlo = R"(HloModule m
ENTRY e {
  p = s32[4,5] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  ROOT d = s32[2,3] dynamic-slice(p, i, j), dynamic_slice_sizes={2,3}
})";
  // In range: rows 1..2, cols 1..3.
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({4, 5}, Iota(20)), S32({}, {1}), S32({}, {1})})),
            (std::vector<int64_t>{6, 7, 8, 11, 12, 13}));
  // Start (9, -4) clamps to (2, 0).
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({4, 5}, Iota(20)), S32({}, {9}), S32({}, {-4})})),
            (std::vector<int64_t>{10, 11, 12, 15, 16, 17}));
}

TEST(DataMovement, DynamicUpdateSliceClampsStarts) {
  const char* hlo = R"(HloModule m
ENTRY e {
  p = s32[3,4] parameter(0)
  u = s32[2,2] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT d = s32[3,4] dynamic-update-slice(p, u, i, j)
})";
  // Start (5, 3) clamps to (1, 2).
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({3, 4}, std::vector<double>(12, 0)), S32({2, 2}, {1, 2, 3, 4}),
                              S32({}, {5}), S32({}, {3})})),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4}));
}

TEST(DataMovement, PadNegativeAndInterior) {
  // NumPy reference (explicit interior fill, then crop/extend per side):
  // [2,3] with padding 1_-1_1 x -1_2_2 gives [3,8].
  const char* hlo = R"(HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  v = f32[] constant(-1)
  ROOT r = f32[3,8] pad(p, v), padding=1_-1_1x-1_2_2
})";
  ExpectNear(RunHlo(hlo, {F32({2, 3}, {1, 2, 3, 4, 5, 6})}),
             {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, -1, -1, 3, -1, -1,
              -1, -1, -1, -1, -1, -1, -1, -1},
             0);
  const char* simple = R"(HloModule m
ENTRY e {
  p = s32[3] parameter(0)
  v = s32[] constant(0)
  ROOT r = s32[8] pad(p, v), padding=2_1_1
})";
  EXPECT_EQ(Ints(RunHlo(simple, {S32({3}, {1, 2, 3})})), (std::vector<int64_t>{0, 0, 1, 0, 2, 0, 3, 0}));
}

TEST(DataMovement, ConcatenateAndReverse) {
  const char* hlo = R"(HloModule m
ENTRY e {
  a = s32[2,1] parameter(0)
  b = s32[2,2] parameter(1)
  ROOT c = s32[2,3] concatenate(a, b), dimensions={1}
})";
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({2, 1}, {1, 2}), S32({2, 2}, {3, 4, 5, 6})})),
            (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
  const char* rev = R"(HloModule m
ENTRY e {
  p = s32[2,3,4] parameter(0)
  ROOT r = s32[2,3,4] reverse(p), dimensions={1,2}
})";
  EXPECT_EQ(Ints(RunHlo(rev, {S32({2, 3, 4}, Iota(24))})),
            (std::vector<int64_t>{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 23, 22, 21, 20, 19, 18, 17, 16,
                                  15, 14, 13, 12}));
}

TEST(DataMovement, BadSliceIsAnErrorNotACrash) {
  Status s = RunStatus(R"(HloModule m
ENTRY e {
  p = s32[4] parameter(0)
  ROOT s = s32[3] slice(p), slice={[2:5]}
})",
                       {S32({4}, {1, 2, 3, 4})});
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace meshsplit::rttest
