// The report's mesh_split labels: every mesh_split of a mesh decodes back to
// its own mapping (round trip over all mappings of 2- and 3-axis meshes,
// including a permuted device order), and shardings that are not a
// mesh_split of the mesh (wrong device order, a strided tiling, another
// device count) are not given a label they do not mean.
#include "report/mesh_notation.h"

#include <functional>

#include <gtest/gtest.h>

namespace meshsplit {
namespace {

using Axes = std::vector<std::vector<std::string>>;

Mesh M(std::string_view text) {
  StatusOr<Mesh> m = Mesh::Parse(text);
  EXPECT_TRUE(m.ok()) << text;
  return m.ok() ? *m : Mesh();
}

Sharding S(std::string_view text) {
  StatusOr<Sharding> s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text;
  return s.ok() ? *s : Sharding();
}

// Every way of giving each axis to one of `rank` dims (or none), in every
// order within a dim.
void ForEachMapping(const Mesh& mesh, int64_t rank, const std::function<void(const Axes&)>& f) {
  const int64_t n = mesh.num_axes();
  std::vector<int64_t> perm(n);
  for (int64_t k = 0; k < n; ++k) perm[k] = k;
  do {
    std::vector<int64_t> where(n, 0);
    for (;;) {
      Axes axes(rank);
      for (int64_t k = 0; k < n; ++k)
        if (where[k] < rank) axes[where[k]].push_back(mesh.axes()[perm[k]].name);
      f(axes);
      int64_t k = 0;
      while (k < n && ++where[k] > rank) where[k++] = 0;
      if (k == n) break;
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(MeshNotation, RoundTripsEveryMeshSplit) {
  for (const char* text : {"data=2,model=4", "x=2,y=3,z=2", "a=2,b=2,devices=[0,2,1,3]"}) {
    const Mesh mesh = M(text);
    for (int64_t rank = 1; rank <= 3; ++rank) {
      int64_t checked = 0;
      ForEachMapping(mesh, rank, [&](const Axes& axes) {
        StatusOr<Sharding> s = MeshSplit(mesh, axes, rank);
        ASSERT_TRUE(s.ok());
        auto back = DecodeMeshSplit(*s, mesh, rank);
        ASSERT_TRUE(back.has_value()) << text << " " << DimsMappingToString(axes) << " "
                                      << s->ToString();
        EXPECT_EQ(back->dims, axes) << text << " " << s->ToString();
        EXPECT_TRUE(back->manual.empty() && back->unreduced.empty());
        ++checked;
      });
      EXPECT_GT(checked, rank);
    }
  }
}

TEST(MeshNotation, Labels) {
  const Mesh mesh = M("data=2,model=4");
  EXPECT_EQ(ShardingLabel(S("{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"), mesh),
            "[model, _]");
  EXPECT_EQ(ShardingLabel(S("{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), mesh),
            "[data, _]");
  EXPECT_EQ(ShardingLabel(S("{devices=[1,8]<=[8]}"), mesh), "[_, (data,model)]");
  EXPECT_EQ(ShardingLabel(S("{devices=[1,8]<=[2,4]T(1,0)}"), mesh), "[_, (model,data)]");
  EXPECT_EQ(ShardingLabel(S("{replicated}"), mesh, 2), "[_, _]");
  EXPECT_EQ(ShardingLabel(S("{replicated}"), mesh), "replicated");
  EXPECT_EQ(ShardingLabel(S("{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"), mesh),
            "[data, _] unreduced(model)");
  EXPECT_EQ(ShardingTextLabel("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={unreduced}}", mesh),
            "[_, model] unreduced(data)");
  // Not mesh_splits of this mesh: the raw text stays.
  EXPECT_EQ(ShardingLabel(S("{devices=[2,4]0,1,2,3,5,4,6,7}"), mesh),
            "{devices=[2,4]0,1,2,3,5,4,6,7}");
  EXPECT_EQ(ShardingLabel(S("{devices=[1,8]<=[4,2]T(1,0)}"), mesh), "{devices=[1,8]<=[4,2]T(1,0)}");
  EXPECT_EQ(ShardingLabel(S("{devices=[4,1]<=[4]}"), mesh), "{devices=[4,1]<=[4]}");
  EXPECT_EQ(ShardingLabel(S("{maximal device=3}"), mesh), "{maximal device=3}");
  // Rank mismatch: no label for a rank the value does not have.
  EXPECT_FALSE(DecodeMeshSplit(S("{devices=[2,4]<=[8]}"), mesh, 3).has_value());
  EXPECT_EQ(ShardingTextLabel("not a sharding", mesh), "not a sharding");
}

}  // namespace
}  // namespace meshsplit
