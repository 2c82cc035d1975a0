// The backward stage loop split in two, for zero-bubble schedules
// (docs/pipeline.md, "zb-h1"): B computes the gradient of the stage's
// input, which the previous stage waits for; W computes the gradients of
// the stage's weights, which nothing waits for, so a schedule may run it
// later, in what would be a bubble.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/module.h"
#include "pipeline/layer_loop.h"
#include "pipeline/stage_loop.h"
#include "support/status.h"

namespace meshsplit {

struct SplitBackwardLoop {
  // Both loops run over the same tuple: the stage loop's elements, then one
  // stack [n, ...] per value that W reads from B (`saved`), indexed by the
  // loop counter. B writes the stacks and passes the per-layer results
  // (weight gradients) through unchanged; W reads the stacks and writes the
  // per-layer results, passing the activation (the gradient) through.
  StageLoop input_gradient;
  StageLoop weight_gradient;
  std::vector<int64_t> saved;  // tuple indices of the stacks
  // For each stack, whether the value has the activation's shape (its
  // layout over the other mesh axes can then follow the activation's).
  std::vector<bool> activation_shaped;
};

// Splits `sl`, the stage loop of the backward scan `scan` over
// `chunk_layers` layers. What W needs and depends on the incoming gradient
// (the gradients of the layer's inner values) is saved by B; what depends
// only on the residuals and weights W computes again. Errors, located at
// the loop: a value W needs from B is not an array, the counter's update
// reads the gradient.
StatusOr<SplitBackwardLoop> SplitBackward(Module& module, const LayerLoop& scan,
                                          const StageLoop& sl, int64_t chunk_layers);

}  // namespace meshsplit
