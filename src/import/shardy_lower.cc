// Shardy sharding -> Sharding (see shardy_lower.h). Sub-axes are handled by
// refining each mesh axis at the cut points the sharding uses: the axis
// "x"=8 with the sub-axes "x":(1)2 and "x":(4)2 becomes three mesh axes of
// sizes 2, 2, 2 (major to minor), which keeps every device at its place
// (refining a row-major axis is a reshape), and each (sub-)axis names a run
// of them. Then the ordinary mesh lowering applies (sharding/mesh.h).
#include "import/shardy_lower.h"

#include <algorithm>
#include <set>

#include "sharding/mesh.h"
#include "sharding/tile_assignment.h"

namespace meshsplit::sdy {
namespace {

std::string AxisNames(const MeshDecl& mesh) {
  std::string s;
  for (const MeshAxisDecl& a : mesh.axes) s += (s.empty() ? "\"" : ", \"") + a.name + "\"";
  return s.empty() ? "no axes" : s;
}

int64_t AxisIndex(const MeshDecl& mesh, const std::string& name) {
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    if (mesh.axes[i].name == name) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace

Status ValidateMesh(const MeshDecl& mesh) {
  std::set<std::string> names;
  int64_t product = 1;
  for (const MeshAxisDecl& a : mesh.axes) {
    if (!names.insert(a.name).second)
      return Status::Error("mesh axis \"" + a.name + "\" is declared twice");
    product *= a.size;
  }
  if (mesh.device_ids.empty()) return Status::Ok();
  if (mesh.axes.empty()) {
    if (mesh.device_ids.size() != 1 || mesh.device_ids[0] < 0)
      return Status::Error("a mesh without axes takes one device id (a maximal mesh)");
    return Status::Ok();
  }
  if (static_cast<int64_t>(mesh.device_ids.size()) != product)
    return Status::Error("device_ids lists " + std::to_string(mesh.device_ids.size()) +
                         " devices but the axes hold " + std::to_string(product));
  std::vector<int64_t> sorted = mesh.device_ids;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < product; ++i)
    if (sorted[i] != i)
      return Status::Error("device_ids must be a permutation of 0.." + std::to_string(product - 1));
  return Status::Ok();
}

StatusOr<Lowered> Lower(const TensorSharding& s, const MeshTable& meshes,
                        const LowerRequest& request) {
  Lowered out;
  if (s.inline_mesh) {
    MS_RETURN_IF_ERROR(ValidateMesh(*s.inline_mesh));
    out.mesh = &*s.inline_mesh;
  } else {
    auto it = meshes.find(s.mesh_name);
    if (it == meshes.end()) {
      std::string known;
      for (const auto& [name, m] : meshes) known += (known.empty() ? "@" : ", @") + name;
      return Status::Error("unknown mesh @" + s.mesh_name + " (the module's xla.sdy.meshes has " +
                           (known.empty() ? "none" : known) + ")");
    }
    out.mesh = &it->second;
    out.mesh_name = s.mesh_name;
  }
  const MeshDecl& mesh = *out.mesh;
  if (static_cast<int64_t>(s.dims.size()) != request.rank)
    return Status::Error("the sharding has " + std::to_string(s.dims.size()) +
                         " dims but the value has rank " + std::to_string(request.rank));
  if (!s.unreduced.empty())
    return Status::Error("unreduced axes (unreduced={" + s.unreduced[0].ToString() +
                         ", ...}) are not supported");
  bool any_axis = false;
  for (const DimSharding& d : s.dims) any_axis |= !d.axes.empty();
  if (mesh.IsMaximal()) {
    if (any_axis || !request.manual_axes.empty())
      return Status::Error("a sharding on a maximal mesh cannot split dims or be manual");
    out.sharding = Sharding::Maximal(mesh.device_ids[0]);
    return out;
  }

  // Cut points per mesh axis: every sub-axis boundary the sharding uses.
  const int64_t num_axes = static_cast<int64_t>(mesh.axes.size());
  std::vector<std::set<int64_t>> cuts(num_axes);
  for (int64_t a = 0; a < num_axes; ++a) cuts[a] = {1, mesh.axes[a].size};
  std::vector<const AxisRef*> all_refs;
  for (const DimSharding& d : s.dims)
    for (const AxisRef& r : d.axes) all_refs.push_back(&r);
  for (const AxisRef& r : s.replicated) all_refs.push_back(&r);
  for (const AxisRef* r : all_refs) {
    const int64_t a = AxisIndex(mesh, r->name);
    if (a < 0)
      return Status::Error("unknown mesh axis " + r->ToString() + " (the mesh has " +
                           AxisNames(mesh) + ")");
    if (!r->size) continue;
    const int64_t n = mesh.axes[a].size;
    const int64_t pre = r->pre_size, size = *r->size;
    if (pre < 1 || size < 2 || pre * size > n || n % (pre * size) != 0)
      return Status::Error("sub-axis " + r->ToString() + " does not divide axis \"" + r->name +
                           "\" of size " + std::to_string(n) +
                           " (needs pre-size >= 1, size >= 2, pre-size * size dividing it)");
    cuts[a].insert(pre);
    cuts[a].insert(pre * size);
  }
  // The refined axes, and for each mesh axis the index of its first one.
  std::vector<int64_t> refined_sizes, first(num_axes);
  std::vector<std::vector<int64_t>> cut_list(num_axes);
  for (int64_t a = 0; a < num_axes; ++a) {
    first[a] = static_cast<int64_t>(refined_sizes.size());
    cut_list[a].assign(cuts[a].begin(), cuts[a].end());
    for (size_t j = 0; j + 1 < cut_list[a].size(); ++j) {
      if (cut_list[a][j + 1] % cut_list[a][j] != 0)
        return Status::Error("the sub-axes of axis \"" + mesh.axes[a].name +
                             "\" overlap without nesting (boundaries " +
                             std::to_string(cut_list[a][j]) + " and " +
                             std::to_string(cut_list[a][j + 1]) + ")");
      refined_sizes.push_back(cut_list[a][j + 1] / cut_list[a][j]);
    }
  }
  std::vector<bool> used(refined_sizes.size(), false);
  auto refined_of = [&](const AxisRef& r, std::vector<int64_t>* into) -> Status {
    const int64_t a = AxisIndex(mesh, r.name);
    const int64_t lo = r.size ? r.pre_size : 1;
    const int64_t hi = r.size ? r.pre_size * *r.size : mesh.axes[a].size;
    for (size_t j = 0; j + 1 < cut_list[a].size(); ++j) {
      if (cut_list[a][j] < lo || cut_list[a][j + 1] > hi) continue;
      const int64_t f = first[a] + static_cast<int64_t>(j);
      if (used[f]) return Status::Error("mesh axis " + r.ToString() + " is used twice");
      used[f] = true;
      into->push_back(f);
    }
    return Status::Ok();
  };
  auto is_dropped = [&](const AxisRef& r) {
    return std::find(request.drop_from_dims.begin(), request.drop_from_dims.end(), r.name) !=
           request.drop_from_dims.end();
  };

  std::vector<std::vector<int64_t>> dims_axes(s.dims.size());
  std::vector<int64_t> manual;
  for (const std::string& name : request.manual_axes) {
    const int64_t a = AxisIndex(mesh, name);
    if (a < 0)
      return Status::Error("unknown manual axis \"" + name + "\" (the mesh has " +
                           AxisNames(mesh) + ")");
    AxisRef whole;
    whole.name = name;
    for (const AxisRef* r : all_refs)
      if (r->name == name && r->size)
        return Status::Error("manual axis \"" + name + "\" is used as a sub-axis " +
                             r->ToString() + ", which is not supported");
    // A dropped axis the dims name is taken there (in their order).
    bool in_dims = false;
    for (const DimSharding& d : s.dims)
      for (const AxisRef& r : d.axes) in_dims |= r.name == name;
    if (!(in_dims && is_dropped(whole))) MS_RETURN_IF_ERROR(refined_of(whole, &manual));
  }
  for (size_t i = 0; i < s.dims.size(); ++i) {
    bool seen_kept = false;
    for (const AxisRef& r : s.dims[i].axes) {
      if (is_dropped(r)) {
        if (seen_kept)
          return Status::Error("manual axis " + r.ToString() + " of dim " + std::to_string(i) +
                               " must come before the dim's other axes");
        MS_RETURN_IF_ERROR(refined_of(r, &manual));
        continue;
      }
      if (std::find(request.manual_axes.begin(), request.manual_axes.end(), r.name) !=
          request.manual_axes.end())
        return Status::Error("axis " + r.ToString() + " is manual here and cannot split dim " +
                             std::to_string(i));
      seen_kept = true;
      MS_RETURN_IF_ERROR(refined_of(r, &dims_axes[i]));
    }
    if (s.dims[i].open && dims_axes[i].empty()) out.open_empty_dims.push_back(i);
  }
  // Replicated axes need no placement: unused axes replicate anyway. They
  // were checked (names, sub-axis sizes) and must not overlap the others.
  for (const AxisRef& r : s.replicated) {
    std::vector<int64_t> ignored;
    MS_RETURN_IF_ERROR(refined_of(r, &ignored));
  }
  std::vector<int64_t> sizes;
  for (const MeshAxisDecl& a : mesh.axes) sizes.push_back(a.size);
  TileAssignment devices = mesh.device_ids.empty()
                               ? TileAssignment::Iota(sizes)
                               : TileAssignment::FromDevices(sizes, mesh.device_ids);
  devices = devices.Reshape(refined_sizes);
  out.sharding = TileOverMeshAxes(devices, dims_axes, manual);
  return out;
}

}  // namespace meshsplit::sdy
