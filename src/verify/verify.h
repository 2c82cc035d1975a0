// Differential verification of the partitioner: run the original module on
// one device and its partitioned form on N virtual devices with the same
// random inputs, assemble the outputs by sharding and compare them. On a
// mismatch, locate the first instruction whose assembled value diverges.
// Backs `meshsplit verify`, the partitioning conformance runner and the
// random differential tests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "ir/literal.h"
#include "ir/module.h"
#include "partitioner/partitioner.h"
#include "runtime/interpreter.h"
#include "support/status.h"

namespace meshsplit {

// Seeded random arguments for `entry`'s parameters: floats uniform in
// [-1, 1], signed integers in [-4, 4], unsigned in [0, 8], pred 50/50.
// Index operands need no special care: the interpreter clamps dynamic-slice
// and gather starts as XLA does, so every value is valid.
std::vector<Literal> RandomInputs(const Computation& entry, uint64_t seed);

// How verify generates the entry arguments it is not given.
//  kUniform: RandomInputs above.
//  kFanIn: as kUniform, except that a float parameter used as weights, i.e.
//    reaching (through transpose / reshape / bitcast / copy / convert) the
//    kernel of a convolution or an operand of a dot, is drawn from
//    N(0, 1/fan_in): fan_in is the number of its elements one output sums
//    over (kernel: all dims but the output feature; dot: the operand's
//    contracting dims), the smallest over its uses, since a training step
//    also contracts the weights the other way in its backward pass. Values
//    of unit scale through every layer keep a deep network well conditioned,
//    where uniform [-1, 1] weights make activations grow or die layer by
//    layer. Roles the module no longer shows (batch-norm scale and offset
//    once the batch-norm ops are expanded, hyperparameters such as a clamp
//    bound) are left uniform: pass them with VerifyOptions::given_inputs.
enum class InputInit { kUniform, kFanIn };

// Entry arguments under `init`, seeded like RandomInputs.
std::vector<Literal> GenerateInputs(const Computation& entry, uint64_t seed, InputInit init);

// For kFanIn: each entry parameter's fan-in as weights (0 when it is not
// used as weights). Exposed for tests and `verify --json`.
std::vector<int64_t> WeightFanIns(const Computation& entry);

// Length of the longest reduction in `module` summed over all reductions
// (dot contracting sizes, reduce / reduce-window / convolution windows,
// all-reduce groups): the K that scales float tolerances.
int64_t ReductionLength(const Module& module);

struct CompareOptions {
  // Float tolerance: |got - ref| <= rtol * |ref| + atol * max(1, max|ref|),
  // with rtol = atol = factor * eps(type) * sqrt(K).
  double factor = 16;
  int64_t reduction_length = 1;
};

struct Comparison {
  bool ok = true;
  double max_abs_error = 0;     // over non-NaN float elements
  double max_rel_error = 0;     // |got - ref| / max(|ref|, 1e-30)
  int64_t mismatches = 0;
  std::string first_mismatch;  // "out0[2,1]: got 3.5, expected 3.25"
};

// Compares two values of the same shape (tuples element-wise; `what` names
// the value in messages, "out0", "%dot"). Integers and pred exactly; floats
// with the tolerance above (complex: real and imaginary parts as floats of
// the component type, with a trailing index 0/1 in messages); NaN must
// appear exactly where the reference has NaN, infinities must match exactly.
Comparison CompareValues(const Literal& ref, const Literal& got, const std::string& what,
                         const CompareOptions& options);

struct VerifyOptions {
  int64_t num_partitions = 2;
  uint64_t seed = 0;
  // Run sharding propagation before partitioning.
  bool propagate = true;
  // Partitioner: fallbacks are errors.
  bool strict = false;
  // Look for the first diverging instruction on a mismatch.
  bool locate_divergence = true;
  // Refuse (status "too-large") modules with an entry value bigger than
  // this, instead of running out of memory.
  int64_t max_value_bytes = int64_t{1} << 30;
  // Skip locating a divergence when keeping every probed value alive at
  // once (original + N partitions) would need more than this.
  int64_t max_probe_bytes = int64_t{2} << 30;
  // Run custom-calls with no interpreter meaning as deterministic stubs
  // (EvalContext::stub_opaque_custom_calls) in both programs. Both see
  // the same operand values wherever the partitioning is right, so the
  // stubs agree exactly when the surrounding program does.
  bool stub_opaque_custom_calls = false;
  // Iterations one execution of a while loop may run in either program
  // (EvalContext::max_while_iterations; 0: no limit).
  int64_t max_while_iterations = kDefaultMaxWhileIterations;
  // How the entry arguments are generated, and the ones the caller gives
  // instead (entry parameter index -> value of the parameter's global
  // shape, e.g. read from .npy files). Given values are not supported for
  // modules that need the N-device reference run (runtime/reference.h).
  InputInit init = InputInit::kUniform;
  // The partitioner's other options (windowed einsum); its num_partitions
  // and strict are the fields above.
  PartitionOptions partition;
  // Pipeline the layer loops first (docs/pipeline.md); the one-device
  // reference is the module before pipelining, and the stage buffers start
  // as NaN (fill_nan) so that no bubble value can reach a result unseen.
  std::optional<PipelineRequest> pipeline;
  std::shared_ptr<const std::map<int64_t, Literal>> given_inputs;
  CompareOptions compare;
};

// The entry arguments verify uses under `options`: generated, then
// overridden by options.given_inputs. Errors on a given value whose shape
// differs from its parameter's.
StatusOr<std::vector<Literal>> VerifyInputs(const Computation& entry,
                                            const VerifyOptions& options);

struct VerifyResult {
  // "ok", "mismatch", or the stage that failed with an error: "propagate",
  // "partition", "reference" (the original on one device), "spmd" (the
  // partitioned program on N devices), "assemble"; "too-large" when a value
  // exceeds VerifyOptions::max_value_bytes; "empty" when the module has no
  // array output (or outfeed) to compare, so nothing was verified.
  std::string status = "ok";
  std::string message;  // error text or the first mismatching element
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t reduction_length = 1;
  // On a mismatch: the first instruction of the original entry (in
  // topological order) whose value, assembled from the instruction of the
  // same name in the partitioned entry by the original's sharding, differs;
  // empty when none could be compared. See docs in verify.cc.
  std::string divergent_instruction;
  std::string divergence_detail;
  // Non-empty when the original needed the N-device reference run
  // (runtime/reference.h): what made it device-dependent.
  std::string reference_reason;
  // A pipelined program whose stages skip their idle ticks (each tick a
  // conditional, docs/pipeline.md) is measured as it runs: the ticks each
  // device ran, the share of device-ticks that took the idle branch (the
  // schedule's bubble, checked by execution), and the share of the
  // devices' time spent idle when every tick lasts as long as its slowest
  // device (thread CPU seconds per tick: what the bubble costs when F and B
  // differ). Zero ticks: not measured.
  int64_t pipeline_ticks = 0;
  double pipeline_idle_ticks = 0;
  double pipeline_idle_time = 0;
  bool ok() const { return status == "ok"; }
};

// The pipeline's ticks as a run traced them (SpmdRunOptions::branch_traces):
// the conditionals the pipeline pass names `stage_idle`, `stage_busy`,
// `stage_forward`, `stage_backward` (and their renamed copies), one per tick
// and device. Zero ticks when there are none, or when the devices did not
// run the same number (not lockstep).
struct PipelineTicks {
  int64_t ticks = 0;      // per device
  double idle_ticks = 0;  // share of device-ticks that ran the idle branch
  // Share of the devices' time spent idle when each tick lasts as long as
  // its slowest device (thread CPU seconds of each branch).
  double idle_time = 0;
};
PipelineTicks MeasurePipelineTicks(const std::vector<std::vector<BranchRun>>& traces);

// The compile pipeline as verify and run use it (compiler/compile.h):
// propagation in place (unless !propagate; strict as given), then the
// partitioner to `num_partitions` with the other options of `partition`
// (windowed einsum), the output checked by the IR verifier. The module's
// own num_partitions is left as it is. `failed_stage` gets the failing pass.
// With `pipeline`, the pipeline pass runs between two propagations and
// `unpipelined` (when given) gets the module as it was before that pass.
StatusOr<std::unique_ptr<Module>> PropagateAndPartition(
    Module& module, int64_t num_partitions, bool propagate, bool strict,
    std::string* failed_stage = nullptr, const PartitionOptions& partition = {},
    const std::optional<PipelineRequest>& pipeline = std::nullopt,
    std::unique_ptr<Module>* unpipelined = nullptr);

// Verifies an already partitioned module against `original` (whose
// shardings describe the partitioned values). Both modules are modified
// temporarily (extra root tuple while locating a divergence) and restored.
VerifyResult VerifyPartitioned(Module& original, Module& partitioned,
                               const VerifyOptions& options);

// The whole pipeline: propagate, partition, run both, compare.
VerifyResult VerifyModule(Module& module, const VerifyOptions& options);

}  // namespace meshsplit
