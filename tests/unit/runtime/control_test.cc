// Interpreter tests for tuples and control flow (while, conditional, call),
// custom-calls, rng, partition/replica ids, single-device collectives,
// batch-norm (NumPy values; the gradient also checked by finite differences
// in NumPy), bf16 dots, and error reporting for unsupported ops.
#include <gtest/gtest.h>

#include "runtime_test_util.h"
#include "support/float16.h"

namespace meshsplit::rttest {
namespace {

TEST(Control, WhileLoopSumsCounter) {
  const char* hlo = R"(HloModule m
cond {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = f32[] get-tuple-element(s), index=1
  fi = f32[] convert(i)
  acc2 = f32[] add(acc, fi)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[]) tuple(i2, acc2)
}
ENTRY e {
  z = s32[] constant(0)
  fz = f32[] constant(0)
  init = (s32[], f32[]) tuple(z, fz)
  w = (s32[], f32[]) while(init), condition=cond, body=body
  ROOT r = f32[] get-tuple-element(w), index=1
})";
  ExpectNear(RunHlo(hlo), {45}, 0);  // 0 + 1 + ... + 9
}

TEST(Control, WhileBodyReadingOneElementTwiceAndWholeTuple) {
  // The body reads element 0 through two get-tuple-elements and also passes
  // the whole state to a call; buffer reuse must not clobber either read.
  const char* hlo = R"(HloModule m
first {
  t = (f32[3], s32[]) parameter(0)
  ROOT x = f32[3] get-tuple-element(t), index=0
}
cond {
  s = (f32[3], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=1
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (f32[3], s32[]) parameter(0)
  a = f32[3] get-tuple-element(s), index=0
  b = f32[3] get-tuple-element(s), index=0
  c = f32[3] call(s), to_apply=first
  i = s32[] get-tuple-element(s), index=1
  ab = f32[3] add(a, b)
  abc = f32[3] add(ab, c)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (f32[3], s32[]) tuple(abc, i2)
}
ENTRY e {
  x = f32[3] parameter(0)
  z = s32[] constant(0)
  init = (f32[3], s32[]) tuple(x, z)
  w = (f32[3], s32[]) while(init), condition=cond, body=body
  ROOT r = f32[3] get-tuple-element(w), index=0
})";
  // Each iteration triples the vector: 3^3 = 27.
  ExpectNear(RunHlo(hlo, {F32({3}, {1, 2, 3})}), {27, 54, 81}, 0);
  // Without the call only get-tuple-elements read the state, two of them the
  // same index: doubling per iteration, 2^3 = 8.
  std::string only_gtes = hlo;
  only_gtes.replace(only_gtes.find("  c = f32[3] call(s), to_apply=first\n"),
                    std::string("  c = f32[3] call(s), to_apply=first\n").size(), "");
  only_gtes.replace(only_gtes.find("add(ab, c)"), std::string("add(ab, c)").size(), "copy(ab)");
  ExpectNear(RunHlo(only_gtes, {F32({3}, {1, 2, 3})}), {8, 16, 24}, 0);
}

const char* kBranches = R"(
plus_one {
  x = f32[] parameter(0)
  one = f32[] constant(1)
  ROOT r = f32[] add(x, one)
}
times_two {
  x = f32[] parameter(0)
  two = f32[] constant(2)
  ROOT r = f32[] multiply(x, two)
}
negate {
  x = f32[] parameter(0)
  ROOT r = f32[] negate(x)
}
)";

TEST(Control, ConditionalOnPred) {
  std::string hlo = std::string("HloModule m\n") + kBranches + R"(
ENTRY e {
  p = pred[] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(p, x, x), true_computation=plus_one, false_computation=times_two
})";
  ExpectNear(RunHlo(hlo, {Make(PrimitiveType::PRED, {}, {1}), F32({}, {5})}), {6}, 0);
  ExpectNear(RunHlo(hlo, {Make(PrimitiveType::PRED, {}, {0}), F32({}, {5})}), {10}, 0);
}

