// Shape shrinking keeps modules valid, keeps every sharded dim's
// divisibility by its tile count (even stays even, a remainder stays the
// same), moves size attributes (slices, pads, gather slice sizes, windows)
// with the shapes, pins dims it cannot rewrite and refuses when nothing can
// shrink.
#include <gtest/gtest.h>

#include <map>

#include "ir/computation.h"
#include "ir/verifier.h"
#include "text/parser.h"
#include "text/printer.h"
#include "transforms/shrink_shapes.h"

namespace meshsplit {
namespace {

std::unique_ptr<Module> Parse(const std::string& text) {
  StatusOr<std::unique_ptr<Module>> m = ParseModuleText(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

const Instruction* Find(const Module& m, const std::string& name) {
  for (const auto& c : m.computations())
    if (const Instruction* i = c->Find(name)) return i;
  ADD_FAILURE() << "no instruction " << name;
  return nullptr;
}

std::vector<int64_t> Dims(const Module& m, const std::string& name) {
  const Instruction* i = Find(m, name);
  return i ? i->shape().dimensions() : std::vector<int64_t>{};
}

// Every array instruction with a tiled (non-tuple) sharding: each dim keeps
// its remainder modulo its tile count, and no dim grew.
void ExpectDivisibilityKept(const Module& before, const Module& after) {
  for (const auto& c : before.computations())
    for (const auto& i : c->instructions()) {
      const Instruction* j = Find(after, i->name());
      ASSERT_NE(j, nullptr);
      if (!i->shape().IsArray()) continue;
      ASSERT_EQ(i->shape().rank(), j->shape().rank()) << i->name();
      for (int d = 0; d < i->shape().rank(); ++d)
        EXPECT_LE(j->shape().dimensions(d), i->shape().dimensions(d)) << i->name() << " dim " << d;
      if (!i->has_sharding() || !i->sharding()->IsTiled()) continue;
      for (int d = 0; d < i->shape().rank(); ++d) {
        int64_t t = i->sharding()->TileDim(d);
        EXPECT_EQ(i->shape().dimensions(d) % t, j->shape().dimensions(d) % t)
            << "%" << i->name() << " dim " << d << ": " << i->shape().dimensions(d) << " -> "
            << j->shape().dimensions(d) << " over " << t << " tiles";
      }
    }
}

struct Shrunk {
  std::unique_ptr<Module> before, after;
  StatusOr<ShrinkShapesReport> report = Status::Error("not run");
};

Shrunk ShrinkText(const std::string& text, ShrinkShapesOptions options = {}) {
  Shrunk s;
  s.before = Parse(text);
  s.after = Parse(text);
  if (!s.after) return s;
  s.report = ShrinkShapes(*s.after, options);
  if (s.report.ok()) {
    Status v = VerifyModule(*s.after);
    EXPECT_TRUE(v.ok()) << v.ToString() << "\n" << PrintModule(*s.after);
    ExpectDivisibilityKept(*s.before, *s.after);
    // The result prints and parses back.
    EXPECT_NE(Parse(PrintModule(*s.after)), nullptr);
  }
  return s;
}

TEST(ShrinkShapesTest, EinsumKeepsEvenAndUnevenSplits) {
  // 63 over 4 tiles is uneven (remainder 3), 24 over 4 even, 39296 is not
  // sharded; contracting and batch dims shrink together.
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %lhs = f32[32,24,63,128] parameter(0)
  %lhs.copy = f32[32,24,63,128] copy(%lhs), sharding={devices=[1,4,1,1]<=[4]}
  %rhs = f32[32,39296,63,128] parameter(1)
  %rhs.copy = f32[32,39296,63,128] copy(%rhs), sharding={devices=[1,1,4,1]<=[4]}
  ROOT %dot = f32[32,24,39296] dot(%lhs.copy, %rhs.copy), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2,3}, rhs_contracting_dims={2,3}, sharding={devices=[1,4,1]<=[4]}
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  std::vector<int64_t> rhs = Dims(*s.after, "rhs");
  EXPECT_EQ(rhs[2] % 4, 3);
  EXPECT_LT(rhs[2], 63);
  EXPECT_LT(rhs[1], 39296);
  EXPECT_EQ(Dims(*s.after, "lhs")[2], rhs[2]);  // contracting pair
  EXPECT_EQ(Dims(*s.after, "lhs")[3], rhs[3]);
  EXPECT_EQ(Dims(*s.after, "lhs")[1] % 4, 0);
  EXPECT_EQ(Dims(*s.after, "dot"),
            (std::vector<int64_t>{rhs[0], Dims(*s.after, "lhs")[1], rhs[1]}));
  EXPECT_EQ(s.report->changes.size(), 3u);  // lhs, rhs, root
  EXPECT_NE(s.report->Summary().find("%rhs: f32[32,39296,63,128] -> f32["), std::string::npos);
}

TEST(ShrinkShapesTest, TransposeAndBroadcastDimsFollowTheirFactors) {
  // The transpose swaps the two dims; the broadcast adds a new dim 1 (free
  // to shrink on its own) and keeps the others in order.
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %x = f32[96,40] parameter(0)
  %t = f32[40,96] transpose(%x), dimensions={1,0}
  ROOT %b = f32[40,50,96] broadcast(%t), dimensions={0,2}
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  std::vector<int64_t> x = Dims(*s.after, "x");
  EXPECT_LT(x[0], 96);
  EXPECT_LT(x[1], 40);
  EXPECT_EQ(Dims(*s.after, "t"), (std::vector<int64_t>{x[1], x[0]}));
  std::vector<int64_t> b = Dims(*s.after, "b");
  EXPECT_EQ(b[0], x[1]);
  EXPECT_EQ(b[2], x[0]);
  EXPECT_LT(b[1], 50);
}

TEST(ShrinkShapesTest, ShardingSourceAddsTileCounts) {
  // Without the source, %x's dim 0 (10, unsharded) shrinks to min_dim; a
  // source module whose %x is tiled 3 ways keeps 10 % 3 == 1.
  const char* text = R"(HloModule m
ENTRY e {
  %x = f32[10,8] parameter(0)
  ROOT %n = f32[10,8] negate(%x)
}
)";
  Shrunk plain = ShrinkText(text);
  ASSERT_TRUE(plain.report.ok());
  EXPECT_EQ(Dims(*plain.after, "x")[0], 4);
  std::unique_ptr<Module> source = Parse(R"(HloModule m
ENTRY e {
  %x = f32[10,8] parameter(0), sharding={devices=[3,1]<=[3]}
  ROOT %n = f32[10,8] negate(%x), sharding={devices=[3,1]<=[3]}
}
)");
  ShrinkShapesOptions options;
  options.sharding_source = source.get();
  Shrunk tiled = ShrinkText(text, options);
  ASSERT_TRUE(tiled.report.ok());
  EXPECT_EQ(Dims(*tiled.after, "x")[0], 7);  // 1 + 2 rounds of 3
  EXPECT_EQ(Dims(*tiled.after, "n")[0], 7);
}

TEST(ShrinkShapesTest, DivisorKeepsProportions) {
  // With a divisor, 4096 -> 16 and 64 -> 4 (the floor), where the smallest
  // shapes would make both 4; the 3-way split of 100 keeps remainder 1.
  const char* text = R"(HloModule m
ENTRY e {
  %x = f32[4096,64,100] parameter(0), sharding={devices=[1,1,3]<=[3]}
  ROOT %n = f32[4096,64,100] negate(%x), sharding={devices=[1,1,3]<=[3]}
}
)";
  ShrinkShapesOptions options;
  options.divisor = 256;
  Shrunk s = ShrinkText(text, options);
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  EXPECT_EQ(Dims(*s.after, "x"), (std::vector<int64_t>{16, 4, 7}));
  Shrunk smallest = ShrinkText(text);
  ASSERT_TRUE(smallest.report.ok());
  EXPECT_EQ(Dims(*smallest.after, "x"), (std::vector<int64_t>{4, 4, 7}));
}

TEST(ShrinkShapesTest, ReshapeKeepsProductsAndMapsOneToOneFactors) {
  // 4096 <-> 32x128 must keep its product, so those dims stay; 64, 1025
  // and 16384 map 1:1 and shrink; the size-1 dim is dropped by the reshape.
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %p0 = bf16[64,1025,4096] parameter(0), sharding={devices=[8,1,1,8]<=[64] last_tile_dim_replicate}
  %p1 = bf16[1,4096,16384] parameter(1), sharding={devices=[1,8,8]<=[64]}
  %r0 = bf16[64,1025,32,128] reshape(%p0), sharding={devices=[8,1,1,1,8]<=[64] last_tile_dim_replicate}
  %r1 = bf16[32,128,16384] reshape(%p1), sharding={devices=[8,1,8]<=[64]}
  ROOT %dot = bf16[32,64,1025,16384] dot(%r0, %r1), lhs_batch_dims={2}, lhs_contracting_dims={3}, rhs_batch_dims={0}, rhs_contracting_dims={1}, sharding={devices=[1,8,1,8]<=[64]}
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  std::vector<int64_t> r0 = Dims(*s.after, "r0");
  EXPECT_EQ(r0[2], 32);
  EXPECT_EQ(r0[3], 128);
  EXPECT_EQ(Dims(*s.after, "p1")[1], 4096);
  EXPECT_LT(r0[0], 64);
  EXPECT_EQ(r0[0] % 8, 0);
  EXPECT_LT(r0[1], 1025);
  EXPECT_LT(Dims(*s.after, "p1")[2], 16384);
  EXPECT_EQ(Dims(*s.after, "p1")[0], 1);
}

TEST(ShrinkShapesTest, SlicesAndPadsMoveOrPin) {
  // A whole-dim slice follows its operand (the limit moves); a partial
  // slice and a padded dim keep their sizes.
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %p = f32[100,50,30] parameter(0)
  %whole = f32[100,50,30] slice(%p), slice={[0:100], [0:50], [0:30]}
  %part = f32[100,20,30] slice(%whole), slice={[0:100], [10:30], [0:30]}
  %z = f32[] constant(0)
  ROOT %pad = f32[100,20,34] pad(%part, %z), padding=0_0x0_0x2_2
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  std::vector<int64_t> p = Dims(*s.after, "p");
  EXPECT_EQ(p, (std::vector<int64_t>{4, 50, 30}));
  const Instruction* whole = Find(*s.after, "whole");
  EXPECT_EQ(whole->attrs().slice[0].limit, 4);
  EXPECT_EQ(whole->attrs().slice[1].limit, 50);
  EXPECT_EQ(Dims(*s.after, "pad"), (std::vector<int64_t>{4, 20, 34}));
}

TEST(ShrinkShapesTest, GatherSliceSizesFollowWholeDims) {
  // Gathered rows: the indexed dim shrinks freely (slice size 1), the
  // whole-row dim shrinks with the output and its slice size moves.
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %input = bf16[250112,4096] parameter(0)
  %cpy = bf16[250112,4096] copy(%input), sharding={devices=[32,1]<=[32]}
  %indices = s32[64,1,1] parameter(1)
  ROOT %gather = bf16[64,1,4096] gather(%cpy, %indices), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,4096}, sharding={replicated}
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  std::vector<int64_t> in = Dims(*s.after, "input");
  EXPECT_EQ(in[0] % 32, 0);
  EXPECT_LT(in[0], 250112);
  EXPECT_LT(in[1], 4096);
  const Instruction* g = Find(*s.after, "gather");
  EXPECT_EQ(g->attrs().gather_slice_sizes, (std::vector<int64_t>{1, in[1]}));
  EXPECT_EQ(Dims(*s.after, "gather"), (std::vector<int64_t>{4, 1, in[1]}));
  EXPECT_EQ(Dims(*s.after, "indices")[2], 1);  // the index vector dim stays
}

