// Interpreter tests for data movement: broadcast, reshape, transpose, slice,
// dynamic-slice/update-slice (with XLA's start clamping), pad (negative and
// interior), concatenate, reverse. Expected arrays are NumPy results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "runtime/kernels.h"
#include "runtime/parallel.h"
#include "runtime/streaming.h"
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

// ---- StridedCopy against a naive element-by-element reference ----

// dst[dst_base + I.dst_strides] = src[src_base + I.src_strides] for every
// index I, one element at a time in row-major order of I.
void NaiveStridedCopy(const uint8_t* src, const std::vector<int64_t>& ss, int64_t sb, uint8_t* dst,
                      const std::vector<int64_t>& ds, int64_t db,
                      const std::vector<int64_t>& dims, int64_t elem) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t so = sb, doff = db;
    for (size_t i = 0; i < dims.size(); ++i) {
      so += idx[i] * ss[i];
      doff += idx[i] * ds[i];
    }
    std::memcpy(dst + doff * elem, src + so * elem, elem);
    for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
      if (++idx[i] < dims[i]) break;
      idx[i] = 0;
    }
  }
}

// Distinct-ish bytes so a misplaced element is visible.
std::vector<uint8_t> PatternBytes(int64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// Transposes a row-major array of `in_dims` by `perm` (out dim i = in dim
// perm[i]) with StridedCopy and with the naive loop; returns whether the
// outputs are byte-identical (and reports the case on failure).
::testing::AssertionResult TransposeMatches(const std::vector<int64_t>& in_dims,
                                            const std::vector<int64_t>& perm, int64_t elem) {
  int r = static_cast<int>(in_dims.size());
  std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  std::vector<int64_t> out_dims(r), src(r);
  for (int i = 0; i < r; ++i) {
    out_dims[i] = in_dims[perm[i]];
    src[i] = in_strides[perm[i]];
  }
  int64_t n = 1;
  for (int64_t d : in_dims) n *= d;
  std::vector<uint8_t> in = PatternBytes(n * elem, static_cast<uint32_t>(n + elem));
  // Different initial garbage in the two outputs: every byte must be written.
  std::vector<uint8_t> got(n * elem, 0xAB), want(n * elem, 0x11);
  interp::StridedCopy(in.data(), src, 0, got.data(), RowMajorStrides(out_dims), 0, out_dims, elem);
  NaiveStridedCopy(in.data(), src, 0, want.data(), RowMajorStrides(out_dims), 0, out_dims, elem);
  if (got == want) return ::testing::AssertionSuccess();
  std::string c = "dims";
  for (int64_t d : in_dims) c += " " + std::to_string(d);
  c += " perm";
  for (int64_t p : perm) c += " " + std::to_string(p);
  return ::testing::AssertionFailure() << c << " elem " << elem;
}

const int64_t kElemWidths[] = {1, 2, 4, 8, 16, 3};

TEST(StridedCopy, Rank2TransposesAroundTileBoundaries) {
  const int64_t sizes[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100};
  for (int64_t elem : kElemWidths)
    for (int64_t a : sizes)
      for (int64_t b : sizes) {
        EXPECT_TRUE(TransposeMatches({a, b}, {1, 0}, elem));
        EXPECT_TRUE(TransposeMatches({a, b}, {0, 1}, elem));
      }
}

// The transposing walk's tiles are 256 (128 for 8-byte, 64 for 16-byte
// elements) along the destination-contiguous dim by 8 to 32 along the
// source-contiguous one, with 8x8 / 4x4 register blocks inside: sizes just
// around each of those edges.
TEST(StridedCopy, Rank2TransposesAroundLongTileBoundaries) {
  const int64_t sizes[] = {1, 7, 8, 9, 31, 33, 63, 65, 127, 128, 129, 255, 256, 257, 300};
  for (int64_t elem : kElemWidths)
    for (int64_t a : sizes)
      for (int64_t b : sizes) EXPECT_TRUE(TransposeMatches({a, b}, {1, 0}, elem));
}

TEST(StridedCopy, Rank3AllPermutations) {
  const int64_t sizes[] = {1, 16, 17, 33, 65};
  for (int64_t elem : kElemWidths)
    for (int64_t a : sizes)
      for (int64_t b : sizes)
        for (int64_t c : sizes) {
          std::vector<int64_t> perm = {0, 1, 2};
          do {
            EXPECT_TRUE(TransposeMatches({a, b, c}, perm, elem));
          } while (std::next_permutation(perm.begin(), perm.end()));
        }
}

TEST(StridedCopy, Rank4AllPermutations) {
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 17, 33, 65}, {65, 33, 17, 2}, {1, 64, 1, 63}, {3, 1, 32, 33},
      {15, 16, 17, 4}, {2, 2, 2, 2},    {64, 64, 1, 2}, {5, 9, 1, 70}};
  for (int64_t elem : kElemWidths)
    for (const auto& dims : shapes) {
      std::vector<int64_t> perm = {0, 1, 2, 3};
      do {
        EXPECT_TRUE(TransposeMatches(dims, perm, elem));
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
}

// Random layouts beyond transposes: source strides may be 0 (broadcast),
// negative (reverse) or stepped (strided slice); the destination is a
// permuted, padded window of a larger buffer (dynamic-update-slice, pad,
// concatenate). Bytes outside the window must stay untouched.
TEST(StridedCopy, RandomStridesMatchNaive) {
  std::mt19937 gen(1234);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  };
  for (int iter = 0; iter < 3000; ++iter) {
    int r = static_cast<int>(uni(1, 4));
    int64_t elem = kElemWidths[uni(0, 5)];
    // Some sizes past two tile sides, but at most ~100k elements per case.
    std::vector<int64_t> dims(r);
    int64_t total = 1;
    for (auto& d : dims) {
      d = uni(0, 9) < 7 ? uni(1, 40) : uni(60, 70);
      if (total * d > 100000) d = 1 + 100000 / (total * 4);
      total *= d;
    }
    // Source: each dim gets stride 0 (20%), or +-step * its row-major stride in
    // a permuted source layout.
    std::vector<int64_t> src_order(r), dst_order(r);
    std::iota(src_order.begin(), src_order.end(), 0);
    std::iota(dst_order.begin(), dst_order.end(), 0);
    std::shuffle(src_order.begin(), src_order.end(), gen);
    std::shuffle(dst_order.begin(), dst_order.end(), gen);
    std::vector<int64_t> ss(r), ds(r);
    int64_t src_span = 1, src_base = 0;
    for (int k = r - 1; k >= 0; --k) {
      int i = static_cast<int>(src_order[k]);
      if (uni(0, 4) == 0) {
        ss[i] = 0;
        continue;
      }
      int64_t step = uni(1, 2);
      bool negative = uni(0, 3) == 0;
      ss[i] = (negative ? -1 : 1) * step * src_span;
      if (negative) src_base += step * src_span * (dims[i] - 1);
      src_span *= step * dims[i];
    }
    // Destination: padded extents, laid out in dst_order.
    std::vector<int64_t> pad(r);
    int64_t dst_span = 1, dst_base = 0;
    for (int k = r - 1; k >= 0; --k) {
      int i = static_cast<int>(dst_order[k]);
      pad[i] = uni(0, 2);
      ds[i] = dst_span;
      dst_base += pad[i] * dst_span;
      dst_span *= dims[i] + 2 * pad[i];
    }
    std::vector<uint8_t> src = PatternBytes(src_span * elem, iter);
    std::vector<uint8_t> got(dst_span * elem, 0x5A), want(dst_span * elem, 0x5A);
    interp::StridedCopy(src.data(), ss, src_base, got.data(), ds, dst_base, dims, elem);
    NaiveStridedCopy(src.data(), ss, src_base, want.data(), ds, dst_base, dims, elem);
    ASSERT_EQ(got, want) << "iteration " << iter;
  }
}

