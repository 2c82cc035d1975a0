// Tests of the SPMD executor on hand-written partitioned modules: splitting
// and assembling by sharding (even, uneven, partial replication, maximal,
// tuples), and N interpreters talking through the collective adapter.
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/interpreter.h"
#include "text/parser.h"

#include "parse_for_test.h"

namespace meshsplit {
namespace {

Literal Iota(const Shape& shape, double start = 0) {
  Literal l(shape);
  for (int64_t i = 0; i < l.element_count(); ++i) l.SetDouble(i, start + i);
  return l;
}

Sharding S(const std::string& text) {
  StatusOr<Sharding> s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

using spmd_test::Parse;

TEST(SplitTest, EvenTiles) {
  Literal full = Iota(Shape(PrimitiveType::F32, {4, 2}));
  auto parts = SplitByShardings(full, Shape(PrimitiveType::F32, {2, 2}), S("{devices=[2,1]0,1}"), 2);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_EQ((*parts)[0].ToString(), "{{0, 1}, {2, 3}}");
  EXPECT_EQ((*parts)[1].ToString(), "{{4, 5}, {6, 7}}");
}

TEST(SplitTest, UnevenTilesArePoisoned) {
  Literal full = Iota(Shape(PrimitiveType::F32, {5}));
  auto parts = SplitByShardings(full, Shape(PrimitiveType::F32, {3}), S("{devices=[2]1,0}"), 2);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  // Device 1 holds tile 0 = [0,1,2]; device 0 holds tile 1 = [3,4,pad].
  EXPECT_EQ((*parts)[1].GetDouble(0), 0);
  EXPECT_EQ((*parts)[0].GetDouble(1), 4);
  EXPECT_TRUE(std::isnan((*parts)[0].GetDouble(2)));
  // Integers get the garbage pattern, not zero.
  Literal ints(Shape(PrimitiveType::S32, {3}));
  auto iparts = SplitByShardings(ints, Shape(PrimitiveType::S32, {2}), S("{devices=[2]0,1}"), 2);
  ASSERT_TRUE(iparts.ok());
  EXPECT_NE((*iparts)[1].GetInt(1), 0);
  EXPECT_EQ((*iparts)[1].GetInt(0), 0);
}

TEST(SplitTest, WrongLocalShapeIsAnError) {
  Literal full = Iota(Shape(PrimitiveType::F32, {4}));
  auto parts = SplitByShardings(full, Shape(PrimitiveType::F32, {3}), S("{devices=[2]0,1}"), 2);
  ASSERT_FALSE(parts.ok());
  EXPECT_NE(parts.status().message().find("tile shape"), std::string::npos);
}

TEST(AssembleTest, RoundTripPartialReplicationAndMaximal) {
  Shape shape(PrimitiveType::S32, {5, 3});
  Literal full = Iota(shape, 1);
  for (const char* text :
       {"{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}", "{devices=[2,2]<=[2,2]T(1,0)}",
        "{devices=[1,3,2]<=[6] last_tile_dim_replicate}", "{replicated}",
        "{maximal device=1}"}) {
    Sharding s = S(text);
    int64_t n = s.IsTiled() ? s.tile_assignment().num_devices() : 4;
    Shape local(PrimitiveType::S32, s.TileShape(shape.dimensions()));
    auto parts = SplitByShardings(full, local, s, n);
    ASSERT_TRUE(parts.ok()) << text << ": " << parts.status().ToString();
    if (s.IsMaximal()) (*parts)[0] = (*parts)[1];  // only device 1 is meaningful
    auto back = Assemble(*parts, shape, s);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status().ToString();
    EXPECT_TRUE(back->BitwiseEqual(full)) << text;
  }
}

TEST(AssembleTest, DisagreeingReplicasAreReported) {
  Shape shape(PrimitiveType::F32, {2});
  std::vector<Literal> parts = {Iota(shape), Iota(shape, 1)};
  auto r = Assemble(parts, shape, Sharding::Replicate());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device 1"), std::string::npos);
  AssembleOptions lax;
  lax.check_replicas = false;
  EXPECT_TRUE(Assemble(parts, shape, Sharding::Replicate(), lax).ok());
}

TEST(AssembleTest, TupleShardings) {
  Shape shape = Shape::Tuple({Shape(PrimitiveType::F32, {4}), Shape(PrimitiveType::F32, {2})});
  Literal full = Literal::MakeTuple({Iota(Shape(PrimitiveType::F32, {4})),
                                     Iota(Shape(PrimitiveType::F32, {2}), 10)});
  Sharding s = S("{{devices=[2]0,1}, {replicated}}");
  Shape local = Shape::Tuple({Shape(PrimitiveType::F32, {2}), Shape(PrimitiveType::F32, {2})});
  auto parts = SplitByShardings(full, local, s, 2);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  auto back = Assemble(*parts, shape, s);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->BitwiseEqual(full));
}

constexpr char kOriginalDot[] = R"(
HloModule m
ENTRY e {
  a = f32[5,4] parameter(0)
  b = f32[4,3] parameter(1)
  ROOT d = f32[5,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})";

// Contracting dim split over 2 devices, partial sums all-reduced; then the
// rows split by a dynamic-slice at partition-id (uneven: 5 rows -> 3+2).
constexpr char kPartitionedDot[] = R"(
HloModule m, num_partitions=2
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[5,2] parameter(0), sharding={devices=[1,2]0,1}
  b = f32[2,3] parameter(1), sharding={devices=[2,1]0,1}
  dl = f32[5,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d = f32[5,3] all-reduce(dl), replica_groups=[1,2]<=[2], to_apply=add, channel_id=1
  zero = f32[] constant(0)
  padded = f32[6,3] pad(d, zero), padding=0_1x0_0
  pid = u32[] partition-id()
  three = u32[] constant(3)
  start = u32[] multiply(pid, three)
  z = u32[] constant(0)
  ROOT rows = f32[3,3] dynamic-slice(padded, start, z), dynamic_slice_sizes={3,3}, sharding={devices=[2,1]0,1}
})";

TEST(RunSpmdTest, ContractingSplitDotMatchesReference) {
  auto original = Parse(kOriginalDot);
  auto partitioned = Parse(kPartitionedDot);
  ASSERT_TRUE(original && partitioned);
  std::vector<Literal> inputs = {Iota(Shape(PrimitiveType::F32, {5, 4})),
                                 Iota(Shape(PrimitiveType::F32, {4, 3}), -3)};
  auto ref = EvaluateModule(*original, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto got = RunSpmd(*partitioned, inputs, original->entry()->root()->shape(), 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  // Small integers: exact in f32 whatever the summation order.
  EXPECT_TRUE(got->BitwiseEqual(*ref)) << got->ToString() << " vs " << ref->ToString();
}

// A reduce over an unevenly sharded dim without masking the padding: the NaN
// poison must show up in the result.
constexpr char kUnmaskedReduce[] = R"(
HloModule m, num_partitions=2
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[3] parameter(0), sharding={devices=[2]0,1}
  zero = f32[] constant(0)
  r = f32[] reduce(a, zero), dimensions={0}, to_apply=add
  ROOT t = f32[] all-reduce(r), replica_groups={}, to_apply=add, channel_id=1
})";

TEST(RunSpmdTest, UnmaskedPaddingIsVisible) {
  auto partitioned = Parse(kUnmaskedReduce);
  ASSERT_TRUE(partitioned);
  std::vector<Literal> inputs = {Iota(Shape(PrimitiveType::F32, {5}))};
  auto got = RunSpmd(*partitioned, inputs, Shape(PrimitiveType::F32, {}), 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(std::isnan(got->GetDouble(0)));
  SpmdRunOptions zero_pad;
  zero_pad.poison_padding = false;
  auto clean = RunSpmd(*partitioned, inputs, Shape(PrimitiveType::F32, {}), 2, zero_pad);
  ASSERT_TRUE(clean.ok());
  EXPECT_EQ(clean->GetDouble(0), 10);
}

// Every collective kind, checked against values computed by hand.
constexpr char kCollectives[] = R"(
HloModule m, num_partitions=4
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
mx {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] maximum(x, y)
}
ENTRY e {
  a = s32[2] parameter(0), sharding={devices=[4]0,1,2,3}
  ag = s32[4] all-gather(a), dimensions={0}, replica_groups=[2,2]<=[2,2]T(1,0), channel_id=1
  rs = s32[2] reduce-scatter(ag), dimensions={0}, replica_groups={{0,1},{2,3}}, to_apply=add, channel_id=2
  cp = s32[2] collective-permute(rs), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}, channel_id=3
  a2a = s32[2] all-to-all(cp), dimensions={0}, replica_groups={{0,3},{1,2}}, channel_id=4
  m = s32[2] all-reduce(a2a), replica_groups={{0,2},{1,3}}, to_apply=mx, channel_id=5
  ROOT out = s32[8] all-gather(m), dimensions={0}, replica_groups={}, channel_id=6, sharding={replicated}
})";

