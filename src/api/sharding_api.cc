// The sharding half of the public API (include/meshsplit/meshsplit.h):
// Mesh, PartitionSpec, NamedSharding and DTensor placements, lowered onto the
// compiler's own Mesh and mesh_split so that a NamedSharding prints exactly
// the HLO sharding a --shard rule with the same dims produces.
#include <algorithm>
#include <map>
#include <set>

#include "api/internal.h"
#include "meshsplit/meshsplit.h"
#include "sharding/mesh.h"
#include "sharding/sharding.h"

namespace meshsplit::api {
namespace {

std::vector<MeshAxis> InternalAxes(const std::vector<std::pair<std::string, int64_t>>& axes) {
  std::vector<MeshAxis> out;
  for (const auto& [name, size] : axes) out.push_back({name, size});
  return out;
}

bool IsIota(const std::vector<int64_t>& order) {
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<int64_t>(i)) return false;
  return true;
}

std::string AxisListText(const Mesh& mesh) {
  std::string s;
  for (const auto& [name, size] : mesh.axes()) s += (s.empty() ? "" : ", ") + name;
  return s.empty() ? "no axes" : s;
}

// "0-3,8,9": device ids with runs of three or more collapsed, so a tile held
// by a large replicated group stays one readable cell.
std::string DeviceListText(const std::vector<int64_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!s.empty()) s += ",";
    if (j >= i + 2) {
      s += std::to_string(ids[i]) + "-" + std::to_string(ids[j]);
      i = j + 1;
    } else {
      s += std::to_string(ids[i]);
      ++i;
    }
  }
  return s;
}

}  // namespace

meshsplit::Mesh ToInternal(const Mesh& mesh) {
  return Unwrap(meshsplit::Mesh::Create(InternalAxes(mesh.axes()), mesh.device_order()));
}

Mesh FromInternal(const meshsplit::Mesh& mesh) {
  std::vector<std::pair<std::string, int64_t>> axes;
  for (const MeshAxis& a : mesh.axes()) axes.emplace_back(a.name, a.size);
  return Mesh(std::move(axes), mesh.devices().Devices());
}

// --- Mesh -------------------------------------------------------------------

Mesh::Mesh(std::vector<std::pair<std::string, int64_t>> axes, std::vector<int64_t> device_order)
    : axes_(std::move(axes)), device_order_(std::move(device_order)) {
  // Validates names, sizes and the permutation; keeps iota orders implicit
  // so that equality does not depend on how the order was spelled.
  Unwrap(meshsplit::Mesh::Create(InternalAxes(axes_), device_order_));
  if (IsIota(device_order_)) device_order_.clear();
}

Mesh Mesh::Parse(const std::string& text) {
  return FromInternal(Unwrap(meshsplit::Mesh::Parse(text)));
}

std::vector<std::string> Mesh::axis_names() const {
  std::vector<std::string> names;
  for (const auto& [name, size] : axes_) names.push_back(name);
  return names;
}

int64_t Mesh::num_devices() const {
  int64_t n = 1;
  for (const auto& [name, size] : axes_) n *= size;
  return n;
}

int64_t Mesh::AxisIndex(const std::string& name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].first == name) return static_cast<int64_t>(i);
  return -1;
}

std::vector<int64_t> Mesh::DeviceIds() const {
  if (!device_order_.empty()) return device_order_;
  std::vector<int64_t> ids(num_devices());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  return ids;
}

std::string Mesh::ToString() const { return ToInternal(*this).ToString(); }

bool Mesh::operator==(const Mesh& other) const {
  return axes_ == other.axes_ && device_order_ == other.device_order_;
}

// --- PartitionSpec and Placement ----------------------------------------------

PartitionSpec PartitionSpec::Normalized() const {
  PartitionSpec p = *this;
  while (!p.dims.empty() && p.dims.back().empty()) p.dims.pop_back();
  return p;
}

std::string PartitionSpec::ToString() const { return DimsMappingToString(dims); }

std::string Placement::ToString() const {
  switch (kind) {
    case Kind::kShard:
      return "Shard(" + std::to_string(dim) + ")";
    case Kind::kReplicate:
      return "Replicate()";
    case Kind::kPartial:
      return "Partial(" + reduce_op + ")";
  }
  return "?";
}

