// Why one plan beats another, in the objective's own terms: the roofline
// (compute or memory traffic) it saves or costs, the collectives it adds
// with their latency and bandwidth parts, and what would change the verdict
// (how much cheaper collectives would have to be, or which rate flag would
// do it). autoshard prints it for its "why" alternatives and, when
// replication wins, for the best split it saw.
#pragma once

#include <string>

#include "autoshard/objective.h"

namespace meshsplit::autoshard {

struct Verdict {
  double roofline_delta = 0;     // alternative - chosen: max(compute, memory)
  double latency_delta = 0;      // alternative - chosen: collective latency part
  double wire_delta = 0;         // alternative - chosen: collective bandwidth part
  int64_t collectives_delta = 0; // alternative - chosen: executions
  // The alternative computes faster but communicates more: every collective
  // would have to be this many times cheaper for it to win (> 1); 0 when
  // that is not how it loses.
  double comm_factor_to_win = 0;
  // With the default rates (no profile): the latency per collective below
  // which it wins, bandwidth unchanged (-1: no latency would do), and the
  // link bandwidth above which it wins, latency unchanged (-1: none would).
  double latency_to_win = -1;
  double bandwidth_to_win = -1;
  std::string text;  // one sentence, e.g. "saves 780 us of compute but ..."
};

// Both evaluations must be ok.
Verdict Explain(const Evaluation& chosen, const Evaluation& alternative,
                const MachineModel& machine);

}  // namespace meshsplit::autoshard
