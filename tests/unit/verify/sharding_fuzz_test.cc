// The sharding-mutation fuzzer's generator (verify/sharding_fuzz.h): variants
// are a pure function of the seed, every sharding it writes is valid for
// the shape and the device count (also a new count), manual regions keep
// their boundaries, and the kinds the brief asks for all occur.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ir/computation.h"
#include "verify/sharding_fuzz.h"
#include "text/printer.h"

#include "parse_for_test.h"

namespace meshsplit {
namespace {

using spmd_test::Parse;

const char* kLoop = R"(
HloModule m, num_partitions=4

cond {
  p = (f32[8,6], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=1
  c = s32[] constant(2)
  ROOT lt = pred[] compare(i, c), direction=LT
}

body {
  q = (f32[8,6], s32[]) parameter(0), sharding={{devices=[4,1]<=[4]}, {replicated}}
  x = f32[8,6] get-tuple-element(q), index=0
  y = f32[8,6] multiply(x, x), sharding={devices=[2,2]<=[4]}
  i = s32[] get-tuple-element(q), index=1
  one = s32[] constant(1)
  n = s32[] add(i, one)
  ROOT t = (f32[8,6], s32[]) tuple(y, n), sharding={{devices=[4,1]<=[4]}, {replicated}}
}

ENTRY e {
  a = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}
  b = f32[6,5] parameter(1), sharding={replicated}
  z = s32[] constant(0)
  init = (f32[8,6], s32[]) tuple(a, z)
  w = (f32[8,6], s32[]) while(init), condition=cond, body=body, sharding={{devices=[4,1]<=[4]}, {replicated}}
  r = f32[8,6] get-tuple-element(w), index=0
  ROOT d = f32[8,5] dot(r, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[1,4]<=[4]}
}
)";

// Every sharding in `m` validates against its value for `n` devices.
void ExpectValid(const Module& m, int64_t n) {
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions()) {
      if (!i->has_sharding()) continue;
      Status s;
      if (i->shape().IsTuple()) {
        std::vector<int64_t> ranks;
        for (const Shape& e : i->shape().tuple_shapes()) ranks.push_back(e.rank());
        s = i->sharding()->ValidateTuple(ranks, n);
      } else {
        s = i->sharding()->Validate(i->shape().rank(), n);
      }
      EXPECT_TRUE(s.ok()) << i->name() << ": " << i->sharding()->ToString() << ": "
                          << s.message();
    }
}

TEST(ShardingFuzz, SameSeedSameVariant) {
  auto a = Parse(kLoop);
  auto b = Parse(kLoop);
  ASSERT_TRUE(a && b);
  MutateShardings(*a, 4, 17);
  MutateShardings(*b, 4, 17);
  EXPECT_EQ(PrintModule(*a), PrintModule(*b));
}

TEST(ShardingFuzz, SeedsDifferAndEveryVariantChangesSomething) {
  std::set<std::string> texts;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto m = Parse(kLoop);
    ASSERT_TRUE(m);
    std::vector<ShardingMutation> changes = MutateShardings(*m, 4, seed);
    EXPECT_FALSE(changes.empty()) << "seed " << seed;
    ExpectValid(*m, 4);
    texts.insert(PrintModule(*m));
  }
  EXPECT_GT(texts.size(), 15u);
}

TEST(ShardingFuzz, NewDeviceCountRewritesEveryAnnotation) {
  for (int64_t n : {3, 6, 16}) {
    for (uint64_t seed = 0; seed < 10; ++seed) {
      auto m = Parse(kLoop);
      ASSERT_TRUE(m);
      MutateShardings(*m, n, seed);
      EXPECT_EQ(m->num_partitions(), n);
      ExpectValid(*m, n);
    }
  }
}

// Over many seeds the generator writes each kind of sharding the fuzzer
// is for.
TEST(ShardingFuzz, CoversTheShardingKinds) {
  bool replicated = false, maximal = false, partial = false, uneven = false, iota_t = false,
       explicit_order = false, dropped = false;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    auto m = Parse(kLoop);
    ASSERT_TRUE(m);
    for (const ShardingMutation& c : MutateShardings(*m, 8, seed)) {
      replicated |= c.after == "{replicated}";
      maximal |= c.after.find("maximal") != std::string::npos;
      partial |= c.after.find("last_tile_dim_replicate") != std::string::npos;
      iota_t |= c.after.find("T(") != std::string::npos;
      explicit_order |= c.after.find("devices=[") != std::string::npos &&
                        c.after.find("<=") == std::string::npos;
      dropped |= c.after.empty();
      // b is f32[6,5]: 4 or 8 tiles on either dim do not divide it.
      uneven |= c.instruction == "b" && (c.after.find("devices=[4,") != std::string::npos ||
                                         c.after.find("devices=[8,") != std::string::npos ||
                                         c.after.find(",4]") != std::string::npos ||
                                         c.after.find(",8]") != std::string::npos);
    }
  }
  EXPECT_TRUE(replicated);
  EXPECT_TRUE(maximal);
  EXPECT_TRUE(partial);
  EXPECT_TRUE(uneven);
  EXPECT_TRUE(iota_t);
  EXPECT_TRUE(explicit_order);
  EXPECT_TRUE(dropped);
}