bool Placement::operator==(const Placement& o) const {
  if (kind != o.kind) return false;
  if (kind == Kind::kShard) return dim == o.dim;
  if (kind == Kind::kPartial) return reduce_op == o.reduce_op;
  return true;
}

// --- NamedSharding ------------------------------------------------------------

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec, std::vector<std::string> partial_axes)
    : mesh_(std::move(mesh)), spec_(std::move(spec)) {
  std::set<std::string> in_spec;
  for (const auto& axes : spec_.dims) in_spec.insert(axes.begin(), axes.end());
  std::vector<int64_t> partial;
  for (const std::string& name : partial_axes) {
    int64_t a = mesh_.AxisIndex(name);
    if (a < 0)
      throw Error("error: partial axis '" + name + "' is not a mesh axis (mesh has " +
                  AxisListText(mesh_) + ")");
    if (in_spec.count(name))
      throw Error("error: mesh axis '" + name + "' is both in the partition spec and partial");
    if (std::find(partial.begin(), partial.end(), a) != partial.end())
      throw Error("error: mesh axis '" + name + "' is partial twice");
    partial.push_back(a);
  }
  std::sort(partial.begin(), partial.end());
  for (int64_t a : partial) partial_axes_.push_back(mesh_.axes()[a].first);
  // Unknown and repeated axes in the spec: mesh_split's own messages.
  (void)Lower(*this, static_cast<int64_t>(spec_.dims.size()));
}

meshsplit::Sharding Lower(const NamedSharding& s, int64_t rank) {
  const PartitionSpec& spec = s.spec();
  if (static_cast<int64_t>(spec.dims.size()) > rank)
    throw Error("error: partition spec " + spec.ToString() + " has " +
                std::to_string(spec.dims.size()) + " dims but the tensor has rank " +
                std::to_string(rank));
  std::vector<std::vector<std::string>> dims = spec.dims;
  dims.resize(rank);
  const meshsplit::Mesh mesh = ToInternal(s.mesh());
  // Without partial axes this is the --shard lowering itself (which also
  // checks the spec's axes).
  meshsplit::Sharding split = Unwrap(MeshSplit(mesh, dims, rank));
  if (s.partial_axes().empty()) return split;
  // With them: the same tiles, then one unreduced subgroup over the partial
  // axes, then the replicated subgroup over the rest.
  std::vector<bool> used(mesh.num_axes(), false);
  std::vector<int64_t> perm, tile_dims;
  for (const auto& axes : dims) {
    int64_t tiles = 1;
    for (const std::string& name : axes) {
      int64_t a = *mesh.AxisIndex(name);
      used[a] = true;
      perm.push_back(a);
      tiles *= mesh.axes()[a].size;
    }
    tile_dims.push_back(tiles);
  }
  int64_t unreduced = 1, replicated = 1;
  for (const std::string& name : s.partial_axes()) {
    int64_t a = *mesh.AxisIndex(name);
    used[a] = true;
    perm.push_back(a);
    unreduced *= mesh.axes()[a].size;
  }
  for (int64_t a = 0; a < mesh.num_axes(); ++a)
    if (!used[a]) {
      perm.push_back(a);
      replicated *= mesh.axes()[a].size;
    }
  tile_dims.push_back(unreduced);
  tile_dims.push_back(replicated);
  TileAssignment tiles = mesh.devices().Transpose(perm).Reshape(tile_dims);
  return meshsplit::Sharding::Subgroup(std::move(tiles),
                                       {SubgroupType::kUnreduced, SubgroupType::kReplicated});
}

std::string NamedSharding::HloSharding(int64_t rank) const { return Lower(*this, rank).ToString(); }

std::vector<Placement> NamedSharding::ToPlacements() const {
  std::vector<Placement> out(mesh_.axes().size(), Placement::Replicate());
  for (size_t d = 0; d < spec_.dims.size(); ++d) {
    int64_t prev = -1;
    for (const std::string& name : spec_.dims[d]) {
      int64_t a = mesh_.AxisIndex(name);
      if (a < prev)
        throw ConversionError("error: dim " + std::to_string(d) + " is split over mesh axes " +
                              DimsMappingToString({spec_.dims[d]}) +
                              " in non-mesh order; DTensor placements split a dim over its "
                              "axes in mesh order, so this sharding has no placement list");
      prev = a;
      out[a] = Placement::Shard(static_cast<int64_t>(d));
    }
  }
  for (const std::string& name : partial_axes_) out[mesh_.AxisIndex(name)] = Placement::Partial();
  return out;
}

