// Unit tests for the per-opcode sharding rules: factor roles of dot and
// convolution, dimension maps of transpose/broadcast/reduce, reshape's
// compound factors, and that every opcode in a varied module gets a rule.
#include <gtest/gtest.h>

#include "ir/computation.h"
#include "rules/dot_dims.h"
#include "rules/op_rules.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

class OpRulesTest : public ::testing::Test {
 protected:
  void Load(const std::string& text) {
    auto m = ParseModuleText(text);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    module_ = std::move(*m);
  }
  const Instruction& I(const std::string& name) {
    for (const auto& c : module_->computations())
      if (Instruction* i = c->Find(name)) return *i;
    ADD_FAILURE() << "no " << name;
    return *module_->entry()->root();
  }
  std::unique_ptr<Module> module_;
};

TEST_F(OpRulesTest, DotFactorsHaveRoles) {
  Load(R"(HloModule m
ENTRY e {
  a = f32[4,8,16] parameter(0)
  b = f32[4,16,32] parameter(1)
  ROOT d = f32[4,8,32] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0},
      lhs_contracting_dims={2}, rhs_contracting_dims={1}
})");
  OpShardingRule r = GetOpShardingRule(I("d"));
  EXPECT_EQ(r.kind, RuleKind::kDot);
  DotDims d = GetDotDims(r, &I("d"));
  ASSERT_EQ(d.batch.size(), 1u);
  EXPECT_EQ(d.batch[0].lhs, 0);
  EXPECT_EQ(d.batch[0].rhs, 0);
  EXPECT_EQ(d.batch[0].output, 0);
  ASSERT_EQ(d.contracting.size(), 1u);
  EXPECT_EQ(d.contracting[0].lhs, 2);
  EXPECT_EQ(d.contracting[0].rhs, 1);
  EXPECT_EQ(d.lhs_non_contracting.at(0).output, 1);
  EXPECT_EQ(d.rhs_non_contracting.at(0).output, 2);
  EXPECT_EQ(d.OperandToOutput(0), (std::vector<int64_t>{0, 1, -1}));
  EXPECT_EQ(d.OperandToOutput(1), (std::vector<int64_t>{0, -1, 2}));
  EXPECT_EQ(d.OtherToOperand(0), (std::vector<int64_t>{0, 2, -1}));
}

TEST_F(OpRulesTest, ConvolutionTrivialDimsReadAsDot) {
  Load(R"(HloModule m
ENTRY e {
  lhs = f32[128,1,1,1001] parameter(0)
  rhs = f32[1,1,1024,1001] parameter(1)
  ROOT c = f32[128,1,1,1024] convolution(lhs, rhs),
      window={size=1x1 rhs_reversal=1x1}, dim_labels=b01f_01oi->b01f
})");
  DotDims d = GetDotDims(GetOpShardingRule(I("c")), &I("c"));
  EXPECT_TRUE(d.conv_spatial.empty());
  EXPECT_EQ(d.rhs_non_contracting.size(), 3u);  // o and the two 1-sized dims
  EXPECT_EQ(d.contracting.size(), 1u);
}

TEST_F(OpRulesTest, ConvolutionWindowsAreSpatial) {
  Load(R"(HloModule m
ENTRY e {
  lhs = f32[8,32,32,3] parameter(0)
  rhs = f32[3,3,3,16] parameter(1)
  ROOT c = f32[8,32,32,16] convolution(lhs, rhs),
      window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
})");
  DotDims d = GetDotDims(GetOpShardingRule(I("c")), &I("c"));
  EXPECT_EQ(d.conv_spatial.size(), 2u);
  EXPECT_EQ(d.lhs_non_contracting.size(), 1u);
}