TEST(RunSpmdTest, CollectivesMatchHandComputedValues) {
  auto partitioned = Parse(kCollectives);
  ASSERT_TRUE(partitioned);
  std::vector<Literal> inputs = {Iota(Shape(PrimitiveType::S32, {8}))};
  auto got = RunSpmd(*partitioned, inputs, Shape(PrimitiveType::S32, {8}), 4);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  // a: d0=[0,1] d1=[2,3] d2=[4,5] d3=[6,7].
  // ag over {0,2},{1,3}: d0,d2=[0,1,4,5]; d1,d3=[2,3,6,7].
  // rs over {0,1},{2,3} (sum of [0,1,4,5]+[2,3,6,7]=[2,4,10,12]):
  //   d0=[2,4] d1=[10,12] d2=[2,4] d3=[10,12].
  // cp shifts by one: d1=[2,4] d2=[10,12] d3=[2,4] d0=[10,12].
  // a2a over {0,3}: d0=[10,2] d3=[12,4]; over {1,2}: d1=[2,10] d2=[4,12].
  // max over {0,2}: [10,12]; over {1,3}: [12,10].
  // all-gather of all: [10,12, 12,10, 10,12, 12,10].
  EXPECT_EQ(got->ToString(), "{10, 12, 12, 10, 10, 12, 12, 10}");
}

TEST(RunSpmdTest, MismatchedCollectiveIsAnErrorNotAHang) {
  auto partitioned = Parse(R"(
HloModule m, num_partitions=2
ENTRY e {
  a = f32[2] parameter(0)
  ROOT g = f32[6] all-gather(a), dimensions={0}, replica_groups={{0,1}}, channel_id=1
})");
  ASSERT_TRUE(partitioned);
  auto got = RunSpmd(*partitioned, {Iota(Shape(PrimitiveType::F32, {2}))},
                     Shape(PrimitiveType::F32, {6}), 2);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("%g"), std::string::npos) << got.status().message();
}

}  // namespace
}  // namespace meshsplit
