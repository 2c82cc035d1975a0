// The 1f1b schedule (docs/pipeline.md, "1f1b"): a training step's forward
// scan and the backward scan that reads its residuals become ONE loop of
// ticks. At every tick each stage looks up its action in the schedule table
// (schedule.h) through its stage coordinate: the forward of a microbatch,
// the backward of one, or nothing. The last stage computes the loss's
// gradient of a microbatch right after its forward (the ops between the two
// scans, rebatched to one microbatch), so that microbatch's backward can
// start at once, and a stage keeps the residuals of at most S microbatches
// instead of M. The zb-h1 schedule is the same loop with each backward run
// as B (the input's gradient) and a later W (the weights' gradients), from
// the backward body split in two (split_backward.h).
#pragma once

#include "import/pipeline_spec.h"
#include "ir/module.h"
#include "pipeline/layer_loop.h"
#include "pipeline/pipeline.h"
#include "pipeline/stage_sharding.h"
#include "support/status.h"

namespace meshsplit {

// The backward scan of `loops` that reads the residuals (per-layer results)
// of `forward`, or null.
const LayerLoop* BackwardScanOf(const LayerLoop& forward, const std::vector<LayerLoop>& loops);

// Pipelines `forward` and `backward` (a reverse layer loop reading
// `forward`'s per-layer results) as one loop of ticks, as `spec.schedule`
// says (1f1b or zb-h1). Refusals are
// located errors: the ops between the scans combine the whole batch (the
// loss's gradient of one microbatch needs the others), the forward scan's
// residuals are read elsewhere, ...
StatusOr<PipelineSchedule> PipelineOneFOneB(Module& module, const StageShardings& shardings,
                                            const PipelineSpec& spec,
                                            const PipelineRunOptions& run,
                                            const LayerLoop& forward, const LayerLoop& backward);

}  // namespace meshsplit
