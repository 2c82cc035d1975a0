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
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace meshsplit {
class Module;  // the compiler's IR (ir/module.h); opaque here
}  // namespace meshsplit

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

// The library's version, "MAJOR.MINOR.PATCH" (`meshsplit --version`).
std::string Version();

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

// --- modules, specs and the pipeline -------------------------------------------

// An element type by its HLO name ("f32", "bf16", "s64", "pred", ...), the
// dims and the row-major bytes of a host tensor with its full (global) shape.
// bf16 values are raw 16-bit words.
struct HostArray {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// A named value of the entry computation: parameter or output.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // empty for a scalar
  std::string dtype;           // HLO name; "tuple" for a tuple parameter
};

// A loaded program. Immutable: every operation below works on its own copy.
class Module {
 public:
  // Entry parameters in parameter order (for ONNX: the graph inputs).
  const std::vector<TensorInfo>& parameters() const { return parameters_; }
  // The arrays the entry returns (tuple elements flattened), named by the
  // ONNX graph outputs when the module has them, else out<i>.
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  // The module header's num_partitions.
  int64_t num_partitions() const;
  // Canonical HLO text (`meshsplit fmt`).
  std::string ToString() const;
  // The file it came from, or the name given to Parse.
  const std::string& source_name() const { return source_name_; }

 private:
  friend struct ModuleAccess;  // src/api
  std::shared_ptr<const meshsplit::Module> module_;
  std::string source_name_;
  std::vector<TensorInfo> parameters_;
  std::vector<TensorInfo> outputs_;
};

// HLO text, or ONNX by the `.onnx` extension; the CLI's load path.
Module Load(const std::string& path);
// HLO text; `name` stands for the file in diagnostics.
Module Parse(const std::string& text, const std::string& name = "<string>");

// A --shard spec (docs/shard_spec.md): a mesh and rules by tensor-name glob,
// the first matching rule wins.
struct ShardRule {
  std::string match;        // glob: * any run, ? one character
  bool replicated = false;  // true: force replication (dims unused)
  PartitionSpec dims;
  bool on_op = false;       // "match_op": constrains computed values by name / op_name
};
struct ShardSpec {
  Mesh mesh;
  std::vector<ShardRule> rules;
  std::vector<std::string> existing_axes;  // see docs/shard_spec.md
  // The spec-file JSON; `name` is used in messages. Throws Error.
  static ShardSpec FromJson(const std::string& text, const std::string& name = "<spec>");
  static ShardSpec Load(const std::string& path);
  std::string ToJson() const;
};

// How the pipeline runs (the CLI's --num-partitions, --no-propagate, --strict).
struct Options {
  int64_t num_partitions = 0;  // 0: the spec's mesh size, else the module's
  bool propagate = true;       // complete the shardings before partitioning
  bool strict = false;         // partitioner fallbacks are errors
};

struct PartitionResult {
  std::string text;  // the SPMD program, as `meshsplit partition` prints it
  int64_t num_partitions = 1;
  std::map<std::string, int64_t> collectives;  // opcode -> instructions
};
// Applies `spec` (may be null when the module carries its own shardings),
// propagates and partitions.
PartitionResult Partition(const Module& module, const ShardSpec* spec, const Options& options = {});

// Runs the program with full-shape inputs (one per parameter, in order): on
// the N virtual devices of the partitioned program when there is more than
// one partition, else on one device. Returns one array per output.
std::vector<HostArray> Run(const Module& module, const std::vector<HostArray>& inputs,
                           const ShardSpec* spec, const Options& options = {});

struct VerifyReport {
  bool ok = false;
  std::string status;   // "ok", "mismatch", or the stage that failed
  std::string message;  // the first mismatching element, or the error
  int64_t num_partitions = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::string first_diverging;  // instruction name, "" when none was found
  std::string divergence_detail;
};
// `meshsplit verify`: N devices against one on seeded random inputs. A
// mismatch is a result, not an exception; bad input throws Error.
VerifyReport Verify(const Module& module, const ShardSpec* spec, uint64_t seed = 0,
                    const Options& options = {});

// `meshsplit report --json`: per-device and unpartitioned costs, every
// collective with its cause (docs/report.md), as that JSON text.
std::string Report(const Module& module, const ShardSpec* spec, const Options& options = {});

struct AutoshardOptions {
  int64_t budget = 300;      // candidates to partition and cost (--budget)
  double time_limit = 50;    // seconds, 0 = none (then the result depends on nothing else)
  uint64_t seed = 0;         // restart perturbations (--seed)
  int64_t memory_limit_bytes = 0;  // peak memory cap per device, 0 = none (--memory-limit)
  std::vector<std::string> existing_axes;  // the axes the module's own shardings are for
};
struct Plan {
  ShardSpec spec;           // the cheapest plan found, for Partition/Run/...
  double cost = 0;          // its estimated seconds per step
  int64_t evaluations = 0;  // candidates costed
};
// `meshsplit autoshard --mesh`: searches mesh_split decisions for the
// module's inputs and weights (docs/autoshard.md).
Plan Autoshard(const Module& module, const Mesh& mesh, const AutoshardOptions& options = {});

}  // namespace meshsplit::api
