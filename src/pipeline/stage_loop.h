// The loop one pipeline stage runs per tick: the layer loop's body on
// microbatch shapes, over the stage's own L/S layers.
#pragma once

#include <cstdint>
#include <map>

#include "ir/module.h"
#include "pipeline/layer_loop.h"
#include "pipeline/stage_sharding.h"
#include "support/status.h"

namespace meshsplit {

struct StageLoop {
  Computation* body = nullptr;
  Computation* condition = nullptr;
  Shape carried;  // the stage loop's tuple (the layer loop's, rebatched, one chunk of layers)
  // Batch dim of each stacked result (LayerLoop::outputs) on microbatch
  // shapes, or -1 for results that sum over the batch (weight gradients),
  // which the pipeline adds up over microbatches.
  std::map<int64_t, int64_t> output_batch_dims;
  // Batch dim of each value every layer reads unchanged (LayerLoop::invariant)
  // that carries the batch (an attention mask, rotary tables of the
  // positions), by tuple index: each stage reads its microbatch's slice.
  std::map<int64_t, int64_t> invariant_batch_dims;
};

// Builds the stage loop of `scan` over `chunk_layers` consecutive layers (a
// stage's L/S under gpipe, one of its chunks under circular) for
// `microbatches` microbatches in `module` (new computations; the layer loop
// is untouched).
// `batch_dim`: the activation's; `read_batch_dims`: the stacked reads that
// carry the batch (residuals), by tuple index. Errors, located at the loop:
// the body does not run on a microbatch (it spells the batch size), a
// stacked result that neither carries the batch nor sums over it. The
// body's sharding annotations (`Sharding` custom-calls) are given the stage
// axis as a manual subgroup.
StatusOr<StageLoop> BuildStageLoop(Module& module, const LayerLoop& scan,
                                   const StageShardings& shardings, int64_t chunk_layers,
                                   int64_t microbatches, int64_t batch_dim,
                                   const std::map<int64_t, int64_t>& read_batch_dims);

}  // namespace meshsplit
