// meshsplit's public C++ API: meshes, JAX-style PartitionSpecs and
// NamedShardings, DTensor-style placements. The one header an installed
// package exposes (find_package(meshsplit), target meshsplit::meshsplit);
// the Python module binds exactly these functions. It includes no internal
// header: the types here are plain values, the implementation (src/api/)
// lowers them onto the compiler's own Mesh / mesh_split / Sharding.
//
// Errors are exceptions (meshsplit::api::Error) whose what() is the text the
// CLI prints, "FILE:LINE:COL: error: message" or "error: message".
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace meshsplit::api {

// Bad input: what() is the CLI's diagnostic text.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A sharding that the requested form cannot express (e.g. a dim split over
// mesh axes in non-mesh order has no DTensor placement list).
class ConversionError : public Error {
 public:
  using Error::Error;
};

// A named N-d array of devices, axes major to minor ("data=2,model=4").
class Mesh {
 public:
  Mesh() = default;  // no axes, one device
  // Devices in iota order unless `device_order` (row major over the axes,
  // a permutation of 0..N-1) is given. Throws Error on a bad name or size.
  explicit Mesh(std::vector<std::pair<std::string, int64_t>> axes,
                std::vector<int64_t> device_order = {});
  // "data=2,model=4[,devices=[...]]", as --mesh. Throws Error.
  static Mesh Parse(const std::string& text);

  const std::vector<std::pair<std::string, int64_t>>& axes() const { return axes_; }
  std::vector<std::string> axis_names() const;
  // The device order given (row major over the axes); empty when iota.
  const std::vector<int64_t>& device_order() const { return device_order_; }
  int64_t num_devices() const;
  // Index of the axis called `name`, or -1.
  int64_t AxisIndex(const std::string& name) const;
  // Device ids row major over the axes (O(num_devices)).
  std::vector<int64_t> DeviceIds() const;
  // The --mesh text; Mesh::Parse(m.ToString()) == m.
  std::string ToString() const;
  bool operator==(const Mesh& other) const;
  bool operator!=(const Mesh& other) const { return !(*this == other); }

 private:
  std::vector<std::pair<std::string, int64_t>> axes_;
  std::vector<int64_t> device_order_;  // empty: iota
};

// JAX's PartitionSpec: per tensor dim, the mesh axes (major first) it is
// split over; an empty list is "not split" (None). Dims past the end are
// not split.
struct PartitionSpec {
  std::vector<std::vector<std::string>> dims;
  // Without trailing unsplit dims, so P("data") == P("data", None).
  PartitionSpec Normalized() const;
  // The mesh_split text form, "[data, _, (x,y)]".
  std::string ToString() const;
  bool operator==(const PartitionSpec& o) const { return Normalized().dims == o.Normalized().dims; }
};

// DTensor's placement of a tensor on one mesh axis.
struct Placement {
  enum class Kind { kShard, kReplicate, kPartial };
  Kind kind = Kind::kReplicate;
  int64_t dim = 0;               // kShard: the tensor dim split over the axis
  std::string reduce_op = "sum";  // kPartial: how the partial values combine

  static Placement Shard(int64_t dim) { return {Kind::kShard, dim, "sum"}; }
  static Placement Replicate() { return {Kind::kReplicate, 0, "sum"}; }
  static Placement Partial(std::string op = "sum") { return {Kind::kPartial, 0, std::move(op)}; }
  // "Shard(0)", "Replicate()", "Partial(sum)".
  std::string ToString() const;
  bool operator==(const Placement& o) const;
};

// JAX's NamedSharding: a mesh and a PartitionSpec, plus mesh axes over which
// the value holds partial sums (DTensor's Partial; HLO's unreduced subgroup).
class NamedSharding {
 public:
  // Throws Error on an unknown axis or an axis used twice.
  NamedSharding(Mesh mesh, PartitionSpec spec, std::vector<std::string> partial_axes = {});

  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }
  const std::vector<std::string>& partial_axes() const { return partial_axes_; }

  // The HLO sharding text of this sharding on a tensor of rank `rank`, e.g.
  // "{devices=[2,1,4]<=[8] last_tile_dim_replicate}": the same text a
  // --shard rule with these dims produces. Throws Error when the spec has
  // more dims than `rank`.
  std::string HloSharding(int64_t rank) const;
  // One placement per mesh axis. Throws ConversionError when a dim is split
  // over several axes in non-mesh order (DTensor shards a dim over its axes
  // in mesh order).
  std::vector<Placement> ToPlacements() const;
  // Same mesh, same normalized spec, same set of partial axes.
  bool operator==(const NamedSharding& o) const;

 private:
  Mesh mesh_;
  PartitionSpec spec_;
  std::vector<std::string> partial_axes_;  // mesh order
};

// The NamedSharding of a tensor of rank `ndim` with one placement per mesh
// axis (Shard(d) with d < 0 counts from the end). Throws Error on a wrong
// placement count, a dim out of range, or a reduce op other than "sum".
NamedSharding FromPlacements(const Mesh& mesh, const std::vector<Placement>& placements,
                             int64_t ndim);

// A text grid of which devices hold which tile of a rank-1 or rank-2 tensor
// of `shape` (in the manner of jax.debug.visualize_array_sharding). Throws
// Error for other ranks.
std::string VisualizeSharding(const std::vector<int64_t>& shape, const NamedSharding& sharding);

}  // namespace meshsplit::api