TEST(ShrinkShapesTest, ConstantGatherIndicesPinTheRowsTheyName) {
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %table = f32[1000,64] parameter(0)
  %rows = s32[2,1] constant({{5},{700}})
  ROOT %g = f32[2,64] gather(%table, %rows), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  EXPECT_EQ(Dims(*s.after, "table"), (std::vector<int64_t>{1000, 4}));
  EXPECT_EQ(Find(*s.after, "g")->attrs().gather_slice_sizes, (std::vector<int64_t>{1, 4}));
}

TEST(ShrinkShapesTest, ConstantOffsetsPinTheDimTheyIndex) {
  // The update lands at offset 192 of 512: that dim (and the update's)
  // keeps its size; the batch and feature dims shrink.
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %big = bf16[16,512,384] parameter(0), sharding={devices=[2,2,1]<=[4]}
  %upd = bf16[16,128,384] parameter(1), sharding={devices=[2,2,1]<=[4]}
  %zero = s32[] constant(0)
  %off = s32[] constant(192)
  ROOT %dus = bf16[16,512,384] dynamic-update-slice(%big, %upd, %zero, %off, %zero), sharding={devices=[2,2,1]<=[4]}
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  EXPECT_EQ(Dims(*s.after, "big")[1], 512);
  EXPECT_EQ(Dims(*s.after, "upd")[1], 128);
  EXPECT_EQ(Dims(*s.after, "dus")[0], 4);
  EXPECT_EQ(Dims(*s.after, "dus")[2], 4);
}

