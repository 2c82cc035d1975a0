// The partitioning half of `meshsplit conformance DIR` (the propagation half
// lives in cmd_conformance.cc): prints one line per failing or skipped case
// and "N passed (R at reduced shapes), M failed, K skipped"; cases run at
// reduced shapes (too large as written) are always listed with their shapes.
#pragma once

#include <string>

namespace meshsplit::cli {

// Options of `meshsplit conformance` for partitioning corpora; <= 0 keeps the
// runner's default (or the environment's).
struct PartitioningCliOptions {
  double timeout_seconds = 0;  // --timeout: CPU seconds per case
  double max_memory_gib = 0;   // --max-memory: estimated peak per case, GiB
  bool json = false;           // --json: one JSON document instead of lines
  std::string filter;          // --filter: only cases whose name contains it
};

// Runs the partitioning corpus in `dir` (verify/conformance_partitioning.h).
// `verbose` also lists passing cases with their times. Environment:
// MESHSPLIT_CONFORMANCE_FILTER (substring of case names to run) and
// MESHSPLIT_CONFORMANCE_TIMEOUT (CPU seconds per case, default 20; the
// --timeout flag wins), MESHSPLIT_CONFORMANCE_WALL_FACTOR (wall-clock
// backstop as a multiple of it, default 4), MESHSPLIT_CONFORMANCE_SHARD
// ("i/n": every n-th case from the i-th), MESHSPLIT_CONFORMANCE_FROM (only
// cases whose name sorts at or after it, to resume a run). Ends with the skip counts per
// reason. Returns the exit status: 0 when no case failed.
int RunPartitioningCorpus(const std::string& dir, bool verbose,
                          const PartitioningCliOptions& cli = {});

}  // namespace meshsplit::cli
