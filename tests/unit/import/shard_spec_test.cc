// Sharding spec files: schema errors, glob matching, application to
// parameters (sharding set) and constants (Sharding custom-call inserted).
#include <gtest/gtest.h>

#include "import/shard_spec.h"
#include "ir/verifier.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

const char* kModule = R"(HloModule m
ENTRY %main (h.0.mlp.c_fc.weight: f32[8,4], x: f32[2,4]) -> f32[2,8] {
  %h.0.mlp.c_fc.weight = f32[8,4] parameter(0)
  %x = f32[2,4] parameter(1)
  %dot = f32[2,8] dot(%x, %h.0.mlp.c_fc.weight), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %bias = f32[8] constant({1, 2, 3, 4, 5, 6, 7, 8})
  %b = f32[2,8] broadcast(%bias), dimensions={1}
  ROOT %add = f32[2,8] add(%dot, %b)
}
)";

TEST(ShardSpec, Glob) {
  EXPECT_TRUE(GlobMatch("h.*.mlp.c_fc.weight", "h.0.mlp.c_fc.weight"));
  EXPECT_TRUE(GlobMatch("h.?.mlp.*", "h.3.mlp.c_proj.bias"));
  EXPECT_FALSE(GlobMatch("h.?.mlp.*", "h.12.mlp.c_proj.bias"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_FALSE(GlobMatch("idx", "idx2"));
  EXPECT_TRUE(GlobMatch("*weight", "a.weight"));
}

TEST(ShardSpec, SchemaErrors) {
  EXPECT_FALSE(ParseShardSpec("{", "s.json").ok());
  EXPECT_FALSE(ParseShardSpec(R"({"mesh": {"a": 0}})", "s.json").ok());
  EXPECT_FALSE(ParseShardSpec(R"({"rules": [{"dims": [null]}]})", "s.json").ok());
  EXPECT_FALSE(ParseShardSpec(R"({"rules": [{"match": "x"}]})", "s.json").ok());
  EXPECT_FALSE(ParseShardSpec(R"({"mesh": "a=2", "oops": 1})", "s.json").ok());
  auto s = ParseShardSpec(R"({"mesh": {"data": 2, "model": 4},
      "rules": [{"match": "x", "dims": [["data", "model"], null]}]})", "s.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->mesh.ToString(), "data=2,model=4");  // written order kept
  EXPECT_EQ(s->rules[0].dims[0], (std::vector<std::string>{"data", "model"}));
}

TEST(ShardSpec, AppliesToParametersAndConstants) {
  auto m = ParseModuleText(kModule);
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto spec = ParseShardSpec(R"({"mesh": {"data": 2, "model": 4}, "rules": [
      {"match": "h.*.mlp.c_fc.weight", "dims": ["model", null]},
      {"match": "x", "dims": ["data", null]},
      {"match": "bias", "dims": ["model"]},
      {"match": "nothing.*", "replicated": true}]})", "s.json");
  ASSERT_TRUE(spec.ok());
  auto report = ApplyShardSpec(**m, *spec);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->annotated, 3);
  EXPECT_EQ(report->unmatched, (std::vector<std::string>{"nothing.*"}));
  EXPECT_EQ((*m)->num_partitions(), 8);
  Computation* e = (*m)->entry();
  ASSERT_TRUE(e->parameter(0)->has_sharding());
  EXPECT_EQ(e->parameter(0)->sharding()->ToString(),
            "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  Instruction* b = e->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->operand(0)->opcode(), Opcode::kCustomCall);
  EXPECT_EQ(b->operand(0)->attrs().custom_call_target, "Sharding");
  EXPECT_TRUE(VerifyModule(**m).ok());
}

// A "match_op" rule constrains a computed value, by name or by the op_name
// of its metadata; an op of several instructions is constrained only where
// its value leaves it.
TEST(ShardSpec, MatchOpConstrainsComputedValues) {
  auto m = ParseModuleText(R"(HloModule m
ENTRY %main (x: f32[2,4], w: f32[4,8]) -> f32[2,8] {
  %x = f32[2,4] parameter(0)
  %w = f32[4,8] parameter(1)
  %dot = f32[2,8] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="layer/mlp"}
  %neg = f32[2,8] negate(%dot), metadata={op_name="layer/mlp"}
  ROOT %abs = f32[2,8] abs(%neg), metadata={op_name="layer/act"}
}
)");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto spec = ParseShardSpec(R"({"mesh": {"data": 2}, "rules": [
      {"match_op": "*/mlp", "dims": [null, "data"]},
      {"match_op": "abs", "dims": ["data", null]},
      {"match_op": "x", "replicated": true}]})", "s.json");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->rules[0].on_op);
  auto report = ApplyShardSpec(**m, *spec);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->annotated, 2);
  // "x" is a parameter: match_op rules never match those.
  EXPECT_EQ(report->unmatched, (std::vector<std::string>{"x"}));
  Computation* e = (*m)->entry();
  EXPECT_FALSE(e->parameter(0)->has_sharding());
  // Inside the op (dot feeds neg, both layer/mlp): not constrained.
  EXPECT_EQ(e->Find("neg")->operand(0)->name(), "dot");
  Instruction* abs = e->Find("abs");
  ASSERT_EQ(abs->operand(0)->opcode(), Opcode::kCustomCall);
  EXPECT_EQ(abs->operand(0)->operand(0)->name(), "neg");
  EXPECT_EQ(abs->operand(0)->sharding()->ToString(), "{devices=[1,2]<=[2]}");
  Instruction* root = e->root();
  ASSERT_EQ(root->opcode(), Opcode::kCustomCall);
  EXPECT_EQ(root->operand(0), abs);
  EXPECT_EQ(root->sharding()->ToString(), "{devices=[2,1]<=[2]}");
  EXPECT_TRUE(VerifyModule(**m).ok());

  EXPECT_FALSE(ParseShardSpec(R"({"rules": [{"match": "a", "match_op": "b",
      "replicated": true}]})", "s.json").ok());
  EXPECT_FALSE(ParseShardSpec(R"({"rules": [{"match_op": 3, "replicated": true}]})",
                              "s.json").ok());
}