TEST(Control, ConditionalOnIndexOutOfRangeRunsLastBranch) {
  std::string hlo = std::string("HloModule m\n") + kBranches + R"(
ENTRY e {
  i = s32[] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(i, x, x, x), branch_computations={plus_one, times_two, negate}
})";
  ExpectNear(RunHlo(hlo, {S32({}, {1}), F32({}, {5})}), {10}, 0);
  ExpectNear(RunHlo(hlo, {S32({}, {7}), F32({}, {5})}), {-5}, 0);
  ExpectNear(RunHlo(hlo, {S32({}, {-1}), F32({}, {5})}), {-5}, 0);
}

TEST(Control, CallTupleAndOptBarrier) {
  std::string hlo = std::string("HloModule m\n") + kBranches + R"(
ENTRY e {
  x = f32[] parameter(0)
  c = f32[] call(x), to_apply=times_two
  t = (f32[], f32[]) tuple(c, x)
  b = (f32[], f32[]) opt-barrier(t)
  ROOT g = f32[] get-tuple-element(b), index=0
})";
  ExpectNear(RunHlo(hlo, {F32({}, {3})}), {6}, 0);
}

TEST(Control, ShardingCustomCallsAreIdentity) {
  const char* hlo = R"(HloModule m
ENTRY e {
  x = f32[2,2] parameter(0)
  s = f32[2,2] custom-call(x), custom_call_target="Sharding", sharding={devices=[2,1]0,1}
  m = f32[2,2] custom-call(s), custom_call_target="SPMDFullToShardShape", sharding={manual}
  ROOT f = f32[2,2] custom-call(m), custom_call_target="SPMDShardToFullShape", sharding={devices=[2,1]0,1}
})";
  ExpectNear(RunHlo(hlo, {F32({2, 2}, {1, 2, 3, 4})}), {1, 2, 3, 4}, 0);
}

TEST(Control, UnknownCustomCallNamesTarget) {
  Status s = RunStatus(R"(HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT c = f32[2] custom-call(x), custom_call_target="my_kernel"
})",
                       {F32({2}, {1, 2})});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("my_kernel"), std::string::npos) << s.message();
  EXPECT_EQ(s.loc().line, 4);
}

// verify's stand-in for backend kernels: deterministic, a function of every
// operand element, and only when asked for.
TEST(Control, OpaqueCustomCallStubDependsOnEveryOperandElement) {
  const std::string hlo = R"(HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  y = s32[2] parameter(1)
  ROOT c = (f32[4], s32[2]) custom-call(x, y), custom_call_target="my_kernel"
})";
  EvalContext ctx;
  ctx.stub_opaque_custom_calls = true;
  Literal a = RunHlo(hlo, {F32({3}, {1, 2, 3}), S32({2}, {4, 5})}, ctx);
  Literal again = RunHlo(hlo, {F32({3}, {1, 2, 3}), S32({2}, {4, 5})}, ctx);
  ASSERT_TRUE(a.shape().IsTuple());
  EXPECT_TRUE(a.BitwiseEqual(again));
  // Changing any one operand element changes the float result.
  const std::vector<std::vector<double>> xs = {{0, 2, 3}, {1, 0, 3}, {1, 2, 0}};
  for (const std::vector<double>& x : xs) {
    Literal b = RunHlo(hlo, {F32({3}, x), S32({2}, {4, 5})}, ctx);
    EXPECT_NE(Values(a.elements()[0]), Values(b.elements()[0]));
  }
  Literal c = RunHlo(hlo, {F32({3}, {1, 2, 3}), S32({2}, {4, 6})}, ctx);
  EXPECT_NE(Values(a.elements()[0]), Values(c.elements()[0]));
  for (double v : Values(a.elements()[0])) EXPECT_LT(std::fabs(v), 1.0);
  // Without the flag the target stays an error.
  EXPECT_FALSE(RunStatus(hlo, {F32({3}, {1, 2, 3}), S32({2}, {4, 5})}).ok());
}

TEST(Control, DeadUnsupportedCodeIsNotEvaluated) {
  const char* hlo = R"(HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  dead = f32[2] custom-call(x), custom_call_target="my_kernel"
  ROOT n = f32[2] negate(x)
})";
  ExpectNear(RunHlo(hlo, {F32({2}, {1, 2})}), {-1, -2}, 0);
}