TEST(ShardingFuzz, ManualRegionBoundariesAreKept) {
  const char* text = R"(
HloModule m, num_partitions=2

ENTRY e {
  a = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}
  s = f32[8,4] custom-call(a), custom_call_target="Sharding", sharding={devices=[2,1]<=[2]}
  m = f32[4,4] custom-call(s), custom_call_target="SPMDFullToShardShape", sharding={manual}
  n = f32[4,4] negate(m), sharding={manual}
  f = f32[8,4] custom-call(n), custom_call_target="SPMDShardToFullShape", sharding={devices=[2,1]<=[2]}
  ROOT e = f32[8,4] exponential(f), sharding={devices=[1,2]<=[2]}
}
)";
  for (uint64_t seed = 0; seed < 30; ++seed) {
    auto m = Parse(text);
    ASSERT_TRUE(m);
    EXPECT_EQ(UnmutableReason(*m), "");
    for (const ShardingMutation& c : MutateShardings(*m, 2, seed)) {
      EXPECT_NE(c.instruction, "s");
      EXPECT_NE(c.instruction, "m");
      EXPECT_NE(c.instruction, "n");
      EXPECT_NE(c.instruction, "f");
      EXPECT_FALSE(c.after.empty()) << "nothing is dropped next to a manual region";
    }
  }
}

TEST(ShardingFuzz, CollectivesOutsideManualRegionsAreNotMutable) {
  auto m = Parse(R"(
HloModule m, num_partitions=2

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  a = f32[4] parameter(0), sharding={replicated}
  ROOT r = f32[4] all-reduce(a), replica_groups={{0,1}}, to_apply=add
}
)");
  ASSERT_TRUE(m);
  EXPECT_NE(UnmutableReason(*m).find("all-reduce"), std::string::npos);
}

TEST(ShardingFuzz, VariantSeedDependsOnAllThree) {
  EXPECT_NE(VariantSeed(1, "a", 0), VariantSeed(2, "a", 0));
  EXPECT_NE(VariantSeed(1, "a", 0), VariantSeed(1, "b", 0));
  EXPECT_NE(VariantSeed(1, "a", 0), VariantSeed(1, "a", 1));
  EXPECT_EQ(VariantSeed(1, "a", 3), VariantSeed(1, "a", 3));
}

// Op-focused variants: the operand, indices and updates of one scatter
// (likewise gathers, dots, ...) each get a partially replicated tiling in a
// transposed multi-way iota order, drawn independently, so that in some
// variants all three differ: the class of the wrong-scatter report (16
// devices, a 3-D transposed iota with a replicated subgroup).
TEST(ShardingFuzz, OpFocusedVariantsShardScatterOperandsDifferently) {
  const char* text = R"(
HloModule s, num_partitions=16
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y)
}
ENTRY e {
  o = f32[12,8] parameter(0)
  i = s32[6,1] parameter(1)
  u = f32[6,8] parameter(2)
  ROOT s = f32[12,8] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})";
  auto structured = [](const Instruction* i) {
    if (!i->has_sharding()) return false;
    const Sharding& s = *i->sharding();
    return s.IsTiled() && s.ReplicateOnLastTileDim() &&
           !s.tile_assignment().HasIdentityPerm() &&
           s.tile_assignment().reshape_dims().size() >= 3;
  };
  int64_t all_three = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    auto m = Parse(text);
    ASSERT_TRUE(m);
    MutateShardings(*m, 16, seed);
    const Instruction* root = m->entry()->root();
    const Instruction *o = root->operand(0), *i = root->operand(1), *u = root->operand(2);
    for (const Instruction* x : {root, o, i, u})
      if (x->has_sharding()) {
        const int64_t rank = x->shape().rank();
        EXPECT_TRUE(x->sharding()->Validate(rank, 16).ok()) << x->sharding()->ToString();
      }
    if (structured(o) && structured(i) && structured(u) && *o->sharding() != *u->sharding())
      ++all_three;
  }
  EXPECT_GE(all_three, 5);
}

}  // namespace
}  // namespace meshsplit
