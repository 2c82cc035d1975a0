// Mesh parsing and mesh_split lowering: the lowered sharding places every
// tensor tile on the devices whose mesh coordinates match.
#include "sharding/mesh.h"

#include <gtest/gtest.h>

namespace meshsplit {
namespace {

using Axes = std::vector<std::vector<std::string>>;

Mesh M(std::string_view text) {
  StatusOr<Mesh> m = Mesh::Parse(text);
  EXPECT_TRUE(m.ok()) << text << ": " << m.status().message();
  return m.ok() ? *m : Mesh();
}

std::string Split(const Mesh& mesh, std::vector<std::vector<std::string>> axes) {
  StatusOr<Sharding> s = MeshSplit(mesh, axes, axes.size());
  return s.ok() ? s->ToString() : "error: " + s.status().message();
}

TEST(Mesh, Parse) {
  Mesh m = M("data=2,model=4");
  ASSERT_EQ(m.num_axes(), 2);
  EXPECT_EQ(m.num_devices(), 8);
  EXPECT_EQ(*m.AxisIndex("model"), 1);
  EXPECT_FALSE(m.AxisIndex("pipe").has_value());
  EXPECT_EQ(m.ToString(), "data=2,model=4");
  EXPECT_EQ(M("{ data = 2 , model = 4 }").ToString(), "data=2,model=4");
  Mesh o = M("x=2,y=2,devices=[0,2,1,3]");
  EXPECT_EQ(o.devices().Devices(), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(M(o.ToString()).devices(), o.devices());
  EXPECT_FALSE(Mesh::Parse("data=2,data=4").ok());
  EXPECT_FALSE(Mesh::Parse("data=0").ok());
  EXPECT_FALSE(Mesh::Parse("data").ok());
  EXPECT_FALSE(Mesh::Parse("2x=4").ok());
  EXPECT_FALSE(Mesh::Parse("x=2,devices=[0,0]").ok());
  EXPECT_FALSE(Mesh::Parse("x=2,devices=[0,1,2]").ok());
}

TEST(MeshSplit, Lowering) {
  Mesh m = M("data=2,model=4");
  EXPECT_EQ(Split(m, {{"data"}, {"model"}}), "{devices=[2,4]<=[8]}");
  EXPECT_EQ(Split(m, {{"model"}, {"data"}}), "{devices=[4,2]<=[2,4]T(1,0)}");
  EXPECT_EQ(Split(m, {{"data"}, {}}),
            "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(Split(m, {{}, {"model"}}),
            "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(Split(m, {{}, {}}), "{replicated}");
  EXPECT_EQ(Split(m, {{"data", "model"}, {}}), "{devices=[8,1]<=[8]}");
  EXPECT_EQ(Split(m, {{"model", "data"}}), "{devices=[8]<=[2,4]T(1,0)}");
  EXPECT_EQ(Split(m, {}), "{replicated}");
  // Index form and optional form agree with the names.
  EXPECT_EQ(MeshSplit(m, std::vector<int64_t>{-1, 0}, 2)->ToString(),
            Split(m, {{}, {"data"}}));
  EXPECT_EQ(MeshSplit(m, std::vector<std::optional<std::string>>{
                             std::nullopt, "model"},
                      2)
                ->ToString(),
            Split(m, {{}, {"model"}}));
}

TEST(MeshSplit, TilesMatchMeshCoordinates) {
  // Device at mesh coordinate (d, m) must hold tile (m, d) for [model, data].
  Mesh m = M("data=2,model=4,devices=[7,6,5,4,3,2,1,0]");
  StatusOr<Sharding> s = MeshSplit(m, Axes{{"model"}, {"data"}}, 2);
  ASSERT_TRUE(s.ok());
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t k = 0; k < 4; ++k) {
      int64_t device = m.devices().DeviceAt({d, k});
      EXPECT_EQ(*s->TileIndexForDevice(device), (std::vector<int64_t>{k, d}));
    }
  // Partial replication: the devices of one replicated group differ only in
  // the unused axis.
  StatusOr<Sharding> p = MeshSplit(m, Axes{{"data"}, {}}, 2);
  ASSERT_TRUE(p.ok());
  DeviceGroups g = p->GroupsAlongDims({2});
  for (const auto& group : g.Expand()) {
    int64_t data = m.devices().IndexOfDevice(group[0])->at(0);
    for (int64_t dev : group)
      EXPECT_EQ(m.devices().IndexOfDevice(dev)->at(0), data);
  }
}

TEST(MeshSplit, Errors) {
  Mesh m = M("data=2,model=4");
  EXPECT_EQ(Split(m, {{"data"}, {"data"}}),
            "error: mesh_split uses mesh axis 'data' more than once");
  EXPECT_EQ(Split(m, {{"pipe"}}),
            "error: mesh_split uses unknown mesh axis 'pipe' (mesh has data, "
            "model)");
  StatusOr<Sharding> r = MeshSplit(m, Axes{{"data"}}, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "mesh_split maps 1 dims but the tensor has rank 2");
  EXPECT_FALSE(MeshSplit(m, std::vector<int64_t>{2}, 1).ok());
}

TEST(NamedSharding, ParseForms) {
  Mesh m = M("data=2,model=4");
  auto N = [&](std::string_view text) -> std::string {
    StatusOr<Sharding> s = ParseNamedSharding(text, m);
    return s.ok() ? s->ToString() : "error: " + s.status().message();
  };
  EXPECT_EQ(N("{mesh_split [data, _]}"),
            "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(N("{mesh_split [(data,model), -]}"), "{devices=[8,1]<=[8]}");
  EXPECT_EQ(N("{mesh_split []}"), "{replicated}");
  EXPECT_EQ(N("{{mesh_split [model]}, {replicated}, /*index=2*/{devices=[2]0,1}}"),
            "{{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}, "
            "{replicated}, {devices=[2]<=[2]}}");
  EXPECT_EQ(N("{mesh_split [data, model] metadata={op_name=\"x\"}}"),
            "{devices=[2,4]<=[8] metadata={op_name=\"x\"}}");
  EXPECT_EQ(N("{devices=[2]0,1}"), "{devices=[2]<=[2]}");
  EXPECT_EQ(N("{mesh_split [data, 2]}").substr(0, 6), "error:");
  EXPECT_EQ(N("{mesh_split data}").substr(0, 6), "error:");
  EXPECT_EQ(N("{mesh_split [data, data]}").substr(0, 6), "error:");
  EXPECT_TRUE(IsNamedShardingText("{mesh_split [a]}"));
  EXPECT_FALSE(IsNamedShardingText("{replicated metadata={op_name=\"mesh_split\"}}"));
  auto d = ParseDimsMapping("[data, _, (x, y)]");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(DimsMappingToString(*d), "[data, _, (x,y)]");
}

}  // namespace
}  // namespace meshsplit
