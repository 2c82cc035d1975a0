// Schedule tables of the pipeline pass (docs/pipeline.md, "Schedules").
// GPipe and circular run a training step's forward and backward scans as
// two loops of ticks, so their tables follow from a formula (PlanSchedule in
// pipeline.h). 1F1B runs both in one loop: each stage alternates one
// forward and one backward microbatch once its pipeline is full, so it holds
// the residuals of at most S microbatches instead of M. Its table is found
// by simulating the stages tick by tick. Zero-bubble H1 splits each
// backward into B (the input's gradient, which the previous stage waits
// for) and W (the weights' gradients, which nobody waits for) and runs the
// W's where 1F1B would idle.
#pragma once

#include <cstdint>
#include <vector>

namespace meshsplit {

// A forward-and-backward schedule: which microbatch every stage runs forward
// and backward at every tick (-1: none), and how many slots each per-stage
// buffer needs. A buffer holds a microbatch m in slot m % slots; the counts
// are the smallest for which no microbatch's slot is reused while it is
// still needed (checked against the table).
struct InterleavedTable {
  int64_t stages = 0, microbatches = 0, ticks = 0;
  // Paired: a tick may run a forward and a backward on the same stage (both
  // layer loops run on every stage at every tick); else at most one.
  bool paired = false;
  std::vector<std::vector<int64_t>> forward, backward;  // [stage][tick]
  // Zero-bubble: the microbatch whose weight gradients (W) every stage
  // computes at every tick (-1: none); empty when the backward is not split.
  std::vector<std::vector<int64_t>> weight;
  // Residuals: from a microbatch's forward on a stage to its last backward
  // work there (B, or W when the backward is split).
  int64_t residual_slots = 0;
  // Zero-bubble: what B leaves for W (the gradients W reads), from a
  // microbatch's B to its W.
  int64_t weight_slots = 0;
  // Activations received from the previous stage, not yet run forward.
  int64_t forward_slots = 0;
  // Gradients received from the next stage (on the last stage: the loss's
  // gradient it computed after the forward), not yet run backward.
  int64_t backward_slots = 0;
};

// 1F1B (PipeDream-flush). Every action takes one tick and a result reaches
// the neighbouring stage at the end of the tick it was computed in.
// Unpaired (a stage runs one action per tick; its idle ticks skip their
// work): stage s runs at most S - s forward microbatches ahead of its
// backward ones and prefers a backward whenever one is ready; with F and B
// costing the same, 2(M + S - 1) ticks, bubble (S - 1) / (M + S - 1), at
// most S microbatches of residuals per stage.
// Paired (every stage runs both loops at every tick, as on a mesh whose
// other axes put collectives in the layers): each tick runs the forward
// and the backward that are ready; M + 2S - 1 ticks of one forward and one
// backward slot, at most 2(S - s) - 1 microbatches of residuals on stage s.
InterleavedTable PlanOneFOneB(int64_t stages, int64_t microbatches, bool paired = false);

// Zero-bubble H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2024).
// Unpaired: a stage runs a forward when its input is there and it holds
// fewer than S microbatches (forward to W) and fewer than S - s awaiting B,
// else a B that is ready, else its oldest pending W; with F, B and W
// costing the same and M >= S, 3M + S - 1 ticks, bubble (S - 1) / (3M + S
// - 1), at most S microbatches of residuals per stage (1F1B's peak on stage
// 0). Paired: every tick runs the forward, the B and the W that are ready.
InterleavedTable PlanZeroBubbleH1(int64_t stages, int64_t microbatches, bool paired = false);

}  // namespace meshsplit
