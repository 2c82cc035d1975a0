// The Shardy attribute reader and the lowering of one sharding: each form
// of the text, and the axis arithmetic (sub-axes, manual axes, device
// orders) against shardings written out by hand.
#include <gtest/gtest.h>

#include "import/shardy_attr.h"
#include "import/shardy_lower.h"

namespace meshsplit::sdy {
namespace {

TensorSharding One(const std::string& text) {
  ParseError e;
  auto s = ParseShardings(text, &e);
  EXPECT_TRUE(s.has_value()) << e.message;
  EXPECT_EQ(s->size(), 1u);
  return (*s)[0];
}

MeshTable Meshes(const std::string& text) {
  ParseError e;
  auto m = ParseMeshes(text, &e);
  EXPECT_TRUE(m.has_value()) << e.message;
  MeshTable out;
  for (auto& [name, mesh] : *m) out[name] = mesh;
  return out;
}

Sharding Expect(const std::string& gspmd) {
  auto s = Sharding::Parse(gspmd);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

TEST(ShardyAttr, ParsesEveryDimForm) {
  TensorSharding s = One(
      R"(#sdy.sharding<@mesh, [{"a", "b":(2)4}p1, {?}, {"c", ?}, {}], replicated={"d"}>)");
  EXPECT_EQ(s.mesh_name, "mesh");
  ASSERT_EQ(s.dims.size(), 4u);
  ASSERT_EQ(s.dims[0].axes.size(), 2u);
  EXPECT_EQ(s.dims[0].axes[1].name, "b");
  EXPECT_EQ(s.dims[0].axes[1].pre_size, 2);
  EXPECT_EQ(*s.dims[0].axes[1].size, 4);
  EXPECT_EQ(*s.dims[0].priority, 1);
  EXPECT_FALSE(s.dims[0].open);
  EXPECT_TRUE(s.dims[1].open);
  EXPECT_TRUE(s.dims[1].axes.empty());
  EXPECT_TRUE(s.dims[2].open);
  EXPECT_EQ(s.dims[2].axes.size(), 1u);
  EXPECT_FALSE(s.dims[3].open);
  ASSERT_EQ(s.replicated.size(), 1u);
  EXPECT_EQ(s.replicated[0].name, "d");
}

TEST(ShardyAttr, ParsesPerValueInlinedMeshesAndManualAxes) {
  ParseError e;
  auto s = ParseShardings(
      R"(#sdy.sharding_per_value<[<@m, []>, <mesh<["c"=4]>, [{"c"}]>, <@"q", [{}]>]>)", &e);
  ASSERT_TRUE(s.has_value()) << e.message;
  ASSERT_EQ(s->size(), 3u);
  EXPECT_TRUE((*s)[0].dims.empty());
  ASSERT_TRUE((*s)[1].inline_mesh.has_value());
  EXPECT_EQ((*s)[1].inline_mesh->axes[0].size, 4);
  EXPECT_EQ((*s)[2].mesh_name, "q");
  auto axes = ParseManualAxes(R"(#sdy<manual_axes{"a", "b"}>)", &e);
  ASSERT_TRUE(axes.has_value());
  EXPECT_EQ(*axes, (std::vector<std::string>{"a", "b"}));
}

TEST(ShardyAttr, ParsesBothMeshForms) {
  MeshTable m = Meshes(
      R"({mesh = #sdy.mesh<["x"=2, "y"=4], device_ids=[7,6,5,4,3,2,1,0]>, )"
      R"(old = "#sdy.mesh<\22a\22=8>", one = #sdy.mesh<[], device_ids=[3]>})");
  EXPECT_EQ(m.at("mesh").num_devices(), 8);
  EXPECT_EQ(m.at("mesh").device_ids[0], 7);
  EXPECT_EQ(m.at("old").axes[0].name, "a");
  EXPECT_EQ(m.at("old").axes[0].size, 8);
  EXPECT_TRUE(m.at("one").IsMaximal());
}

TEST(ShardyAttr, ErrorsSayWhereReadingStopped) {
  ParseError e;
  EXPECT_FALSE(ParseShardings(R"(#sdy.sharding<@mesh, [{"x"} {}]>)", &e).has_value());
  EXPECT_EQ(e.offset, 28u);  // the second "{"
  EXPECT_NE(e.message.find("expected ']'"), std::string::npos) << e.message;
  EXPECT_FALSE(ParseShardings(R"(#sdy.sharding<@mesh, [{"x"}]> trailing)", &e).has_value());
  EXPECT_NE(e.message.find("the end of the sharding"), std::string::npos) << e.message;
}

TEST(ShardyLower, AxesSubAxesAndDeviceOrders) {
  MeshTable m = Meshes(R"({mesh = #sdy.mesh<["x"=4, "y"=2]>, perm = #sdy.mesh<["a"=2, "b"=2], device_ids=[0,2,1,3]>})");
  LowerRequest r;
  r.rank = 2;
  // x on dim 0, y replicated.
  EXPECT_EQ(Lower(One(R"(#sdy.sharding<@mesh, [{"x"}, {}]>)"), m, r)->sharding,
            Expect("{devices=[4,1,2]<=[8] last_tile_dim_replicate}"));
  // (y, x) on dim 1: y major.
  EXPECT_EQ(Lower(One(R"(#sdy.sharding<@mesh, [{}, {"y", "x"}]>)"), m, r)->sharding,
            Expect("{devices=[1,8]<=[4,2]T(1,0)}"));
  // The minor half of x on dim 0, its major half replicated: device d =
  // x0*4 + x1*2 + y holds tile x1 of dim 0 and tile y of dim 1.
  EXPECT_EQ(Lower(One(R"(#sdy.sharding<@mesh, [{"x":(2)2}, {"y"}]>)"), m, r)->sharding,
            Expect("{devices=[2,2,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}"));
  // A non-iota device order is kept.
  EXPECT_EQ(Lower(One(R"(#sdy.sharding<@perm, [{"a"}, {"b"}]>)"), m, r)->sharding,
            Expect("{devices=[2,2]0,2,1,3}"));
  // Open dims without axes are reported; with axes they are not.
  auto open = Lower(One(R"(#sdy.sharding<@mesh, [{?}, {"y", ?}]>)"), m, r);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->open_empty_dims, (std::vector<int64_t>{0}));
}

TEST(ShardyLower, ManualAxesBecomeAManualSubgroup) {
  MeshTable m = Meshes(R"({mesh = #sdy.mesh<["x"=2, "y"=2]>})");
  LowerRequest r;
  r.rank = 2;
  r.manual_axes = {"x"};
  r.drop_from_dims = {"x"};
  // A shard_map's local value, manual over x, y still tiling dim 1.
  EXPECT_EQ(Lower(One(R"(#sdy.sharding<@mesh, [{"x"}, {"y"}]>)"), m, r)->sharding,
            Expect("{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dims={manual}}"));
  // Every axis manual: {manual}.
  r.manual_axes = {"x", "y"};
  r.drop_from_dims = {"x", "y"};
  EXPECT_EQ(Lower(One(R"(#sdy.sharding<@mesh, [{"y"}, {}]>)"), m, r)->sharding,
            Sharding::Manual());
}

TEST(ShardyLower, Refusals) {
  MeshTable m = Meshes(R"({mesh = #sdy.mesh<["x"=4]>})");
  LowerRequest r;
  r.rank = 1;
  auto message = [&](const std::string& text) {
    auto l = Lower(One(text), m, r);
    EXPECT_FALSE(l.ok()) << text;
    return l.ok() ? std::string() : l.status().message();
  };
  EXPECT_NE(message(R"(#sdy.sharding<@mesh, [{"x":(1)3}]>)").find("does not divide"),
            std::string::npos);
  EXPECT_NE(message(R"(#sdy.sharding<@mesh, [{"x":(1)2, "x":(1)4}]>)").find("used twice"),
            std::string::npos);
  EXPECT_NE(message(R"(#sdy.sharding<@mesh, [{}], unreduced={"x"}>)").find("unreduced"),
            std::string::npos);
  EXPECT_NE(message(R"(#sdy.sharding<@nope, [{}]>)").find("unknown mesh @nope"),
            std::string::npos);
}

}  // namespace
}  // namespace meshsplit::sdy
