// The "pipeline" key of a sharding spec (docs/shard_spec.md) and the
// `--pipeline axis=stage,microbatches=8,schedule=gpipe` flag: which mesh axis
// the layers of a scanned model are split over, into how many microbatches
// the batch is cut, and the schedule of the stages (docs/pipeline.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "support/status.h"

namespace meshsplit {

struct PipelineSpec {
  std::string axis;               // the stage axis of the mesh
  int64_t microbatches = 1;
  std::string schedule = "gpipe";  // gpipe | circular | 1f1b | zb-h1
  int64_t repeats = 1;             // circular: layer chunks per device
  std::vector<std::string> loops;  // while names to pipeline; empty = every layer loop
  int64_t batch_dim = 0;           // the batch dim of the loop-carried activation
};

// The schedules the spec may name, in the order docs/pipeline.md lists them.
const std::vector<std::string>& PipelineScheduleNames();

// From the spec's "pipeline" object. Errors name the key.
StatusOr<PipelineSpec> PipelineSpecFromJson(const nlohmann::json& j);

// From "axis=stage,microbatches=8,schedule=1f1b,repeats=2,batch_dim=0,loops=a;b".
StatusOr<PipelineSpec> ParsePipelineFlag(const std::string& text);

}  // namespace meshsplit
