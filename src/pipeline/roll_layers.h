// The roll-layers pass: turns an unrolled stack of identical layers (what a
// PyTorch or ONNX export gives: weights `h.0.*`, `h.1.*`, ...) into the
// layer-loop form of layer_loop.h, a scan over weights stacked `[L, ...]`,
// so that the pipeline pass can split it over stages (docs/pipeline.md,
// "Unrolled models"). It runs before the first propagation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

struct RollLayersReport {
  std::string pattern;         // the weights' names with the layer index as {}: "h.{}.*"
  int64_t layers = 0;          // L
  int64_t weights = 0;         // per-layer weights stacked (one [L, ...] stack each)
  int64_t layer_instructions = 0;  // instructions of one layer, now the loop's body
  std::string loop;            // the while that replaced them
  // A training step's backward pass, rolled into a second (reverse) scan
  // reading the first one's residuals; empty when there is none.
  std::string backward_loop;
  int64_t backward_layer_instructions = 0;
};

// Rolls the layers of `module`'s entry. Layers are found by their weights:
// entry parameters whose names differ only by one decimal index, 0..L-1
// (L >= 2), all of one shape per name. Returns nullopt (module unchanged)
// when there are no such weights. When there are but the layers cannot be
// rolled, the error says where, located at the instruction: "layer 1
// differs from layer 0 at %dot.41: shape f32[768,3072] vs f32[768,768]",
// "layer 0's %add.3 is read outside the layer by %dot.9", ...; the module
// is then unchanged, except after an error in a training step's backward
// roll, which leaves the forward rolled (callers stop at the error).
//
// A training step (the root's first scalar is the loss) rolls twice: the
// loss's ancestors into a forward scan that keeps, as stacked results, the
// values the backward pass reads; the rest (less the optimizer update
// `w - lr * grad`) into a reverse scan writing the weight gradients.
StatusOr<std::optional<RollLayersReport>> RollLayers(Module& module);

}  // namespace meshsplit
