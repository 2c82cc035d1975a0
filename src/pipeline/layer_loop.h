// Layer loops: the `while` loops a JAX scan over layers becomes. The body
// reads layer i of stacked per-layer tensors [L, ...] with a dynamic-slice at
// the loop counter and carries the activation from one layer to the next.
// The pipeline pass (pipeline.h) rewrites such loops; this file only finds
// them and names the role of every element of the loop's tuple.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/computation.h"
#include "support/status.h"

namespace meshsplit {

struct LayerLoop {
  Instruction* loop = nullptr;  // the while
  int64_t layers = 0;           // trip count L
  int64_t counter = -1;         // tuple index of the counter (0, 1, ..., L-1)
  int64_t activation = -1;      // tuple index of the carried activation
  // Tuple indices of stacked per-layer tensors: passed through unchanged and
  // read only by dynamic-slices of one layer at the counter.
  std::vector<int64_t> stacked;
  // Tuple indices of values the body reads but never changes (other than
  // the stacked ones).
  std::vector<int64_t> invariant;
  // Tuple indices of stacked per-layer results (a scan's ys, a backward
  // scan's weight gradients): written one layer at a time with
  // dynamic-update-slice at the layer index, read by nothing else.
  std::vector<int64_t> outputs;
  // The layer index is L - 1 - counter (a reverse scan: the backward pass)
  // instead of the counter.
  bool reversed = false;
};

// Reads `loop` (a while) as a layer loop. The error says why it is not one,
// located at the loop: "loop %while.3 carries a value that depends on every
// layer", "loop %while.3 does not count from 0 by 1", ...
StatusOr<LayerLoop> AnalyseLayerLoop(Instruction& loop);

// The whiles of `comp` that read as layer loops, in program order; `why_not`
// collects, for the whiles that do not, the reason.
std::vector<LayerLoop> FindLayerLoops(Computation& comp, std::vector<std::string>* why_not);

}  // namespace meshsplit
