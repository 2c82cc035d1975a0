// `meshsplit run --num-partitions N` behind the CLI: full-shape inputs in,
// full-shape result out, the module partitioned on the way (or taken as
// already partitioned) and run on N virtual devices.
#pragma once

#include <cstdint>
#include <string>
#include <memory>
#include <vector>

#include "ir/literal.h"
#include "ir/module.h"
#include "compiler/compile.h"
#include "partitioner/partitioner.h"
#include "runtime/interpreter.h"
#include "support/status.h"

namespace meshsplit {

struct SpmdRunRequest {
  int64_t num_partitions = 1;
  // The module is already an SPMD program (per-partition parameter and
  // result shapes with their shardings). Its global shapes are taken to be
  // tile shape x tile count per dim, so uneven dims cannot be expressed;
  // pass the unpartitioned module instead for those.
  bool already_partitioned = false;
  bool propagate = true;
  std::string backend = "threads";
  // The partitioner's other options (windowed einsum).
  PartitionOptions partition;
  // Pipeline the layer loops first (docs/pipeline.md).
  std::optional<PipelineRequest> pipeline;
  // EvalContext::max_while_iterations on every device (0: no limit).
  int64_t max_while_iterations = kDefaultMaxWhileIterations;
};

// Global shapes of an already partitioned entry: parameters (in order) and
// result, as tile shape x tile count.
std::vector<Shape> GlobalParameterShapes(const Module& partitioned);
Shape GlobalResultShape(const Module& partitioned);

// Runs `module` (partitioning it first unless already partitioned) on
// `request.num_partitions` devices with full inputs; returns the full result.
StatusOr<Literal> RunModuleOnDevices(Module& module, std::vector<Literal> full_inputs,
                                     const SpmdRunRequest& request);

}  // namespace meshsplit

namespace meshsplit {

// A computation whose parameters have the full (global) shapes of
// `partitioned`'s entry parameters and the same names, for reading
// full-shape inputs (runtime/run_module.h ReadEntryInputs).
std::unique_ptr<Computation> GlobalSignature(const Module& partitioned);

}  // namespace meshsplit