TEST(Control, UnsupportedOpsNameTheInstruction) {
  Status s = RunStatus(R"(HloModule m
ENTRY e {
  x = f32[3,3] parameter(0)
  ROOT ch = f32[3,3] custom-call(x), custom_call_target="my_backend_op"
})",
                       {F32({3, 3}, {4, 0, 0, 0, 4, 0, 0, 0, 4})});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("my_backend_op"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("%ch"), std::string::npos) << s.message();
}

TEST(Control, ArgumentShapeMismatchNamesParameter) {
  Status s = RunStatus(R"(HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT n = f32[2] negate(x)
})",
                       {F32({3}, {1, 2, 3})});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("%x"), std::string::npos) << s.message();
}

TEST(Rng, UniformIsDeterministicAndInRange) {
  const char* hlo = R"(HloModule m
ENTRY e {
  a = f32[] constant(2)
  b = f32[] constant(3)
  ROOT r = f32[1000] rng(a, b), distribution=rng_uniform
})";
  Literal r1 = RunHlo(hlo), r2 = RunHlo(hlo);
  EXPECT_TRUE(r1.BitwiseEqual(r2));
  double sum = 0;
  for (double v : Values(r1)) {
    EXPECT_GE(v, 2.0);
    EXPECT_LT(v, 3.0);
    sum += v;
  }
  EXPECT_NEAR(sum / 1000, 2.5, 0.05);  // mean of U[2,3), 1000 samples: sd ~0.009
  EvalContext other;
  other.rng_seed = 7;
  EXPECT_FALSE(r1.BitwiseEqual(RunHlo(hlo, {}, other)));
}

TEST(Rng, NormalHasRoughlyRightMoments) {
  const char* hlo = R"(HloModule m
ENTRY e {
  mu = f32[] constant(1)
  sigma = f32[] constant(2)
  ROOT r = f32[4000] rng(mu, sigma), distribution=rng_normal
})";
  std::vector<double> v = Values(RunHlo(hlo));
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  for (double x : v) var += (x - mean) * (x - mean);
  var /= v.size();
  EXPECT_NEAR(mean, 1.0, 0.15);
  EXPECT_NEAR(var, 4.0, 0.5);
}

TEST(Rng, BitGeneratorIsDeterministicAndAdvancesState) {
  const char* hlo = R"(HloModule m
ENTRY e {
  s = u64[2] parameter(0)
  ROOT r = (u64[2], u32[4,4]) rng-bit-generator(s), algorithm=rng_default
})";
  Literal state = Make(PrimitiveType::U64, {2}, {42, 0});
  Literal a = RunHlo(hlo, {state}), b = RunHlo(hlo, {state});
  ASSERT_TRUE(a.shape().IsTuple());
  EXPECT_TRUE(a.BitwiseEqual(b));
  EXPECT_FALSE(a.elements()[0].BitwiseEqual(state));
  // Running again from the new state gives different bits.
  Literal c = RunHlo(hlo, {a.elements()[0]});
  EXPECT_FALSE(c.elements()[1].BitwiseEqual(a.elements()[1]));
}

TEST(Collectives, SingleDeviceSemantics) {
  const char* hlo = R"(HloModule m, num_partitions=1
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[2] parameter(0)
  ar = f32[2] all-reduce(x), replica_groups={{0}}, to_apply=add
  ag = f32[2] all-gather(ar), replica_groups={{0}}, dimensions={0}
  self = f32[2] collective-permute(ag), channel_id=1, source_target_pairs={{0,0}}
  none = f32[2] collective-permute(ag), channel_id=2, source_target_pairs={{1,2}}
  ROOT t = (f32[2], f32[2]) tuple(self, none)
})";
  Literal r = RunHlo(hlo, {F32({2}, {3, 4})});
  ExpectNear(r.elements()[0], {3, 4}, 0);
  ExpectNear(r.elements()[1], {0, 0}, 0);  // nobody sends to device 0: zeros
}

TEST(Collectives, PartitionIdFromContext) {
  const char* hlo = R"(HloModule m
ENTRY e {
  ROOT p = u32[] partition-id()
})";
  EvalContext ctx;
  ctx.partition_id = 3;
  EXPECT_EQ(Ints(RunHlo(hlo, {}, ctx)), (std::vector<int64_t>{3}));
}

