// What the report's renderings show beyond the raw costs (report.h): memory
// at the peak by kind, wire bytes by mesh axis x collective kind, the
// collectives grouped by (kind, cause), the entry's arrays with their real
// names and mesh_split labels, and numbers in human units. The text, HTML
// and JSON renderings all read these, so they agree.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/shape.h"
#include "report/report.h"
#include "sharding/sharding.h"

namespace meshsplit {

// The buffers live at the point of peak memory, by what they are. They sum
// to peak_memory_bytes.
struct MemoryByKind {
  int64_t parameters = 0;   // entry parameters (live throughout)
  int64_t activations = 0;  // temporaries, and the inside of a call at the peak
  int64_t outputs = 0;      // buffers the entry returns, already computed
  int64_t total() const { return parameters + activations + outputs; }
};
MemoryByKind MemoryAtPeak(const ModuleCost& cost);

// Collectives of one kind with one cause, the cause stated without the
// instruction names (shardings in mesh_split notation), so that the 12
// all-reduces of 12 layers' partial sums are one row.
struct CollectiveGroup {
  std::string kind;
  std::string cause;
  std::string mesh_axes;        // "" unknown; "a | b" when members differ
  std::vector<size_t> members;  // indices into per_device.collectives
  int64_t executions = 0;       // sum of counts
  double wire_bytes = 0;        // sum of wire_bytes x count, per device
};
// Largest wire bytes first (then kind, cause).
std::vector<CollectiveGroup> GroupCollectives(const ReportData& d);

// A cause as its group states it: the rule and the reshard, shardings in
// mesh_split notation over `mesh` (null: as recorded), no instruction names.
std::string CauseClass(const CollectiveCause& cause, const Mesh* mesh);

// wire_bytes x count per (mesh axes, kind); collectives whose groups are not
// whole mesh axes are under "".
std::map<std::string, std::map<std::string, double>> WireBytesByAxisAndKind(const ModuleCost& c);

// An entry parameter or output: its name (an ONNX model's output names, the
// root tuple's operands, else ROOT[k]), global shape and sharding.
struct ArrayView {
  std::string name;
  Shape shape;
  std::optional<Sharding> sharding;
  std::string label;  // mesh_split notation over the report's mesh, else raw text
  bool mesh_split = false;  // label is mesh_split notation
  // When it is: the mesh axes each dim is split over (major first).
  std::vector<std::vector<std::string>> dim_axes;
};
std::vector<ArrayView> EntryParameterViews(const ReportData& d);
std::vector<ArrayView> EntryOutputViews(const ReportData& d);

// The label of a sharding over the report's mesh: mesh_split notation when
// the mesh has names (--mesh, the spec's, or meshsplit.mesh) and the
// sharding decodes, else the sharding's text.
std::string ReportShardingLabel(const ReportData& d, const Sharding& s, int64_t rank = -1);

// "12.00 MiB" (binary units), "1.90 GFLOP" (decimal), "1.5 k".
std::string HumanBytes(double bytes);
std::string HumanFlops(double flops);

}  // namespace meshsplit
