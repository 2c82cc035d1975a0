// The pipeline pass: GSPMD-style pipeline parallelism inside one SPMD
// program (docs/pipeline.md). A layer loop (layer_loop.h) over L layers
// becomes a loop over ticks; in each tick every stage runs its L/S layers on
// the microbatch it holds, then hands the result to the next stage with a
// collective-permute on the stage axis. The stage axis is manual inside the
// ticks (each device knows its stage and runs its own layers); the other
// axes of the mesh (data, model) stay automatic, so data and tensor
// parallelism compose with the stages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "import/pipeline_spec.h"
#include "ir/module.h"
#include "sharding/mesh.h"
#include "support/status.h"

namespace meshsplit {

struct PipelineRunOptions {
  // Fill the stage buffers with NaN instead of 0, so that anything computed
  // in a bubble tick that reached a result would show (verify sets it).
  bool fill_nan = false;
  // Idle stage-ticks (bubbles) skip their layers through a conditional
  // instead of computing a result that is dropped (off: to measure the gain).
  bool skip_idle = true;
};

// The schedule of one pipelined loop, as the report shows it.
struct PipelineSchedule {
  std::string loop;           // the while that was pipelined
  std::string backward_loop;  // 1f1b: the backward scan run in the same ticks
  std::string schedule;
  int64_t stages = 0, microbatches = 0, repeats = 1, ticks = 0;
  int64_t layers = 0, layers_per_stage = 0;
  // Layers a stage runs per visit of a microbatch: layers_per_stage / repeats
  // (circular: stage s holds chunks s, s + S, s + 2S, ... of this many layers).
  int64_t layers_per_chunk = 0;
  bool backward = false;  // a reverse scan: the stages run from the last to the first
  // One loop of ticks runs a forward scan and the backward scan that reads
  // its residuals (1f1b); `loop` names both.
  bool interleaved = false;
  // 1f1b where every stage runs a forward and a backward slot at every tick
  // (table cells "F3+B1"); the bubble counts idle slots.
  bool paired = false;
  // One row per stage, one entry per tick: "F3" (forward of microbatch 3),
  // "B3" (backward), "F3+B1" (both, paired 1f1b) or "" (idle); with repeats, "F3.1" is microbatch 3 in
  // round 1 (its second trip around the stages).
  std::vector<std::vector<std::string>> table;
  // Idle stage-ticks over all stage-ticks (every action costs the same).
  double bubble_fraction = 0;
  // Bytes of the activations one stage keeps live at once.
  int64_t peak_activation_bytes_per_stage = 0;
  // Microbatches whose per-layer results (residuals) a stage holds at once:
  // M under gpipe and circular, at most S under 1f1b.
  int64_t live_microbatches = 0;
};

struct PipelineReport {
  std::vector<PipelineSchedule> loops;
};

// Pipelines the layer loops of `module`'s entry over `mesh` as `spec` says.
// Refusals are located errors and leave the module unchanged: "no layer loop
// found", "layer count 6 is not divisible by 4 stages", "8 microbatches do
// not divide batch 12", ...
StatusOr<PipelineReport> PipelineLayerLoops(Module& module, const Mesh& mesh,
                                            const PipelineSpec& spec,
                                            const PipelineRunOptions& run = {});

// The schedule `spec` gives `layers` layers on the stage axis of `mesh`
// (what the pass would build; the report and the benchmarks read it). Under
// 1f1b the table holds a forward and a backward scan (`backward` unused),
// `paired` when every stage runs both at every tick (schedule.h: the stage
// axis is not the whole mesh).
StatusOr<PipelineSchedule> PlanSchedule(const PipelineSpec& spec, int64_t stages,
                                        int64_t layers, bool backward = false,
                                        bool paired = false);

}  // namespace meshsplit