TEST(ShardSpec, UnknownAxisAndRankMismatchAreErrors) {
  auto m = ParseModuleText(kModule);
  ASSERT_TRUE(m.ok());
  auto bad_axis = ParseShardSpec(
      R"({"mesh": {"data": 2}, "rules": [{"match": "zzz", "dims": ["model"]}]})", "s.json");
  ASSERT_TRUE(bad_axis.ok());
  auto r = ApplyShardSpec(**m, *bad_axis);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown mesh axis 'model'"), std::string::npos);
  auto bad_rank = ParseShardSpec(
      R"({"mesh": {"data": 2}, "rules": [{"match": "x", "dims": ["data"]}]})", "s.json");
  ASSERT_TRUE(bad_rank.ok());
  r = ApplyShardSpec(**m, *bad_rank);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has 1 dims but 'x'"), std::string::npos);
}

TEST(ShardSpec, LiftsExistingShardingsOntoTheNamedAxes) {
  auto mesh = Mesh::Parse("data=2,model=4");
  ASSERT_TRUE(mesh.ok());
  auto lift = [&](const char* text, std::vector<std::string> axes) {
    auto s = Sharding::Parse(text);
    EXPECT_TRUE(s.ok()) << text;
    auto out = LiftSharding(*s, *mesh, axes);
    return out.ok() ? out->ToString(false) : "error: " + out.status().message();
  };
  // Old device d is data coordinate d; every model coordinate holds a copy.
  EXPECT_EQ(lift("{devices=[2,1]<=[2]}", {"data"}),
            "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  // On the minor axis the copies are strided over the major one.
  EXPECT_EQ(lift("{devices=[4,1]<=[4]}", {"model"}),
            "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  // An existing replicated subgroup grows by the new axis.
  EXPECT_EQ(lift("{devices=[1,2]0,1}", {"data"}),
            "{devices=[1,2,4]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(lift("{maximal device=1}", {"data"}), "{maximal device=4}");
  EXPECT_EQ(lift("{replicated}", {"data"}), "{replicated}");
  EXPECT_EQ(lift("{{devices=[2]<=[2]}, {replicated}}", {"data"}),
            "{{devices=[2,4]<=[8] last_tile_dim_replicate}, {replicated}}");
  // Devices beyond the existing axes are an error, not a silent wrap.
  EXPECT_EQ(lift("{devices=[4]<=[4]}", {"data"}).rfind("error: ", 0), 0u);
}

TEST(ShardSpec, AliasedOutputsFollowTheirParameters) {
  auto m = ParseModuleText(R"(HloModule m, input_output_alias={ {0}: (0, {}, may-alias) }, num_partitions=2
ENTRY %main (w: f32[8,4], x: f32[2,4]) -> (f32[8,4], f32[2,4]) {
  %w = f32[8,4] parameter(0), sharding={replicated}
  %x = f32[2,4] parameter(1), sharding={devices=[2,1]<=[2]}
  %w2 = f32[8,4] add(%w, %w)
  %out = f32[8,4] reshape(%w2), sharding={replicated}
  ROOT %t = (f32[8,4], f32[2,4]) tuple(%out, %x), sharding={{replicated}, {devices=[2,1]<=[2]}}
}
)");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto spec = ParseShardSpec(R"({"mesh": {"data": 2, "model": 2}, "existing_axes": ["data"],
      "rules": [{"match": "w", "dims": ["model", null]}]})", "s.json");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto report = ApplyShardSpec(**m, *spec);
  ASSERT_TRUE(report.ok()) << report.status().message();
  Computation* e = (*m)->entry();
  const std::string w = "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}";
  EXPECT_EQ(e->parameter(0)->sharding()->ToString(false), w);
  EXPECT_EQ(e->parameter(1)->sharding()->ToString(false),
            "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  EXPECT_EQ(e->root()->sharding()->ToString(false),
            "{" + w + ", {devices=[2,1,2]<=[4] last_tile_dim_replicate}}");
  EXPECT_EQ(e->root()->operand(0)->sharding()->ToString(false), w);
}

TEST(ShardSpec, AliasNumbersTooLargeForInt64AreSkipped) {
  // No output or parameter can have such a number; before, std::stoll threw.
  auto m = ParseModuleText(R"(HloModule m, input_output_alias={ {0}: (99999999999999999999, {}, may-alias), {99999999999999999999}: (0, {}, may-alias) }, num_partitions=2
ENTRY %main (w: f32[8,4]) -> (f32[8,4]) {
  %w = f32[8,4] parameter(0), sharding={replicated}
  %out = f32[8,4] add(%w, %w), sharding={replicated}
  ROOT %t = (f32[8,4]) tuple(%out), sharding={{replicated}}
}
)");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto spec = ParseShardSpec(R"({"mesh": {"data": 2}, "rules": [{"match": "w", "dims": ["data", null]}]})",
                             "s.json");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto report = ApplyShardSpec(**m, *spec);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ((*m)->entry()->parameter(0)->sharding()->ToString(false), "{devices=[2,1]<=[2]}");
}

}  // namespace
}  // namespace meshsplit
