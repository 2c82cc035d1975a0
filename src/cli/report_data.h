// The data behind `meshsplit report` (cmd_report.cc), shared by its text,
// JSON and HTML renderers (report_html.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cost/collective_cause.h"
#include "cost/cost_model.h"
#include "ir/module.h"
#include "sharding/mesh.h"

namespace meshsplit::cli {

struct ReportData {
  std::string file;
  int64_t num_partitions = 1;
  Mesh mesh;              // the mesh given (or a 1-D "devices" mesh)
  bool has_named_mesh = false;
  std::unique_ptr<Module> original;     // after propagation; null when the
                                        // input was partitioned already
  std::unique_ptr<Module> partitioned;
  // The input is a partitioned program (meshsplit partition output): it is
  // costed as is and the unpartitioned costs are unknown.
  bool input_partitioned = false;
  ModuleCost per_device;
  ModuleCost unpartitioned;
  std::vector<CollectiveCause> causes;  // parallel to per_device.collectives
};

// "12.00 MiB": bytes in binary units, for every renderer of the report.
std::string HumanBytes(double b);

// A self-contained HTML page (no network): sharding grids, the collectives
// table, per-device memory bars.
std::string RenderReportHtml(const ReportData& data);

}  // namespace meshsplit::cli