TEST(Collectives, AllGatherNeedingPeersIsAnError) {
  Status s = RunStatus(R"(HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT ag = f32[4] all-gather(x), replica_groups={{0,1}}, dimensions={0}
})",
                       {F32({2}, {1, 2})});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("%ag"), std::string::npos) << s.message();
}

TEST(BatchNorm, TrainingInferenceGrad) {
  Literal x = F32({4, 3}, {1, 2, 3, 4, 6, 8, 0, -1, 2, 3, 3, 3});
  Literal scale = F32({3}, {1, 0.5, 2}), offset = F32({3}, {0, 1, -1});
  const char* train = R"(HloModule m
ENTRY e {
  x = f32[4,3] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  ROOT t = (f32[4,3], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
})";
  Literal t = RunHlo(train, {x, scale, offset});
  ExpectNear(t.elements()[0], {-0.6323290788619564, 0.900007999040128, -1.8527253484595563, 1.2646581577239129,
                               1.699944006719104, 2.410901393838225, -1.2646581577239129, 0.30005599328089594,
                               -2.7054506969191126, 0.6323290788619564, 1.099992000959872, -1.8527253484595563});
  ExpectNear(t.elements()[1], {2.0, 2.5, 4.0});
  ExpectNear(t.elements()[2], {2.5, 6.25, 5.5});
  const char* infer = R"(HloModule m
ENTRY e {
  x = f32[4,3] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  m = f32[3] parameter(3)
  v = f32[3] parameter(4)
  ROOT y = f32[4,3] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1
})";
  ExpectNear(RunHlo(infer, {x, scale, offset, F32({3}, {1, 2, 3}), F32({3}, {1, 4, 0.25})}),
             {0.0, 1.0, -1.0, 2.9985011240633197, 1.9998750234326181, 18.96011960139498, -0.9995003746877732,
              0.25009373242553634, -4.992023920278996, 1.9990007493755464, 1.2499687558581545, -1.0});
  const char* grad = R"(HloModule m
ENTRY e {
  x = f32[4,3] parameter(0)
  s = f32[3] parameter(1)
  m = f32[3] parameter(2)
  v = f32[3] parameter(3)
  dy = f32[4,3] parameter(4)
  ROOT g = (f32[4,3], f32[3], f32[3]) batch-norm-grad(x, s, m, v, dy), epsilon=0.001, feature_index=1
})";
  Literal g = RunHlo(grad, {x, scale, F32({3}, {2.0, 2.5, 4.0}), F32({3}, {2.5, 6.25, 5.5}),
                            F32({4, 3}, {1, 0, -1, 2, 1, 0, 0, 0, 1, -1, 2, 3})});
  ExpectNear(g.elements()[0], {0.4425797891035005, -0.13199232057596927, -1.6472821481080875, 0.6956631189478901,
                               -0.07597376556693522, -0.01949285812921095, -0.06333404008593366,
                               -0.024018235392936793, -0.09684423949283906, -1.074908867965457,
                               0.23198432153584128, 1.7636192457301376});
  ExpectNear(g.elements()[1], {1.2646581577239129, 1.7998560172776963, -1.7054506969191126});
  ExpectNear(g.elements()[2], {2.0, 3.0, 3.0});
}

TEST(Dot, Bf16RoundsOnStoreAndMixedResultKeepsPrecision) {
  // 1*1 + 2^-8*1 = 1 + 2^-8: exact in f32, a tie that rounds to 1 in bf16.
  Literal a = Make(PrimitiveType::BF16, {1, 2}, {1, 1.0 / 256});
  Literal b = Make(PrimitiveType::BF16, {2, 1}, {1, 1});
  const char* bf = R"(HloModule m
ENTRY e {
  a = bf16[1,2] parameter(0)
  b = bf16[2,1] parameter(1)
  ROOT d = bf16[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})";
  ExpectNear(RunHlo(bf, {a, b}), {1.0}, 0);
  const char* mixed = R"(HloModule m
ENTRY e {
  a = bf16[1,2] parameter(0)
  b = bf16[2,1] parameter(1)
  ROOT d = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})";
  ExpectNear(RunHlo(mixed, {a, b}), {1.0 + 1.0 / 256}, 0);
}

}  // namespace
}  // namespace meshsplit::rttest
