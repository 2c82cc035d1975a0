// Unit tests of the cost model: FLOP rules per op, trip counts of while
// loops, liveness-based peak memory, collective traffic and mesh axes, and
// the attribution of collectives to original instructions. Every expected
// number is derived by hand in the comment next to it.
#include <gtest/gtest.h>

#include "cost/collective_cause.h"
#include "cost/cost_model.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

std::unique_ptr<Module> Parse(const std::string& text) {
  auto m = ParseModuleText(text);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(*m) : nullptr;
}

const Instruction* Find(const Module& m, const std::string& name) {
  for (const auto& c : m.computations())
    if (const Instruction* i = c->Find(name)) return i;
  return nullptr;
}

TEST(CostModel, DotConvolutionElementwiseReduceFlops) {
  auto m = Parse(R"(
HloModule t
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[3,4,5] parameter(0)
  w = f32[3,5,6] parameter(1)
  d = f32[3,4,6] dot(x, w), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  img = f32[1,8,8,4] parameter(2)
  k = f32[3,3,2,6] parameter(3)
  c = f32[1,6,6,6] convolution(img, k), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=2
  n = f32[3,4,6] negate(d)
  z = f32[] constant(0)
  r = f32[3] reduce(n, z), dimensions={1,2}, to_apply=add
  ROOT t = (f32[1,6,6,6], f32[3]) tuple(c, r)
})");
  ASSERT_NE(m, nullptr);
  // dot: 2 * (3*4*6 outputs) * 5 contracted = 720.
  EXPECT_EQ(InstructionFlops(*Find(*m, "d")), 720);
  // conv: 2 * (6*6*6 outputs) * (3*3 window) * (4/2 input features per group) = 7776.
  EXPECT_EQ(InstructionFlops(*Find(*m, "c")), 7776);
  EXPECT_EQ(InstructionFlops(*Find(*m, "n")), 72);   // one per element
  EXPECT_EQ(InstructionFlops(*Find(*m, "r")), 72);   // one per input element
  EXPECT_EQ(InstructionFlops(*Find(*m, "t")), 0);
  ModuleCost cost = ComputeModuleCost(*m);
  EXPECT_EQ(cost.flops, 720 + 7776 + 72 + 72);
}

constexpr const char* kLoop = R"(
HloModule loop
cond {
  p = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(LIMIT)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(STEP)
  i2 = s32[] add(i, one)
  v = f32[16] get-tuple-element(p), index=1
  v2 = f32[16] multiply(v, v)
  ROOT t = (s32[], f32[16]) tuple(i2, v2)
}
ENTRY e {
  x = f32[16] parameter(0)
  z = s32[] constant(START)
  init = (s32[], f32[16]) tuple(z, x)
  w = (s32[], f32[16]) while(init), condition=cond, body=body
  ROOT out = f32[16] get-tuple-element(w), index=1
})";

std::string LoopText(int start, int limit, int step) {
  std::string s = kLoop;
  auto rep = [&](const std::string& key, int v) {
    s.replace(s.find(key), key.size(), std::to_string(v));
  };
  rep("LIMIT", limit);
  rep("STEP", step);
  rep("START", start);
  return s;
}

TEST(CostModel, WhileTripCountMultipliesBody) {
  auto m = Parse(LoopText(0, 10, 1));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(WhileTripCount(*Find(*m, "w")), 10);
  ModuleCost cost = ComputeModuleCost(*m);
  // Body: add (1) + multiply (16) = 17 per trip, 10 trips; condition:
  // compare (1) per evaluation, 11 evaluations.
  EXPECT_EQ(cost.flops, 10 * 17 + 11 * 1);
  EXPECT_TRUE(cost.notes.empty());

  auto m2 = Parse(LoopText(3, 10, 2));  // i = 3, 5, 7, 9 -> 4 trips
  ASSERT_NE(m2, nullptr);
  EXPECT_EQ(WhileTripCount(*Find(*m2, "w")), 4);
}

TEST(CostModel, PeakMemoryAddsLoopBodyOnce) {
  auto m = Parse(LoopText(0, 10, 1));
  ASSERT_NE(m, nullptr);
  ModuleCost cost = ComputeModuleCost(*m);
  // Body values (its parameter belongs to the caller): `one` 4 dies at i2;
  // at v2 the live ones are i2 4 + v2 64 = 68. Entry: x 64 (parameter) + z 4
  // (kept alive through the init tuple, the while and the root's
  // get-tuple-element, which are views) + the body's 68 at the while = 136,
  // whatever the trip count.
  EXPECT_EQ(cost.peak_memory_bytes, 64 + 4 + 68);
}

