// The partitioning conformance runner: for each NAME.hlo of a corpus laid out
// like /work/shared/conformance/xla/partitioning (header comment lines
// `// num_partitions=`, `// pipeline:`, `// expect_error:`, `// opaque_ops:`),
// partitions the module and verifies it numerically against the original
// (verify/verify.h). Each case runs in a forked child with a time limit, so a
// hang or crash fails that case only. Cases are partitioned first (errors and
// crashes there always count as failures); then cases the executor cannot
// judge are skipped with a reason: element types the interpreter refuses
// (f8, c64), ops or custom-call targets it cannot run, random values the
// partitioned program draws per device (tiled rng), and runs whose
// estimated peak memory (original + N partitions in one process) exceeds
// the limit and that cannot be shrunk. A case over the limit is still
// partitioned at its own shapes; then a shrunk copy (transforms/
// shrink_shapes.h: same ops and shardings, small dims with the same
// divisibility by every tile count) is partitioned and verified, and its
// outcome is marked as reduced. Originals with manual regions, collectives, partition-id,
// manual / unreduced entry values, infeed or outfeed are verified against
// the N-device reference run (runtime/reference.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/computation.h"
#include "support/status.h"

namespace meshsplit {

// What the header comments of one case say.
struct PartitioningCase {
  std::string name;  // file name without .hlo
  std::string path;
  int64_t num_partitions = 1;
  bool propagate = false;      // pipeline runs ShardingPropagation
  std::string expect_error;    // non-empty: partitioning must fail
  std::string opaque_ops;      // non-empty: values we cannot reproduce
};

// Reads the header comments of a case file.
StatusOr<PartitioningCase> ReadPartitioningCase(const std::string& path);

// True when `dir` holds *.hlo files with `// num_partitions=` headers and no
// *.expected files (those are propagation corpora).
bool IsPartitioningCorpus(const std::string& dir);

enum class CaseOutcome { kPassed, kFailed, kSkipped };

struct PartitioningCaseResult {
  std::string name;
  CaseOutcome outcome = CaseOutcome::kFailed;
  std::string detail;  // why it failed or was skipped
  std::string reason;  // skipped: a short category ("too large", "element type", ...)
  double seconds = 0;
  // Passed or failed on a shrunk copy of the module (transforms/
  // shrink_shapes.h) because the case as written is too large to run; the
  // full-size module was still partitioned. `detail` lists the shapes.
  bool reduced_shapes = false;
};

struct PartitioningConformanceOptions {
  // Time limit per case in CPU seconds (all threads of the case), so that a
  // loaded machine does not turn slow cases into timeouts; the wall clock
  // gets 4x as a backstop. A case over either fails with "timeout".
  double timeout_seconds = 60;
  uint64_t seed = 0;
  // Run each case in a forked child (time limit, crash isolation). Without
  // it cases run in-process and the time limit is not enforced.
  bool isolate = true;
  // Address-space limit of each child, so a huge case fails instead of
  // exhausting the machine.
  int64_t child_memory_bytes = int64_t{6} << 30;
  // Only cases whose name contains this (empty = all).
  std::string filter;
  // Only cases whose name sorts at or after this (empty = all), to resume a
  // run.
  std::string from;
  // Run only cases i with i % num_shards == shard (in name order), so that
  // several runners can split a corpus.
  int64_t shard = 0, num_shards = 1;
  // Wall-clock backstop as a multiple of timeout_seconds.
  double wall_factor = 4;
  // Skip cases whose estimated peak memory (reference run + N partitions +
  // inputs, one process) exceeds this.
  int64_t max_run_bytes = int64_t{6} << 30;
};

struct PartitioningSummary {
  int64_t passed = 0, failed = 0, skipped = 0;
  // Of passed / failed: how many ran at reduced shapes.
  int64_t passed_reduced = 0, failed_reduced = 0;
  std::vector<PartitioningCaseResult> cases;
};

// Runs one case in-process.
PartitioningCaseResult RunPartitioningCase(const PartitioningCase& c, uint64_t seed,
                                           int64_t max_run_bytes = int64_t{6} << 30);

// Runs one case in a forked child under `options`' time and memory limits,
// as RunPartitioningConformance does for each case (crashes and timeouts
// come back as failures).
PartitioningCaseResult RunPartitioningCaseIsolated(const PartitioningCase& c,
                                                   const PartitioningConformanceOptions& options);

// Estimated peak bytes of live values while the interpreter evaluates `c`
// (values die after their last use; nested computations add their own
// peak). An upper bound for the entry of a module.
int64_t EstimatePeakBytes(const Computation& c);

// Runs every case of `dir` in name order. `on_case` (optional) sees each
// result as soon as it is known.
StatusOr<PartitioningSummary> RunPartitioningConformance(
    const std::string& dir, const PartitioningConformanceOptions& options,
    const std::function<void(const PartitioningCaseResult&)>& on_case = nullptr);

}  // namespace meshsplit