// Outputs of at least StreamingBytes() go through the streaming stores: the
// tiles are assembled in scratch and streamed, and contiguous runs stream
// with unaligned ends. Sizes are ragged against the tiles and the 4x4 / 2x2
// register transposes.
TEST(StridedCopy, StreamedOutputsMatchNaive) {
  for (int64_t elem : {int64_t{4}, int64_t{8}, int64_t{2}, int64_t{16}}) {
    const int64_t k = interp::StreamingBytes() / (2 * 37 * elem) + 5;
    EXPECT_TRUE(TransposeMatches({2, 37, k}, {0, 2, 1}, elem));
    EXPECT_TRUE(TransposeMatches({2, k, 37}, {2, 1, 0}, elem));
  }
  // A column slice [3, cols - 5) of a [rows, cols] f32 array: rows are runs
  // whose ends are not 16-byte aligned.
  const int64_t cols = 1001, rows = interp::StreamingBytes() / (4 * (cols - 8)) + 3;
  std::vector<uint8_t> src = PatternBytes(rows * cols * 4, 7);
  std::vector<uint8_t> got((rows * (cols - 8)) * 4, 0xAB), want(got.size(), 0x11);
  interp::StridedCopy(src.data(), {cols, 1}, 3, got.data(), {cols - 8, 1}, 0, {rows, cols - 8}, 4);
  NaiveStridedCopy(src.data(), {cols, 1}, 3, want.data(), {cols - 8, 1}, 0, {rows, cols - 8}, 4);
  EXPECT_EQ(got, want);
}