TEST(CostModel, UnknownTripCountCountsOnceWithNote) {
  std::string text = LoopText(0, 10, 1);
  // Make the start value a parameter: not derivable.
  text.replace(text.find("z = s32[] constant(0)"), 21, "z = s32[] parameter(1)");
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(WhileTripCount(*Find(*m, "w")), -1);
  ModuleCost cost = ComputeModuleCost(*m);
  EXPECT_EQ(cost.flops, 17 + 2 * 1);
  ASSERT_EQ(cost.notes.size(), 1u);
}

TEST(CostModel, PeakMemoryChain) {
  auto m2 = Parse(R"(
HloModule t
ENTRY e {
  p = f32[100] parameter(0)
  s = f32[] constant(1)
  big = f32[1000] broadcast(s), dimensions={}
  small = f32[10] slice(big), slice={[0:10]}
  e1 = f32[10] exponential(small)
  e2 = f32[10] negate(e1)
  ROOT t = (f32[10], f32[100]) tuple(e2, p)
})");
  ASSERT_NE(m2, nullptr);
  ModuleCost cost = ComputeModuleCost(*m2);
  // p (400) lives throughout. Peak at `small`: p 400 + big 4000 + small 40
  // = 4440 (the constant s died at big, its last use; big is still live at
  // `small`, its last use).
  EXPECT_EQ(cost.peak_memory_bytes, 400 + 4000 + 40);
  EXPECT_EQ(cost.parameter_bytes, 400);
  EXPECT_EQ(cost.output_bytes, 40 + 400);
  ASSERT_FALSE(cost.live_at_peak.empty());
  EXPECT_EQ(cost.live_at_peak[0].name, "big");
}

// The holders at the peak say which are outputs: the report splits the peak
// into parameters, activations and outputs by these flags.
TEST(CostModel, PeakHoldersMarkOutputs) {
  auto m = Parse(R"(
HloModule t
ENTRY e {
  p = f32[100] parameter(0)
  o = f32[100] exponential(p)
  s = f32[] constant(1)
  big = f32[1000] broadcast(s), dimensions={}
  small = f32[10] slice(big), slice={[0:10]}
  ROOT t = (f32[100], f32[10], f32[100]) tuple(o, small, p)
})");
  ASSERT_NE(m, nullptr);
  ModuleCost cost = ComputeModuleCost(*m);
  EXPECT_EQ(cost.peak_memory_bytes, 400 + 400 + 4000 + 40);
  int64_t params = 0, outputs = 0, other = 0;
  for (const MemoryHolder& h : cost.live_at_peak) {
    EXPECT_FALSE(h.is_parameter && h.is_output) << h.name;
    (h.is_parameter ? params : h.is_output ? outputs : other) += h.bytes;
  }
  EXPECT_EQ(params, 400);         // p, returned as is, stays a parameter
  EXPECT_EQ(outputs, 400 + 40);   // o and small
  EXPECT_EQ(other, 4000);         // big
}

