// Collective checker: a static check, after partitioning, that every
// collective of the SPMD program moves data consistently with the shardings
// of the values it serves. The verifier runs the program and compares
// numbers; this names the collective whose groups are wrong, without
// running anything, and also on programs too large to run.
//
// Structural rules (every collective in partition mode, i.e. with a
// channel_id or use_global_device_ids):
//  - replica groups name devices in [0, N), none twice, all groups of one
//    size, together every device (N = the program's num_partitions);
//  - collective-permute pairs: sources distinct, targets distinct, in [0, N);
//  - all-gather / reduce-scatter / all-to-all dims agree with the group size.
// Sharding rules (collectives the partitioner emitted, which record the
// input instruction and reshard they serve, partitioner/spmd_builder.h):
// the candidate shardings are the recorded reshard's source and target and
// the input instruction's own and its operands' shardings (in `original`).
// For each tiled candidate S over the N devices, a device's "piece" is its
// tile index along S's data dims and its unreduced subgroup. The groups
// agree with S when, in every group,
//  - the members lie in one manual subgroup of S (manual data never leaves
//    its subgroup);
//  - they hold the same piece except along one set D of piece dims, the
//    same D for every group;
//  - they hold distinct pieces along D (an all-gather would concatenate a
//    tile twice, a sum would count one twice), except for an all-reduce
//    whose reducer is idempotent (min, max, and, or);
//  - for all-gather, reduce-scatter and all-to-all with one dim in D, in
//    increasing tile order (the group order is the concatenation order).
// A collective passes when some candidate agrees. It is counted unchecked
// (only the structural and manual-subgroup rules apply) when it has no tiled
// candidate (replicated / maximal values, hand-written collectives in manual
// code), and when the layouts its groups follow are not among the recorded
// ones: collectives an op rule emits outside a reshard (halo exchanges, a
// gather's sum of masked pieces run on the rule's own operand layouts), and
// gathers / all-to-alls after partial sums were scattered onto a data dim
// by the mesh-axis planner. Reductions of partial sums are always checked
// ({unreduced}: every device holds its own summand). A reshard between
// unrelated device orders also serves the intermediate layouts "the target's
// devices in the source's layout" and the reverse (TryPermuteAndPlan).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

struct CollectiveCheckResult {
  int64_t collectives = 0;  // collectives looked at
  int64_t checked = 0;      // ... whose groups were compared with a sharding
  // One entry per disagreeing collective: "%all-gather.3 (in %body, for %dot
  // (dot), reshard A -> B): ...".
  std::vector<Status> problems;
  bool ok() const { return problems.empty(); }
  // All problems as one error (located at the first one's input
  // instruction), or OK.
  Status ToStatus() const;
};

// `partitioned`: the SPMD program for `num_partitions` devices; `original`:
// the (propagated) module it was partitioned from, whose shardings and
// source locations the recorded causes name (may be null: then only the
// recorded reshard shardings are candidates and errors are not located).
CollectiveCheckResult CheckCollectives(const Module& partitioned, const Module* original,
                                       int64_t num_partitions);

}  // namespace meshsplit