// Transposing copies of at least 4 MiB split their (outer index, band)
// units over the intra-op threads: the same bytes on 1, 2 and 3 threads, for
// unit counts that do not divide evenly, below and above StreamingBytes().
TEST(StridedCopy, TransposesSplitOverThreadsMatchNaive) {
  const int saved = interp::IntraOpThreads();
  const int64_t streamed = interp::StreamingBytes() / (4 * 3 * 300) + 7;
  for (int threads : {1, 2, 3}) {
    interp::SetIntraOpThreads(threads);
    EXPECT_TRUE(TransposeMatches({3, 1111, 500}, {0, 2, 1}, 4)) << threads << " threads";
    EXPECT_TRUE(TransposeMatches({5, 77, 3001}, {0, 2, 1}, 8)) << threads << " threads";
    EXPECT_TRUE(TransposeMatches({3, streamed, 300}, {0, 2, 1}, 4)) << threads << " threads";
  }
  interp::SetIntraOpThreads(saved);
}

TEST(DataMovement, StreamedElementwiseMatchesScalarLoop) {
  // Large enough to stream, with a ragged tail; once with fresh outputs and
  // once with the operands donated (the output then aliases operand 0).
  const int64_t n = interp::StreamingBytes() / 4 + 13;
  auto module = ParseModuleText("HloModule m\nENTRY e {\n  a = f32[" + std::to_string(n) +
                                "] parameter(0)\n  b = f32[" + std::to_string(n) +
                                "] parameter(1)\n  s = f32[" + std::to_string(n) +
                                "] subtract(a, b)\n  ROOT t = f32[" + std::to_string(n) +
                                "] negate(s)\n}");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  Literal a(Shape(PrimitiveType::F32, {n})), b(Shape(PrimitiveType::F32, {n}));
  for (int64_t i = 0; i < n; ++i) {
    a.data<float>()[i] = static_cast<float>(i % 1000) * 0.5f;
    b.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  }
  auto fresh = EvaluateBorrowed(*(*module)->entry(), {&a, &b});
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  std::vector<Literal> args;
  args.push_back(a);
  args.push_back(b);
  auto donated = EvaluateModule(**module, std::move(args));
  ASSERT_TRUE(donated.ok()) << donated.status().ToString();
  for (int64_t i = 0; i < n; ++i) {
    const float want = -(a.data<float>()[i] - b.data<float>()[i]);
    ASSERT_EQ(fresh->data<float>()[i], want) << "element " << i;
    ASSERT_EQ(donated->data<float>()[i], want) << "element " << i;
  }
}

TEST(DataMovement, Rank4TransposeAndBroadcastThroughInterpreter) {
  // out[a][d][b][c] = in[a][b][c][d], sizes around the tile side.
  const char* hlo = R"(HloModule m
ENTRY e {
  p = f32[2,17,33,65] parameter(0)
  ROOT t = f32[2,65,17,33] transpose(p), dimensions={0,3,1,2}
})";
  const int64_t A = 2, B = 17, C = 33, D = 65;
  Literal r = RunHlo(hlo, {F32({A, B, C, D}, Iota(A * B * C * D))});
  for (int64_t a = 0; a < A; ++a)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c)
          ASSERT_EQ(r.GetDouble(((a * D + d) * B + b) * C + c), ((a * B + b) * C + c) * D + d);
  // Broadcast of a [40,70] operand into dims {2,0} of [70,3,40]: the operand's
  // contiguous dim becomes the output's outermost one.
  const char* bc = R"(HloModule m
ENTRY e {
  p = f32[40,70] parameter(0)
  ROOT b = f32[70,3,40] broadcast(p), dimensions={2,0}
})";
  Literal rb = RunHlo(bc, {F32({40, 70}, Iota(40 * 70))});
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 40; ++k) ASSERT_EQ(rb.GetDouble((i * 3 + j) * 40 + k), k * 70 + i);
}

}  // namespace
}  // namespace meshsplit::rttest
