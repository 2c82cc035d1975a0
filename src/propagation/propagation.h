// Sharding propagation (GSPMD's sharding completion): starting from the user's
// annotations, gives every instruction a sharding inferred from its operands
// (forward) and users (backward), iterating to a fixed point at increasing
// aggressiveness, as XLA's ShardingPropagation pass does. Each inferred
// sharding records its provenance for `meshsplit propagate --explain`.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

struct PropagationOptions {
  // SPMD mode: merge compatible partial shardings and allow the SPMD-only
  // rules (reverse, rng, custom-calls). false = XLA's conservative MPMD mode.
  bool is_spmd = true;
  // May the pass change the entry root's sharding? One flag for the whole
  // result, or one per element of a root tuple.
  std::vector<bool> allow_spmd_sharding_propagation_to_output = {false};
  // May the pass change entry parameter shardings? One flag for all, or one
  // per parameter (or per element of a single tuple parameter).
  std::vector<bool> allow_spmd_sharding_propagation_to_parameters = {false};
  // Only propagate to scalar broadcasts (marks them for CSE prevention) and
  // restore every other sharding afterwards.
  bool cse_prevention_only = false;
  // Accepted for compatibility with XLA's pass; metadata is never compared.
  bool propagate_metadata = false;
  // Ops without a sharding rule are an error instead of a warning.
  bool strict = false;
  // Execution threads whose computations are propagated; empty = all.
  std::vector<std::string> execution_threads;
};

// One step of how an instruction got its sharding.
struct ShardingProvenance {
  std::string how;        // "annotation", "forward", "backward", ...
  std::string rule;       // rule family of the op that decided it
  std::vector<std::string> sources;  // instructions the sharding came from
  std::string sharding;   // the sharding set at this step
  int aggressiveness = -1;
};

struct PropagationReport {
  bool changed = false;
  // Every sharding assignment, in order, per instruction name.
  std::unordered_map<std::string, std::vector<ShardingProvenance>> history;
  // Ops that had no rule (name: reason).
  std::vector<std::string> warnings;
};

// Runs propagation on `module` in place. Returns whether any sharding (or the
// graph, e.g. a removed Sharding custom-call) changed. User shardings are never
// overwritten (except partially specified ones being refined).
StatusOr<bool> PropagateShardings(Module& module,
                                  const PropagationOptions& options,
                                  PropagationReport* report = nullptr);

}  // namespace meshsplit
