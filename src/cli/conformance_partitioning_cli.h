// The partitioning half of `meshsplit conformance DIR` (the propagation half
// lives in cmd_conformance.cc): prints one line per failing or skipped case
// and "N passed, M failed, K skipped".
#pragma once

#include <string>

namespace meshsplit::cli {

// Runs the partitioning corpus in `dir` (spmd/conformance_partitioning.h).
// `verbose` also lists passing cases with their times. Environment:
// MESHSPLIT_CONFORMANCE_FILTER (substring of case names to run) and
// MESHSPLIT_CONFORMANCE_TIMEOUT (CPU seconds per case, default 20),
// MESHSPLIT_CONFORMANCE_WALL_FACTOR (wall-clock backstop as a multiple of it,
// default 4), MESHSPLIT_CONFORMANCE_SHARD ("i/n": every n-th case from the
// i-th). Returns the
// exit status: 0 when no case failed.
int RunPartitioningCorpus(const std::string& dir, bool verbose);

}  // namespace meshsplit::cli