TEST(ShrinkShapesTest, ConvolutionWindowsThatCoverOrCorrelateMove) {
  // Spatial dim 0: a 1-wide window (maps through); dim 1: the window
  // covers the input (output 1); dim 2: a size-1 input padded to a full
  // correlation (output = kernel size, pads follow).
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %lhs = f32[8,64,40,1,16] parameter(0)
  %rhs = f32[1,40,24,16,32] parameter(1)
  ROOT %conv = f32[8,64,1,24,32] convolution(%lhs, %rhs), window={size=1x40x24 pad=0_0x0_0x23_23}, dim_labels=b012f_012io->b012f
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  std::vector<int64_t> lhs = Dims(*s.after, "lhs"), rhs = Dims(*s.after, "rhs");
  EXPECT_EQ(lhs[1], 4);
  EXPECT_EQ(lhs[2], rhs[1]);
  EXPECT_LT(lhs[2], 40);
  EXPECT_LT(rhs[2], 24);
  const Window& w = *Find(*s.after, "conv")->attrs().window;
  EXPECT_EQ(w[1].size, rhs[1]);
  EXPECT_EQ(w[2].size, rhs[2]);
  EXPECT_EQ(w[2].padding_low, rhs[2] - 1);
  EXPECT_EQ(w[2].padding_high, rhs[2] - 1);
  EXPECT_EQ(Dims(*s.after, "conv"), (std::vector<int64_t>{4, 4, 1, rhs[2], 4}));
}

