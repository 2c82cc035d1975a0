// The reference interpreter: evaluates a computation of the IR on one device
// with dense row-major Literals. Dot and convolution go through BLAS
// (cblas_sgemm/dgemm); elementwise ops run typed loops on contiguous buffers.
// bf16/f16 values are computed in f32 and rounded to nearest even on store.
// A partitioned module runs as one interpreter per device, its collectives
// going through EvalContext::collectives.
//
// Semantics follow XLA's HloEvaluator where XLA defines them, notably:
//  - integer x / 0 = -1 (all ones for unsigned), x % 0 = x, INT_MIN / -1 =
//    INT_MIN, INT_MIN % -1 = 0; shifts by >= the bit width give 0 (or the
//    sign fill for shift-right-arithmetic);
//  - convert float -> integer saturates, NaN -> 0;
//  - dynamic-slice / dynamic-update-slice clamp start indices into range,
//    gather clamps its starts, scatter skips out-of-bounds update windows;
//  - conditional with an out-of-range branch index runs the last branch.
// cholesky, triangular-solve and ragged-dot run as small f64 loops
// (kernels_linalg.cc, kernels_ragged_dot.cc). Unsupported ops (fft, complex
// and f8 types...) return an error that names the instruction.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/computation.h"
#include "ir/literal.h"
#include "ir/module.h"
#include "runtime/collective_ops.h"
#include "support/status.h"

namespace meshsplit {

// One conditional a device ran: the branch taken and the thread CPU
// seconds it took (EvalContext::branch_trace). The pipeline's ticks are
// such conditionals (`stage_idle`, `stage_forward`, ...), so a trace tells
// how much of its time a stage spent idle.
struct BranchRun {
  const Computation* branch = nullptr;
  double cpu_seconds = 0;
};

// Iterations one execution of a while loop may run by default
// (EvalContext::max_while_iterations). Far above the trip counts of real
// programs (layer loops, pipeline ticks, scans), low enough that a loop
// whose condition never turns false stops within seconds instead of
// hanging the run.
inline constexpr int64_t kDefaultMaxWhileIterations = 1'000'000;

struct EvalContext {
  int64_t partition_id = 0;
  int64_t replica_id = 0;
  // Backend for collectives; nullptr = single device (groups of one).
  CollectiveOps* collectives = nullptr;
  // Seed of the deterministic generator behind `rng`.
  uint64_t rng_seed = 42;
  // Per-device custom-call / infeed / outfeed behaviour; nullptr = none.
  DeviceHooks* hooks = nullptr;
  // Give custom-calls the interpreter has no meaning for (a backend's
  // kernels) a deterministic stand-in value computed from their operands,
  // so verify can still compare a program that contains them. Off for
  // `run`: there an unknown target is an error.
  bool stub_opaque_custom_calls = false;
  // When set, every conditional run appends its BranchRun here (in the
  // order they finish: a nested one before the one holding it).
  std::vector<BranchRun>* branch_trace = nullptr;
  // Iterations one execution of a while loop may run; one more is an error
  // that names the loop and this limit. 0: no limit.
  int64_t max_while_iterations = kDefaultMaxWhileIterations;
};

// Evaluates `computation` with `args` bound to its parameters (moved in, so
// the interpreter may reuse their buffers). Shapes of args must match the
// parameters (element type and dimensions), else an error naming the
// parameter.
StatusOr<Literal> Evaluate(const Computation& computation, std::vector<Literal> args,
                           const EvalContext& ctx = {});

// Like Evaluate, but borrows the arguments: they are read, never moved or
// modified (so the interpreter cannot reuse their buffers).
StatusOr<Literal> EvaluateBorrowed(const Computation& computation,
                                   const std::vector<const Literal*>& args,
                                   const EvalContext& ctx = {});

// Evaluates the module's entry computation.
StatusOr<Literal> EvaluateModule(const Module& module, std::vector<Literal> args,
                                 const EvalContext& ctx = {});

// Combines two arrays of the same shape elementwise with a scalar reducer
// computation (e.g. the to_apply of an all-reduce): result[i] =
// reducer(a[i], b[i]). Fast for add/multiply/maximum/minimum/and/or reducers.
// For collectives backends.
StatusOr<Literal> ApplyReducer(const Computation& reducer, const Literal& a,
                               const Literal& b);

}  // namespace meshsplit
