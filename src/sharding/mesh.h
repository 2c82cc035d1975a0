// Mesh and mesh_split: a named N-d arrangement of devices ("data=2,model=4")
// and GSPMD's mesh_split annotation, which maps each tensor dim to mesh axes
// and lowers to an ordinary Sharding (unused axes become partial
// replication). Also the named sharding text form for hand-written HLO,
// `sharding={mesh_split [data, _]}` (see docs/mesh_split.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sharding/sharding.h"
#include "sharding/tile_assignment.h"
#include "support/status.h"

namespace meshsplit {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

class Mesh {
 public:
  Mesh() = default;  // no axes, one device

  // Axes major to minor; devices in iota order unless `device_order` (row
  // major over the axes, a permutation of 0..N-1) is given.
  static StatusOr<Mesh> Create(std::vector<MeshAxis> axes,
                               std::vector<int64_t> device_order = {});
  // "data=2,model=4", optionally in braces and optionally followed by
  // ",devices=[0,2,1,3,...]" (the device order). Whitespace is allowed.
  static StatusOr<Mesh> Parse(std::string_view text);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  int64_t num_axes() const { return static_cast<int64_t>(axes_.size()); }
  int64_t num_devices() const { return devices_.num_devices(); }
  // Index of the axis called `name`, or nullopt.
  std::optional<int64_t> AxisIndex(std::string_view name) const;
  // Device ids as an array with one dim per axis.
  const TileAssignment& devices() const { return devices_; }

  // "data=2,model=4" (plus ",devices=[...]" when not iota); parses back.
  std::string ToString() const;

 private:
  std::vector<MeshAxis> axes_;
  TileAssignment devices_;
};

// mesh_split lowering. `dims_axes[i]` lists the mesh axes (major first) that
// tensor dim i is split over; empty = not split. Axes not used anywhere
// become a replicated subgroup. Errors: unknown axis, axis used twice,
// dims_axes.size() != rank.
StatusOr<Sharding> MeshSplit(const Mesh& mesh,
                             const std::vector<std::vector<std::string>>& dims_axes,
                             int64_t rank);
// The lowering behind MeshSplit (and the Shardy reader, import/shardy_input):
// `devices` holds a mesh's device ids with one dim per axis; tensor dim i is
// split over the axes `dims_axes[i]` (indices into devices' dims, major
// first); the axes in `manual_axes` form a manual subgroup and every other
// axis a replicated one. REQUIRES: each axis index valid and used at most
// once over dims_axes and manual_axes.
Sharding TileOverMeshAxes(const TileAssignment& devices,
                          const std::vector<std::vector<int64_t>>& dims_axes,
                          const std::vector<int64_t>& manual_axes = {});
// One axis (or none) per dim, by name.
StatusOr<Sharding> MeshSplit(const Mesh& mesh,
                             const std::vector<std::optional<std::string>>& dims_mapping,
                             int64_t rank);
// One axis per dim by index, -1 = not split (GSPMD's mesh_split signature).
StatusOr<Sharding> MeshSplit(const Mesh& mesh,
                             const std::vector<int64_t>& dims_mapping,
                             int64_t rank);

// "[data, _, (x,y)]" -> {{"data"}, {}, {"x","y"}}. `_` or `-` = not split.
StatusOr<std::vector<std::vector<std::string>>> ParseDimsMapping(
    std::string_view text);
// Inverse of ParseDimsMapping.
std::string DimsMappingToString(
    const std::vector<std::vector<std::string>>& dims_axes);

// Parses a sharding attribute (with outer braces) that may use the named
// form `{mesh_split [data, _]}` at the top level or as tuple elements, e.g.
// `{{mesh_split [data, _]}, {replicated}}`; other forms go to
// Sharding::Parse. The rank comes from the mapping's length (the caller
// validates it against the shape with Sharding::Validate).
StatusOr<Sharding> ParseNamedSharding(std::string_view text, const Mesh& mesh);
// True if `text` uses the named form (so the caller needs a mesh).
bool IsNamedShardingText(std::string_view text);

}  // namespace meshsplit
