// The data behind `meshsplit report` and its JSON document (docs/report.md):
// the module propagated and partitioned, costed per device and
// unpartitioned, each collective with its cause. The command renders it as
// text, JSON or HTML (cli/); the public API returns the JSON.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost/collective_cause.h"
#include "cost/cost_model.h"
#include "cost/machine_profile.h"
#include "ir/module.h"
#include "compiler/compile.h"
#include "partitioner/partitioner.h"
#include "sharding/mesh.h"
#include "support/status.h"

namespace meshsplit {

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
  PipelineReport pipeline;              // the pipelined loops, if any
  // `report --profile`: the rates the step time is estimated with.
  std::optional<MachineProfile> profile;
};

struct ReportOptions {
  std::string file;            // the input's name, as given
  int64_t num_partitions = 0;  // 0: the module's
  // The input's num_partitions as declared in its header, when the load path
  // already set the module's to `num_partitions` (0: the module's). A
  // partitioned input cannot be costed for another count.
  int64_t declared_partitions = 0;
  bool propagate = true;
  // The input is a partitioned program (also detected from the causes the
  // partitioner records).
  bool partitioned = false;
  // The mesh ("data=2,model=4"): --mesh or the spec's; empty: the module
  // frontend attribute meshsplit.mesh, else one axis `all` over the partitions.
  std::string mesh;
  PartitionOptions partition;  // the partitioner's other options
  // Pipeline the layer loops (docs/pipeline.md) before partitioning.
  std::optional<PipelineRequest> pipeline;
};

// Propagates, partitions and costs `module` (loaded and through the
// pipeline's front passes, compiler/compile.h) into `out`.
Status BuildReport(std::unique_ptr<Module> module, const ReportOptions& options, ReportData* out);

// The "pipeline" object of the report: stages, microbatches, schedule,
// ticks, bubble fraction and peak activation bytes over every pipelined loop,
// and per loop its (stage x tick) table.
nlohmann::ordered_json PipelineJson(const PipelineReport& pipeline);

// The `report --json` document.
nlohmann::ordered_json ReportJson(const ReportData& d);

}  // namespace meshsplit
