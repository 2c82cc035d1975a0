// Batch-norm expansion computes what the interpreter's fused batch-norm ops
// compute (training statistics, inference, gradients), keeps names and
// shardings, and leaves a module that verifies.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/verifier.h"
#include "runtime/run_module.h"
#include "text/parser.h"
#include "text/printer.h"
#include "transforms/batch_norm_expander.h"

namespace meshsplit {
namespace {

// Feature dim 1 of x (NCHW); all three ops, outputs flattened into a tuple.
const char* kModule = R"(HloModule bn
ENTRY %main (x: f32[3,4,5,2], scale: f32[4], offset: f32[4], dy: f32[3,4,5,2], m: f32[4], v: f32[4]) -> (f32[3,4,5,2], f32[4], f32[4], f32[3,4,5,2], f32[3,4,5,2], f32[4], f32[4]) {
  %x = f32[3,4,5,2] parameter(0)
  %scale = f32[4] parameter(1)
  %offset = f32[4] parameter(2)
  %dy = f32[3,4,5,2] parameter(3)
  %m = f32[4] parameter(4)
  %v = f32[4] parameter(5)
  %bn = (f32[3,4,5,2], f32[4], f32[4]) batch-norm-training(%x, %scale, %offset), epsilon=0.001, feature_index=1, sharding={{devices=[3,1,1,1]<=[3]}, {replicated}, {replicated}}
  %y = f32[3,4,5,2] get-tuple-element(%bn), index=0
  %mean = f32[4] get-tuple-element(%bn), index=1
  %var = f32[4] get-tuple-element(%bn), index=2
  %inf = f32[3,4,5,2] batch-norm-inference(%x, %scale, %offset, %m, %v), epsilon=0.01, feature_index=1
  %grad = (f32[3,4,5,2], f32[4], f32[4]) batch-norm-grad(%x, %scale, %mean, %var, %dy), epsilon=0.001, feature_index=1
  %dx = f32[3,4,5,2] get-tuple-element(%grad), index=0
  %dscale = f32[4] get-tuple-element(%grad), index=1
  %doffset = f32[4] get-tuple-element(%grad), index=2
  ROOT %t = (f32[3,4,5,2], f32[4], f32[4], f32[3,4,5,2], f32[3,4,5,2], f32[4], f32[4]) tuple(%y, %mean, %var, %inf, %dx, %dscale, %doffset)
}
)";

std::vector<Literal> RandomInputs(const Computation& entry, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2, 2);
  std::vector<Literal> inputs;
  for (const Instruction* p : entry.parameters()) {
    Literal l(p->shape());
    for (int64_t i = 0; i < l.element_count(); ++i) l.SetDouble(i, dist(rng));
    if (p->name() == "v")  // a variance must be positive
      for (int64_t i = 0; i < l.element_count(); ++i) l.SetDouble(i, std::fabs(l.GetDouble(i)));
    inputs.push_back(std::move(l));
  }
  return inputs;
}

TEST(BatchNormExpander, MatchesTheFusedOps) {
  auto fused = ParseModuleText(kModule);
  auto expanded = ParseModuleText(kModule);
  ASSERT_TRUE(fused.ok() && expanded.ok());
  auto n = ExpandBatchNorm(**expanded);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 3);
  ASSERT_TRUE(VerifyModule(**expanded).ok()) << VerifyModule(**expanded).message();
  for (const auto& c : (*expanded)->computations())
    for (const auto& i : c->instructions()) {
      EXPECT_NE(i->opcode(), Opcode::kBatchNormTraining);
      EXPECT_NE(i->opcode(), Opcode::kBatchNormGrad);
      EXPECT_NE(i->opcode(), Opcode::kBatchNormInference);
    }
  // The replacement keeps the name and the sharding of the fused op.
  const Instruction* bn = (*expanded)->entry()->Find("bn");
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->opcode(), Opcode::kTuple);
  ASSERT_TRUE(bn->has_sharding());
  EXPECT_EQ(bn->sharding()->ToString(false),
            "{{devices=[3,1,1,1]<=[3]}, {replicated}, {replicated}}");

  for (uint32_t seed : {1u, 2u, 3u}) {
    auto want = RunEntry(**fused, RandomInputs(*(*fused)->entry(), seed));
    auto got = RunEntry(**expanded, RandomInputs(*(*expanded)->entry(), seed));
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_TRUE(got.ok()) << got.status().message();
    std::vector<const Literal*> w = OutputArrays(*want), g = OutputArrays(*got);
    ASSERT_EQ(w.size(), g.size());
    for (size_t o = 0; o < w.size(); ++o)
      for (int64_t i = 0; i < w[o]->element_count(); ++i)
        EXPECT_NEAR(g[o]->GetDouble(i), w[o]->GetDouble(i),
                    1e-4 * (1 + std::fabs(w[o]->GetDouble(i))))
            << "output " << o << " element " << i << " seed " << seed;
  }
}

TEST(BatchNormExpander, ReportsDivisorsAndLeavesOtherModulesAlone) {
  auto m = ParseModuleText(kModule);
  ASSERT_TRUE(m.ok());
  std::vector<BatchNormDivisor> divisors;
  ASSERT_TRUE(ExpandBatchNorm(**m, &divisors).ok());
  ASSERT_EQ(divisors.size(), 3u);
  EXPECT_EQ(divisors[0].constant->literal().GetDouble(0), 30.0);  // 3 * 5 * 2
  EXPECT_EQ(divisors[0].feature_index, 1);

  auto plain = ParseModuleText(R"(HloModule p
ENTRY %e (a: f32[2]) -> f32[2] {
  %a = f32[2] parameter(0)
  ROOT %n = f32[2] negate(%a)
}
)");
  ASSERT_TRUE(plain.ok());
  std::string before = PrintModule(**plain);
  auto n = ExpandBatchNorm(**plain);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(PrintModule(**plain), before);
}

}  // namespace
}  // namespace meshsplit