TEST(ShrinkShapesTest, WhileLoopsAndTuplesShrinkConsistently) {
  Shrunk s = ShrinkText(R"(HloModule m
body {
  %t = (s32[], f32[64,32]) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[64,32] get-tuple-element(%t), index=1
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %y = f32[64,32] add(%x, %x)
  ROOT %r = (s32[], f32[64,32]) tuple(%i1, %y)
}
cond {
  %t = (s32[], f32[64,32]) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
ENTRY e {
  %x = f32[64,32] parameter(0), sharding={devices=[2,1]<=[2]}
  %zero = s32[] constant(0)
  %init = (s32[], f32[64,32]) tuple(%zero, %x)
  %w = (s32[], f32[64,32]) while(%init), condition=cond, body=body
  ROOT %out = f32[64,32] get-tuple-element(%w), index=1
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  EXPECT_EQ(Dims(*s.after, "out"), (std::vector<int64_t>{4, 4}));
}

TEST(ShrinkShapesTest, RefusesWhenNothingCanShrink) {
  // Every large dim is pinned: an array constant and a padded dim.
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %c = f32[2,3] constant({{1,2,3},{4,5,6}})
  %p = f32[40] parameter(0)
  %z = f32[] constant(0)
  %pad = f32[44] pad(%p, %z), padding=2_2
  ROOT %t = (f32[2,3], f32[44]) tuple(%c, %pad)
}
)");
  ASSERT_FALSE(s.report.ok());
  EXPECT_NE(s.report.status().message().find("no dimension can shrink"), std::string::npos)
      << s.report.status().message();
  // The module is left as it was.
  EXPECT_EQ(PrintModule(*s.after), PrintModule(*s.before));
}

TEST(ShrinkShapesTest, UnknownOpsKeepTheirDims) {
  // A custom-call with no meaning here pins its operand and result; the
  // rest of the module still shrinks.
  Shrunk s = ShrinkText(R"(HloModule m
ENTRY e {
  %p = f32[100,60] parameter(0)
  %cc = f32[100,60] custom-call(%p), custom_call_target="Mystery"
  %q = f32[80,70] parameter(1)
  %n = f32[80,70] negate(%q)
  ROOT %t = (f32[100,60], f32[80,70]) tuple(%cc, %n)
}
)");
  ASSERT_TRUE(s.report.ok()) << s.report.status().ToString();
  EXPECT_EQ(Dims(*s.after, "p"), (std::vector<int64_t>{100, 60}));
  EXPECT_EQ(Dims(*s.after, "n"), (std::vector<int64_t>{4, 4}));
}

}  // namespace
}  // namespace meshsplit
