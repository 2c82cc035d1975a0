// Shape shrinking: rewrites a module so that its large dimensions become
// small while the module stays valid and keeps its shardings meaningful.
// The conformance runner uses it to execute partitioning cases whose real
// shapes need far more memory than this machine has (an einsum over
// f32[32,39296,63,128] runs as f32[32,4,7,4]): the full-size module is still
// partitioned, and the shrunk one is partitioned and verified numerically.
//
// Dims that must stay equal (dot batch/contracting pairs, elementwise
// operands, broadcast and transpose maps, reduce, concatenate pieces, 1:1
// reshape factors, full slices...) are joined into classes; a class is
// frozen at its size when some op relates it to its size in a way we do not
// rewrite (partial slices, padding, windows, constant offsets, constants
// with array literals, unknown ops). Every other class gets a small size
// congruent to the old one modulo the lcm of the tile counts that shard it,
// so an even split stays even and an uneven one keeps its remainder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

struct ShrinkShapesOptions {
  // A module with the same instruction names (e.g. the same text after
  // sharding propagation) whose shardings also constrain divisibility;
  // null = only the module's own shardings.
  const Module* sharding_source = nullptr;
  // A shrinkable dim becomes at least this large (or keeps its size when it
  // is smaller), beyond what its tile counts require.
  int64_t min_dim = 4;
  // 0: every shrinkable dim gets the smallest size the rules allow. K > 0:
  // a dim of size S gets about S / K instead (still congruent modulo its
  // tile counts, still at least min_dim), so that big dims stay bigger
  // than small ones, as the partitioner's size-based choices expect.
  int64_t divisor = 0;
  // How many times an instruction that fails shape inference after the
  // rewrite may freeze its dims and the rewrite be retried.
  int max_attempts = 64;
};

struct ShrinkShapesReport {
  int64_t dims_shrunk = 0;       // dims of instructions whose size changed
  int64_t classes_shrunk = 0;    // equality classes that got a new size
  int64_t classes_frozen = 0;    // classes kept at their size (size > 1)
  int attempts = 0;              // rewrites tried (1 = the first one held)
  // "%rhs: f32[32,39296,63,128] -> f32[32,4,7,4]" for each entry parameter
  // (and the root) whose shape changed.
  std::vector<std::string> changes;
  std::vector<std::string> notes;  // e.g. "froze the dims of %conv: ..."
  // The first few `changes`, joined for one-line reports.
  std::string Summary(size_t max_items = 3) const;
};

// Rewrites `module` in place (shapes and the attributes that spell sizes;
// shardings are kept; entry_computation_layout is dropped when the entry
// signature changed). Errors (module unchanged): no dim could shrink, or
// the rewrite kept failing shape inference.
StatusOr<ShrinkShapesReport> ShrinkShapes(Module& module, const ShrinkShapesOptions& options = {});

}  // namespace meshsplit