TEST(CostModel, CollectiveWireBytesAndMeshAxes) {
  auto m = Parse(R"(
HloModule t, num_partitions=8
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8,16] parameter(0)
  ar = f32[8,16] all-reduce(x), channel_id=1, replica_groups=[2,4]<=[8], use_global_device_ids=true, to_apply=add
  ag = f32[16,16] all-gather(x), channel_id=2, replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}, use_global_device_ids=true
  rs = f32[1,16] reduce-scatter(x), channel_id=3, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true, to_apply=add
  a2a = f32[8,16] all-to-all(x), channel_id=4, replica_groups=[2,4]<=[8], dimensions={0}
  cp = f32[8,16] collective-permute(x), channel_id=5, source_target_pairs={{0,1},{1,0}}
  ROOT t = (f32[8,16], f32[16,16], f32[1,16], f32[8,16], f32[8,16]) tuple(ar, ag, rs, a2a, cp)
})");
  ASSERT_NE(m, nullptr);
  auto mesh = Mesh::Parse("data=2,model=4");
  ASSERT_TRUE(mesh.ok());
  CostOptions opts;
  opts.mesh = &*mesh;
  ModuleCost cost = ComputeModuleCost(*m, opts);
  ASSERT_EQ(cost.collectives.size(), 5u);
  const double x = 8 * 16 * 4;  // 512 bytes
  const auto& ar = cost.collectives[0];
  EXPECT_EQ(ar.group_size, 4);
  EXPECT_DOUBLE_EQ(ar.wire_bytes, 2.0 * 3 / 4 * x);
  EXPECT_EQ(ar.mesh_axes, "model");  // [2,4]<=[8]: rows {0,1,2,3}
  const auto& ag = cost.collectives[1];
  EXPECT_EQ(ag.group_size, 2);
  EXPECT_DOUBLE_EQ(ag.wire_bytes, 1.0 / 2 * 2 * x);  // (n-1)/n * result
  EXPECT_EQ(ag.mesh_axes, "data");   // transposed: {0,4}
  const auto& rs = cost.collectives[2];
  EXPECT_EQ(rs.group_size, 8);
  EXPECT_DOUBLE_EQ(rs.wire_bytes, 7.0 / 8 * x);
  EXPECT_EQ(rs.mesh_axes, "data,model");
  EXPECT_DOUBLE_EQ(cost.collectives[3].wire_bytes, 3.0 / 4 * x);
  EXPECT_DOUBLE_EQ(cost.collectives[4].wire_bytes, x);
  EXPECT_EQ(cost.collectives[4].group_size, 2);  // number of pairs
  EXPECT_EQ(cost.collectives[4].mesh_axes, "model");  // 0 <-> 1 differ in model only
  EXPECT_DOUBLE_EQ(cost.wire_bytes_by_kind["all-reduce"], 768);
  EXPECT_DOUBLE_EQ(cost.wire_bytes_by_axis["model"], 768 + 384 + 512);
}

TEST(CostModel, MeshAxesOfPairs) {
  auto mesh = Mesh::Parse("data=2,model=4");
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ(MeshAxesOfPairs(*mesh, {{0, 4}, {4, 0}}), "data");
  EXPECT_EQ(MeshAxesOfPairs(*mesh, {{0, 1}, {1, 2}, {2, 3}}), "model");
  EXPECT_EQ(MeshAxesOfPairs(*mesh, {{0, 5}}), "data,model");
  EXPECT_EQ(MeshAxesOfPairs(*mesh, {{0, 0}}), "");
  EXPECT_EQ(MeshAxesOfPairs(*mesh, {{0, 9}}), "");  // not a device of the mesh
}

TEST(CostModel, MeshAxesOfGroupRejectsPartialAxes) {
  auto mesh = Mesh::Parse("data=2,model=4");
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ(MeshAxesOfGroup(*mesh, {0, 1, 2, 3}), "model");
  EXPECT_EQ(MeshAxesOfGroup(*mesh, {1, 5}), "data");
  EXPECT_EQ(MeshAxesOfGroup(*mesh, {0, 1}), "");  // half of `model`
}

TEST(CostModel, CollectiveInLoopCountsTrips) {
  std::string text = LoopText(0, 6, 1);
  text.replace(text.find("HloModule loop"), 14, "HloModule loop, num_partitions=2\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}");
  text.replace(text.find("v2 = f32[16] multiply(v, v)"), 27,
               "v2 = f32[16] all-reduce(v), channel_id=1, replica_groups=[1,2]<=[2], use_global_device_ids=true, to_apply=sum");
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  ModuleCost cost = ComputeModuleCost(*m);
  ASSERT_EQ(cost.collectives.size(), 1u);
  EXPECT_EQ(cost.collectives[0].count, 6);
  // 2*(1/2)*64 bytes per execution, 6 executions.
  EXPECT_DOUBLE_EQ(cost.wire_bytes_by_kind["all-reduce"], 6 * 64);
}

TEST(CollectiveCause, PartialSumOfDotNamesTheDot) {
  auto original = Parse(R"(
HloModule t, num_partitions=2
ENTRY e {
  x = f32[4,8] parameter(0), sharding={devices=[1,2]<=[2]}
  w = f32[8,4] parameter(1), sharding={devices=[2,1]<=[2]}
  ROOT d = f32[4,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
})");
  auto partitioned = Parse(R"(
HloModule t, num_partitions=2
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,4] parameter(0)
  w = f32[4,4] parameter(1)
  d = f32[4,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT all-reduce = f32[4,4] all-reduce(d), channel_id=1, replica_groups=[1,2]<=[2], use_global_device_ids=true, to_apply=sum
})");
  ASSERT_NE(original, nullptr);
  ASSERT_NE(partitioned, nullptr);
  CollectiveCauseFinder finder(*original, [](const std::string& n) {
    return n == "d" ? std::string("d") : std::string();
  });
  CollectiveCause c = finder.Find(*partitioned->entry()->root());
  EXPECT_EQ(c.source, "d");
  EXPECT_EQ(c.source_op, "dot");
  EXPECT_EQ(c.to_sharding, "{replicated}");
  EXPECT_NE(c.rule.find("partial sums"), std::string::npos);
  EXPECT_EQ(c.annotation, "d");
  EXPECT_FALSE(c.recorded);
  const std::string text = c.ToString();
  const std::string suffix = "; cause: inferred";
  ASSERT_GE(text.size(), suffix.size());
  EXPECT_EQ(text.substr(text.size() - suffix.size()), suffix);
}

