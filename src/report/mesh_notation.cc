// Decoding a sharding back to the mesh_split that would produce it
// (mesh_notation.h). The tiling is read off by stepping one device along each
// mesh axis, then checked on every device: a guess that does not hold
// everywhere falls back to the raw text, never to a wrong label.
#include "report/mesh_notation.h"

#include <algorithm>
#include <numeric>

namespace meshsplit {
namespace {

std::vector<int64_t> Unflatten(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    index[d] = flat % dims[d];
    flat /= dims[d];
  }
  return index;
}

// Every mesh axis of more than one device, for shardings that cover the
// whole mesh with one role (fully manual / unreduced).
std::vector<std::string> AllAxes(const Mesh& mesh) {
  std::vector<std::string> out;
  for (const MeshAxis& a : mesh.axes())
    if (a.size > 1) out.push_back(a.name);
  return out;
}

}  // namespace

std::optional<MeshSplitAxes> DecodeMeshSplit(const Sharding& sharding, const Mesh& mesh,
                                             int64_t rank) {
  MeshSplitAxes out;
  if (rank > 0) out.dims.assign(rank, {});
  if (sharding.IsTuple() || sharding.IsMaximal() || sharding.IsUnknown()) return std::nullopt;
  if (!sharding.IsTiled()) {
    if (sharding.IsManual()) out.manual = AllAxes(mesh);
    else if (sharding.IsUnreduced()) out.unreduced = AllAxes(mesh);
    return out;  // replicated
  }
  const TileAssignment& tiles = sharding.tile_assignment();
  const int64_t n = mesh.num_devices();
  const int64_t data_rank = sharding.TiledDataRank();
  if (tiles.num_devices() != n || (rank >= 0 && rank != data_rank)) return std::nullopt;
  const std::vector<int64_t> mesh_devices = mesh.devices().Devices();
  const std::vector<int64_t> tile_devices = tiles.Devices();
  // Position of each device in the tile assignment (flat, row major).
  std::vector<int64_t> position(n, -1);
  for (int64_t f = 0; f < n; ++f) {
    const int64_t dev = tile_devices[f];
    if (dev < 0 || dev >= n || position[dev] >= 0) return std::nullopt;
    position[dev] = f;
  }
  for (int64_t dev : mesh_devices)
    if (dev < 0 || dev >= n) return std::nullopt;
  auto tile_index = [&](int64_t mesh_flat) {
    return Unflatten(position[mesh_devices[mesh_flat]], tiles.dims());
  };
  std::vector<int64_t> mesh_dims;
  for (const MeshAxis& a : mesh.axes()) mesh_dims.push_back(a.size);
  const int64_t num_axes = mesh.num_axes();
  // One step along axis a from the mesh's first device moves exactly one
  // tile dim (its owner) by the axis' stride, or none (a replicated axis).
  const std::vector<int64_t> origin = tile_index(0);
  std::vector<int64_t> owner(num_axes, -1), stride(num_axes, 0);
  int64_t step = 1;
  for (int64_t a = num_axes - 1; a >= 0; --a) {
    if (mesh_dims[a] > 1) {
      const std::vector<int64_t> moved = tile_index(step);
      for (int64_t j = 0; j < tiles.num_dimensions(); ++j) {
        if (moved[j] == origin[j]) continue;
        if (owner[a] >= 0) return std::nullopt;  // one axis, two tile dims
        owner[a] = j;
        stride[a] = moved[j] - origin[j];
      }
    }
    step *= mesh_dims[a];
  }
  // Which tile dims are subgroups, and of which role.
  auto role = [&](int64_t j) -> int {  // 0 data, 1 manual, 2 unreduced, 3 replicated
    if (j < data_rank) return 0;
    switch (sharding.subgroup_types()[j - data_rank]) {
      case SubgroupType::kManual: return 1;
      case SubgroupType::kUnreduced: return 2;
      default: return 3;
    }
  };
  // Axes replicating the value may sit in the replicated subgroup in any
  // order; every other tile dim must be exactly its axes, major first.
  std::vector<std::vector<int64_t>> axes_of(tiles.num_dimensions());
  for (int64_t a = 0; a < num_axes; ++a)
    if (owner[a] >= 0) axes_of[owner[a]].push_back(a);
  for (int64_t j = 0; j < tiles.num_dimensions(); ++j) {
    if (role(j) == 3) continue;
    auto& axes = axes_of[j];
    std::sort(axes.begin(), axes.end(), [&](int64_t x, int64_t y) { return stride[x] > stride[y]; });
    int64_t expect = 1;
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      if (stride[*it] != expect) return std::nullopt;
      expect *= mesh_dims[*it];
    }
    if (expect != tiles.dim(j)) return std::nullopt;
  }
  // Checked on every device: its tile index along each non-replicated dim is
  // the mixed-radix number of its coordinates on that dim's axes.
  for (int64_t f = 0; f < n; ++f) {
    const std::vector<int64_t> coords = Unflatten(f, mesh_dims);
    const std::vector<int64_t> index = tile_index(f);
    for (int64_t j = 0; j < tiles.num_dimensions(); ++j) {
      if (role(j) == 3) continue;
      int64_t expect = 0;
      for (int64_t a : axes_of[j]) expect += coords[a] * stride[a];
      if (index[j] != expect) return std::nullopt;
    }
  }
  out.dims.assign(data_rank, {});
  for (int64_t j = 0; j < tiles.num_dimensions(); ++j) {
    std::vector<std::string> names;
    for (int64_t a : axes_of[j]) names.push_back(mesh.axes()[a].name);
    switch (role(j)) {
      case 0: out.dims[j] = std::move(names); break;
      case 1: out.manual = std::move(names); break;
      case 2: out.unreduced = std::move(names); break;
      default: break;
    }
  }
  return out;
}

std::string MeshSplitAxesToString(const MeshSplitAxes& axes) {
  auto list = [](const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ",") + n;
    return s;
  };
  std::string out;
  if (!axes.dims.empty()) {
    out = DimsMappingToString(axes.dims);
  } else if (axes.manual.empty() && axes.unreduced.empty()) {
    return "replicated";
  }
  if (!axes.manual.empty()) out += (out.empty() ? "" : " ") + ("manual(" + list(axes.manual) + ")");
  if (!axes.unreduced.empty())
    out += (out.empty() ? "" : " ") + ("unreduced(" + list(axes.unreduced) + ")");
  return out;
}

std::string ShardingLabel(const Sharding& sharding, const Mesh& mesh, int64_t rank) {
  if (auto axes = DecodeMeshSplit(sharding, mesh, rank)) return MeshSplitAxesToString(*axes);
  return sharding.ToString(false);
}

std::string ShardingTextLabel(const std::string& text, const Mesh& mesh) {
  auto s = Sharding::Parse(text);
  if (!s.ok()) return text;
  return ShardingLabel(*s, mesh);
}

}  // namespace meshsplit