bool NamedSharding::operator==(const NamedSharding& o) const {
  return mesh_ == o.mesh_ && spec_ == o.spec_ && partial_axes_ == o.partial_axes_;
}

NamedSharding FromPlacements(const Mesh& mesh, const std::vector<Placement>& placements,
                             int64_t ndim) {
  if (placements.size() != mesh.axes().size())
    throw Error("error: " + std::to_string(placements.size()) +
                " placements for a mesh of " + std::to_string(mesh.axes().size()) +
                " axes (" + AxisListText(mesh) + "): one placement per mesh axis");
  if (ndim < 0) throw Error("error: negative tensor rank " + std::to_string(ndim));
  PartitionSpec spec;
  spec.dims.resize(ndim);
  std::vector<std::string> partial;
  for (size_t a = 0; a < placements.size(); ++a) {
    const Placement& p = placements[a];
    const std::string& axis = mesh.axes()[a].first;
    switch (p.kind) {
      case Placement::Kind::kShard: {
        int64_t d = p.dim < 0 ? p.dim + ndim : p.dim;
        if (d < 0 || d >= ndim)
          throw Error("error: " + p.ToString() + " on mesh axis '" + axis +
                      "' is out of range for a tensor of rank " + std::to_string(ndim));
        spec.dims[d].push_back(axis);  // mesh order = DTensor's split order
        break;
      }
      case Placement::Kind::kReplicate:
        break;
      case Placement::Kind::kPartial:
        if (p.reduce_op != "sum")
          throw Error("error: " + p.ToString() + " on mesh axis '" + axis +
                      "': only sum partials have an HLO form (an unreduced subgroup)");
        partial.push_back(axis);
        break;
    }
  }
  return NamedSharding(mesh, std::move(spec), std::move(partial));
}

std::string VisualizeSharding(const std::vector<int64_t>& shape, const NamedSharding& sharding) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank < 1 || rank > 2)
    throw Error("error: visualize_sharding draws rank-1 and rank-2 tensors, not rank " +
                std::to_string(rank));
  for (int64_t n : shape)
    if (n < 0) throw Error("error: negative dim in shape");
  const meshsplit::Sharding s = Lower(sharding, rank);
  const int64_t rows = s.TileDim(0), cols = rank == 2 ? s.TileDim(1) : 1;
  // Devices holding each tile, in device order.
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> holders;
  for (int64_t d = 0; d < sharding.mesh().num_devices(); ++d) {
    std::vector<int64_t> index = s.TileIndexForDevice(d).value_or(std::vector<int64_t>{});
    int64_t r = index.empty() ? 0 : index[0];
    int64_t c = rank == 2 && index.size() > 1 ? index[1] : 0;
    holders[{r, c}].push_back(d);
  }
  std::vector<std::string> labels;
  size_t width = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      labels.push_back(DeviceListText(holders[{r, c}]));
      width = std::max(width, labels.back().size());
    }
  const std::vector<int64_t> tile = s.TileShape(shape);
  std::string rule = "+";
  for (int64_t c = 0; c < cols; ++c) rule += std::string(width + 2, '-') + "+";
  std::string out = "shape (" + std::to_string(shape[0]) +
                    (rank == 2 ? ", " + std::to_string(shape[1]) : std::string(",")) +
                    "), tiles of (" + std::to_string(tile[0]) +
                    (rank == 2 ? ", " + std::to_string(tile[1]) : std::string(",")) + "), " +
                    s.ToString() + "\n" + rule + "\n";
  for (int64_t r = 0; r < rows; ++r) {
    out += "|";
    for (int64_t c = 0; c < cols; ++c) {
      const std::string& l = labels[r * cols + c];
      size_t pad = width - l.size();
      out += " " + std::string(pad / 2, ' ') + l + std::string(pad - pad / 2, ' ') + " |";
    }
    out += "\n" + rule + "\n";
  }
  return out;
}

}  // namespace meshsplit::api
