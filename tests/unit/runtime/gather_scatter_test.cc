// Interpreter tests for gather and scatter: embedding lookups, start-index
// clamping, batching dimensions, skipped out-of-bounds scatter windows, and
// the order in which scatter applies its combiner. Expected values worked out
// by hand from the XLA operation semantics (shown in the comments).
#include <gtest/gtest.h>

#include "runtime_test_util.h"

namespace meshsplit::rttest {
namespace {

std::vector<double> Iota(int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return v;
}

TEST(Gather, EmbeddingLookup) {
  const char* hlo = R"(HloModule m
ENTRY e {
  t = s32[5,3] parameter(0)
  i = s32[4] parameter(1)
  ROOT g = s32[4,3] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
})";
  // Row r of the table is {3r, 3r+1, 3r+2}; rows 4, 0, 2, 4.
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({5, 3}, Iota(15)), S32({4}, {4, 0, 2, 4})})),
            (std::vector<int64_t>{12, 13, 14, 0, 1, 2, 6, 7, 8, 12, 13, 14}));
}

TEST(Gather, StartIndicesAreClamped) {
  const char* hlo = R"(HloModule m
ENTRY e {
  t = s32[3,4] parameter(0)
  i = s32[2,2] parameter(1)
  ROOT g = s32[2,2,2] gather(t, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}
})";
  // (1,3) clamps to (1,2): {6,7,10,11}; (-1,0) clamps to (0,0): {0,1,4,5}.
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({3, 4}, Iota(12)), S32({2, 2}, {1, 3, -1, 0})})),
            (std::vector<int64_t>{6, 7, 10, 11, 0, 1, 4, 5}));
}

TEST(Gather, BatchingDims) {
  const char* hlo = R"(HloModule m
ENTRY e {
  t = s32[2,5] parameter(0)
  i = s32[2,3,1] parameter(1)
  ROOT g = s32[2,3] gather(t, i), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}
})";
  // out[b, j] = t[b, i[b, j]]: batch 0 reads {4,0,2}, batch 1 reads 5 + {1,1,3}.
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({2, 5}, Iota(10)), S32({2, 3, 1}, {4, 0, 2, 1, 1, 3})})),
            (std::vector<int64_t>{4, 0, 2, 6, 6, 8}));
}

const char* kAddS32 = R"(
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
)";

TEST(Scatter, AddWithDuplicatesAndOutOfBoundsIndex) {
  std::string hlo = std::string("HloModule m\n") + kAddS32 + R"(
ENTRY e {
  o = s32[5] parameter(0)
  i = s32[4,1] parameter(1)
  u = s32[4] parameter(2)
  ROOT s = s32[5] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})";
  // 1 and 3 go to index 1, 2 to index 3, index 9 is skipped.
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({5}, {0, 0, 0, 0, 0}), S32({4, 1}, {1, 3, 1, 9}), S32({4}, {1, 2, 3, 4})})),
            (std::vector<int64_t>{0, 4, 0, 2, 0}));
}

TEST(Scatter, OverwriteRowsWithImplicitIndexVector) {
  const char* hlo = R"(HloModule m
assign {
  a = s32[] parameter(0)
  ROOT b = s32[] parameter(1)
}
ENTRY e {
  o = s32[3,3] parameter(0)
  i = s32[2] parameter(1)
  u = s32[2,3] parameter(2)
  ROOT s = s32[3,3] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=assign
})";
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({3, 3}, std::vector<double>(9, 0)), S32({2}, {2, 0}), S32({2, 3}, {1, 2, 3, 4, 5, 6})})),
            (std::vector<int64_t>{4, 5, 6, 0, 0, 0, 1, 2, 3}));
}

TEST(Scatter, BatchingDims) {
  std::string hlo = std::string("HloModule m\n") + kAddS32 + R"(
ENTRY e {
  o = s32[2,4] parameter(0)
  i = s32[2,2,1] parameter(1)
  u = s32[2,2] parameter(2)
  ROOT s = s32[2,4] scatter(o, i, u), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add
})";
  // o[b, i[b, j]] += u[b, j]: batch 0 adds 1 at col 0 and 2 at col 3; batch 1 adds 3+4 at col 3.
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({2, 4}, std::vector<double>(8, 0)), S32({2, 2, 1}, {0, 3, 3, 3}), S32({2, 2}, {1, 2, 3, 4})})),
            (std::vector<int64_t>{1, 0, 0, 2, 0, 0, 0, 7}));
}

TEST(Scatter, WindowThatDoesNotFitIsSkippedWhole) {
  std::string hlo = std::string("HloModule m\n") + kAddS32 + R"(
ENTRY e {
  o = s32[4] parameter(0)
  i = s32[2,1] parameter(1)
  u = s32[2,2] parameter(2)
  ROOT s = s32[4] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})";
  // Window {10,20} at 3 would cover [3,5): skipped. {30,40} lands at [1,3).
  EXPECT_EQ(Ints(RunHlo(hlo, {S32({4}, {1, 2, 3, 4}), S32({2, 1}, {3, 1}), S32({2, 2}, {10, 20, 30, 40})})),
            (std::vector<int64_t>{1, 32, 43, 4}));
}

TEST(Scatter, CombinerAppliedInUpdateOrder) {
  const char* hlo = R"(HloModule m
twice_plus {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  two = f32[] constant(2)
  a2 = f32[] multiply(a, two)
  ROOT r = f32[] add(a2, b)
}
ENTRY e {
  o = f32[2] parameter(0)
  i = s32[3,1] parameter(1)
  u = f32[3] parameter(2)
  ROOT s = f32[2] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=twice_plus
})";
  // ((0*2 + 1)*2 + 2)*2 + 3 = 11; another order would give a different value.
  ExpectNear(RunHlo(hlo, {F32({2}, {0, 5}), S32({3, 1}, {0, 0, 0}), F32({3}, {1, 2, 3})}), {11, 5}, 0);
}

TEST(Scatter, VariadicWithTupleCombiner) {
  const char* hlo = R"(HloModule m
comb {
  a0 = s32[] parameter(0)
  a1 = f32[] parameter(1)
  b0 = s32[] parameter(2)
  b1 = f32[] parameter(3)
  s0 = s32[] add(a0, b0)
  m1 = f32[] maximum(a1, b1)
  ROOT t = (s32[], f32[]) tuple(s0, m1)
}
ENTRY e {
  o0 = s32[3] parameter(0)
  o1 = f32[3] parameter(1)
  i = s32[3,1] parameter(2)
  u0 = s32[3] parameter(3)
  u1 = f32[3] parameter(4)
  ROOT s = (s32[3], f32[3]) scatter(o0, o1, i, u0, u1), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
})";
  Literal r = RunHlo(hlo, {S32({3}, {0, 0, 0}), F32({3}, {0, 0, 0}), S32({3, 1}, {2, 0, 2}), S32({3}, {1, 2, 3}),
                           F32({3}, {-1, 4, 7})});
  ASSERT_TRUE(r.shape().IsTuple());
  EXPECT_EQ(Ints(r.elements()[0]), (std::vector<int64_t>{2, 0, 4}));
  ExpectNear(r.elements()[1], {4, 0, 7}, 0);
}

}  // namespace
}  // namespace meshsplit::rttest
