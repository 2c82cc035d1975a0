// Batch shrinking: rewrites a module so that a batch dimension of some entry
// parameters is `factor` times smaller, together with every dimension that
// derives from it. Used to verify models whose full batch is too slow to
// run here (e.g. MobileNet-V2 at batch 96 on 2 cores): the shrunk module has
// the same operations on a smaller batch, and is then partitioned and
// verified like any other module.
//
// Which dims derive from the batch is decided by sharding propagation: the
// named parameters are tiled `factor` ways along their batch dim and every
// value whose propagated sharding tiles a dim is shrunk by that dim's tile
// count. Reductions over the batch (BatchNorm statistics, the loss) keep
// their constant divisors, so the shrunk module computes the same kind of
// function, not the same numbers as the full one.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

struct ShrinkBatchOptions {
  // Entry parameters (names without '%') whose dim `batch_dim` is the batch.
  std::vector<std::string> parameters;
  int64_t batch_dim = 0;
  // The batch dim of each named parameter must be divisible by `factor`.
  int64_t factor = 1;
  // Non-empty: the named parameters are tuples of arrays, and these
  // (element, dim) pairs say where the batch is (a loop body's carried
  // activation and stacked per-layer values, for the pipeline pass);
  // `batch_dim` is then unused.
  std::vector<std::pair<int64_t, int64_t>> tuple_batch_dims;
  // With `tuple_batch_dims`: tuple elements whose batch dim, if they have
  // one, is not known beforehand; propagation finds it from how the body
  // uses them (a loop-invariant attention mask read beside the activation).
  // The parameter must then be read only through get-tuple-element. The
  // other elements are fixed: batched as `tuple_batch_dims` says, else not.
  std::vector<int64_t> open_tuple_elements;
};

struct ShrinkBatchReport {
  int64_t instructions_shrunk = 0;
  std::vector<std::string> notes;  // e.g. "dropped entry_computation_layout"
};

// Rewrites `module` in place. Shardings in the module are dropped (the
// result is an unannotated module), except those of `Sharding` custom-calls. Errors name the instruction whose
// shrinking is not a pure shape change (a constant, a partial slice or pad
// along a batch-derived dim, a window wider than 1 along it, ...).
StatusOr<ShrinkBatchReport> ShrinkBatch(Module& module, const ShrinkBatchOptions& options);

}  // namespace meshsplit