TEST_F(OpRulesTest, DataMovementMaps) {
  Load(R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4,8] parameter(0)
  t = f32[8,4] transpose(p), dimensions={1,0}
  b = f32[3,4,8] broadcast(p), dimensions={1,2}
  z = f32[] constant(0)
  r = f32[8] reduce(p, z), dimensions={0}, to_apply=add
  ROOT rs = f32[2,2,8] reshape(p)
})");
  EXPECT_EQ(FactorDimMapping(GetOpShardingRule(I("t")), 0, -1, 2),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(FactorDimMapping(GetOpShardingRule(I("b")), 0, -1, 2),
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(FactorDimMapping(GetOpShardingRule(I("b")), -1, 0, 3),
            (std::vector<int64_t>{-1, 0, 1}));
  OpShardingRule red = GetOpShardingRule(I("r"));
  EXPECT_EQ(FactorDimMapping(red, 0, -1, 2), (std::vector<int64_t>{-1, 0}));
  EXPECT_EQ(red.factors[0].kind, FactorKind::kReduction);
  EXPECT_EQ(GetOpShardingRule(I("b")).min_aggressiveness, 2);
  OpShardingRule rs = GetOpShardingRule(I("rs"));
  ASSERT_EQ(rs.compound.size(), 2u);
  EXPECT_EQ(rs.compound[0].operand_dims, (std::vector<int64_t>{0}));
  EXPECT_EQ(rs.compound[0].result_dims, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(rs.compound[1].result_dims, (std::vector<int64_t>{2}));
}

// The builder example of op_rules.h is the rule the table gives.
TEST_F(OpRulesTest, BuilderExampleIsTheTransposeRule) {
  Load(R"(HloModule m
ENTRY e {
  p = f32[4,8] parameter(0)
  ROOT t = f32[8,4] transpose(p), dimensions={1,0}
})");
  const OpShardingRule built = RuleBuilder(RuleKind::kFactors, "transpose")
                                   .MinAggressiveness(0)
                                   .Partitioning(Partitionable::kYes)
                                   .AddFactor({1}, 0, 8)
                                   .AddFactor({0}, 1, 4)
                                   .Build();
  const OpShardingRule table = GetOpShardingRule(I("t"));
  EXPECT_EQ(RuleToString(built), RuleToString(table));
  EXPECT_EQ(built.kind, table.kind);
  EXPECT_EQ(built.partitionable, table.partitionable);
  EXPECT_EQ(built.representative, table.representative);
  ASSERT_EQ(built.factors.size(), table.factors.size());
  for (size_t i = 0; i < built.factors.size(); ++i) {
    EXPECT_EQ(built.factors[i].size, table.factors[i].size) << i;
    EXPECT_EQ(built.factors[i].dot_role, table.factors[i].dot_role) << i;
  }
}

TEST_F(OpRulesTest, EveryOpcodeInAModuleHasARule) {
  Load(R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4,8] parameter(0)
  q = s32[4,1] parameter(1)
  n = f32[4,8] negate(p)
  c = f32[4,8] copy(n)
  sl = f32[2,8] slice(c), slice={[0:2], [0:8]}
  zero = f32[] constant(0)
  pd = f32[6,8] pad(sl, zero), padding=1_3x0_0
  g = f32[4,1,8] gather(p, q), offset_dims={1,2}, collapsed_slice_dims={},
      start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}
  cv = c64[4,8] convert(p)
  fft = c64[4,8] fft(cv), fft_type=FFT, fft_length={8}
  ar = f32[4,8] all-reduce(p), to_apply=add
  ROOT t = (f32[6,8], f32[4,1,8], c64[4,8], f32[4,8]) tuple(pd, g, fft, ar)
})");
  for (const auto& c : module_->computations())
    for (const auto& i : c->instructions()) {
      OpShardingRule r = GetOpShardingRule(*i);
      EXPECT_FALSE(r.name.empty()) << i->name();
      EXPECT_FALSE(RuleToString(r).empty());
    }
  EXPECT_EQ(GetOpShardingRule(I("n")).kind, RuleKind::kElementwise);
  EXPECT_EQ(GetOpShardingRule(I("pd")).kind, RuleKind::kSameAsOperand0);
  EXPECT_EQ(GetOpShardingRule(I("g")).kind, RuleKind::kGather);
  // XLA does not partition fft spatially: an explicit rule, not a missing one.
  EXPECT_EQ(GetOpShardingRule(I("fft")).kind, RuleKind::kNotPartitioned);
  EXPECT_EQ(GetOpShardingRule(I("fft")).partitionable, Partitionable::kNo);
  EXPECT_EQ(GetOpShardingRule(I("t")).kind, RuleKind::kTuple);
}

}  // namespace
}  // namespace meshsplit