// The partitioner's recorded cause wins over inference: instruction, rule
// and reshard are read back; the moved value is named by its nearest
// original producer (here through a helper pad).
TEST(CollectiveCause, RecordedCauseIsReadBack) {
  auto original = Parse(R"(
HloModule t, num_partitions=2
ENTRY e {
  x = f32[3,8] parameter(0), sharding={devices=[2,1]<=[2]}
  ROOT c = f32[3,8] cosine(x), sharding={replicated}
})");
  auto partitioned = Parse(R"(
HloModule t, num_partitions=2
ENTRY e {
  x = f32[2,8] parameter(0)
  zero = f32[] constant(0)
  pad = f32[2,8] pad(x, zero), padding=0_0x0_0
  all-gather = f32[4,8] all-gather(pad), channel_id=1, replica_groups=[1,2]<=[2], dimensions={0}, use_global_device_ids=true, frontend_attributes={ms_instr="c",ms_op="cosine",ms_rule="cosine: a \"quoted\" rule",ms_reshard="{devices=[2,1]<=[2]} -> {replicated}",ms_value="pad"}
  s = f32[3,8] slice(all-gather), slice={[0:3], [0:8]}
  ROOT c = f32[3,8] cosine(s)
})");
  ASSERT_NE(original, nullptr);
  ASSERT_NE(partitioned, nullptr);
  const Instruction* ag = partitioned->entry()->Find("all-gather");
  ASSERT_NE(ag, nullptr);
  auto attrs = FrontendAttributes(*ag);
  ASSERT_EQ(attrs.size(), 5u);
  EXPECT_EQ(attrs[2].second, "cosine: a \"quoted\" rule");
  CollectiveCauseFinder finder(*original, nullptr);
  CollectiveCause c = finder.Find(*ag);
  EXPECT_TRUE(c.recorded);
  EXPECT_EQ(c.instruction, "c");
  EXPECT_EQ(c.op, "cosine");
  EXPECT_EQ(c.source, "x");
  EXPECT_EQ(c.source_op, "parameter");
  EXPECT_EQ(c.consumer, "c");
  EXPECT_EQ(c.from_sharding, "{devices=[2,1]<=[2]}");
  EXPECT_EQ(c.to_sharding, "{replicated}");
  EXPECT_EQ(c.ToString(),
            "c (cosine): cosine: a \"quoted\" rule; reshard x {devices=[2,1]<=[2]} -> "
            "{replicated}");
}

// An inferred reshard whose source and consumer layouts print alike (the
// partial sums of a scatter-add are not in the original module) does not
// read "X -> X".
TEST(CollectiveCause, InferredNeverSaysXToX) {
  auto original = Parse(R"(
HloModule t, num_partitions=2
ENTRY e {
  x = f32[4] parameter(0), sharding={replicated}
  ROOT n = f32[4] negate(x), sharding={replicated}
})");
  auto partitioned = Parse(R"(
HloModule t, num_partitions=2
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  all-reduce = f32[4] all-reduce(x), channel_id=1, replica_groups=[1,2]<=[2], use_global_device_ids=true, to_apply=sum
  ROOT n = f32[4] negate(all-reduce)
})");
  ASSERT_NE(original, nullptr);
  ASSERT_NE(partitioned, nullptr);
  CollectiveCauseFinder finder(*original, nullptr);
  CollectiveCause c = finder.Find(*partitioned->entry()->Find("all-reduce"));
  EXPECT_FALSE(c.recorded);
  EXPECT_EQ(c.source, "x");
  EXPECT_NE(c.from_sharding, c.to_sharding);
  EXPECT_EQ(c.from_sharding, "partial");
}

}  // namespace
}  // namespace meshsplit
