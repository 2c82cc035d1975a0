// The auto-sharding search (after Automap, Schaarschmidt et al. 2021):
// coordinate descent over the decision groups, largest first, each step
// trying every option of one group with the others fixed and keeping the
// best; then a few restarts from the best plan with some groups perturbed
// (fixed seed). Every candidate is partitioned and costed (objective.h);
// candidates are cached by choice vector, and the number of evaluations and
// the wall time are bounded.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autoshard/decision_space.h"
#include "autoshard/objective.h"

namespace meshsplit::autoshard {

struct SearchOptions {
  // Distinct candidates to partition and cost (cache hits are free).
  int64_t max_evaluations = 300;
  // Wall-time bound in seconds; 0 = none. The search stops at whichever
  // bound comes first (with a time bound the result depends on the machine).
  double max_seconds = 50;
  // Seed of the restart perturbations.
  uint64_t seed = 0;
  // Restarts after the first descent converges, each from the best plan so
  // far with `perturb_groups` random groups set to random options.
  int restarts = 3;
  int perturb_groups = 3;
  // For this many of the largest groups, the best single-group alternative
  // to the chosen plan is reported, from the cache and from at most
  // `max_why_evaluations` further candidates (-1: a quarter of
  // max_evaluations, at least 10).
  int why_groups = 5;
  int64_t max_why_evaluations = -1;
  // Called at most every `progress_seconds` with a progress line
  // (evaluations / budget, failed, best cost, elapsed / limit); empty = silent.
  std::function<void(const std::string&)> progress;
  double progress_seconds = 2.0;
};

// The best plan that differs from the chosen one only in `group`.
struct Alternative {
  int group = 0;
  int option = 0;
  Evaluation eval;
  int costed = 0;   // alternatives of the group that were costed
  int options = 0;  // alternatives of the group (its options but the chosen)
};

struct SearchResult {
  Choice initial;
  Evaluation initial_eval;
  Choice best;
  Evaluation best_eval;
  int64_t evaluations = 0;  // candidates partitioned and costed by the search
  int64_t failed = 0;       // of which failed to propagate/partition
  int64_t why_evaluations = 0;  // further candidates costed for `why`
  int64_t cache_hits = 0;   // candidates met again
  int64_t descent_passes = 0;
  int restarts_done = 0;
  int seeds_tried = 0;  // whole-program starts (leading-dim splits) evaluated
  bool converged = false;   // the first descent finished within the budget
  std::string stop_reason;  // "converged", "evaluation budget", "time budget"
  double seconds = 0;
  std::vector<Alternative> why;
};

SearchResult Search(const Evaluator& evaluator, const DecisionSpace& space,
                    const SearchOptions& options);

}  // namespace meshsplit::autoshard
