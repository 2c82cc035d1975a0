// Printing for the partitioning conformance runner.
#include "cli/conformance_partitioning_cli.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "cli/command.h"
#include "spmd/conformance_partitioning.h"

namespace meshsplit::cli {

int RunPartitioningCorpus(const std::string& dir, bool verbose,
                          const PartitioningCliOptions& cli) {
  PartitioningConformanceOptions options;
  if (const char* f = std::getenv("MESHSPLIT_CONFORMANCE_FILTER")) options.filter = f;
  if (const char* f = std::getenv("MESHSPLIT_CONFORMANCE_FROM")) options.from = f;
  if (const char* t = std::getenv("MESHSPLIT_CONFORMANCE_TIMEOUT")) {
    double v = std::atof(t);
    if (v > 0) options.timeout_seconds = v;
  }
  if (const char* sh = std::getenv("MESHSPLIT_CONFORMANCE_SHARD")) {
    // "i/n"
    long long i = 0, n = 1;
    if (std::sscanf(sh, "%lld/%lld", &i, &n) == 2 && n > 0 && i >= 0 && i < n) {
      options.shard = i;
      options.num_shards = n;
    }
  }
  if (const char* w = std::getenv("MESHSPLIT_CONFORMANCE_WALL_FACTOR")) {
    double v = std::atof(w);
    if (v >= 1) options.wall_factor = v;
  }
  if (cli.timeout_seconds > 0) options.timeout_seconds = cli.timeout_seconds;
  if (cli.max_memory_gib > 0) {
    options.max_run_bytes = static_cast<int64_t>(cli.max_memory_gib * (int64_t{1} << 30));
    options.child_memory_bytes = options.max_run_bytes + (int64_t{2} << 30);
  }
  auto summary = RunPartitioningConformance(dir, options, [&](const PartitioningCaseResult& r) {
    switch (r.outcome) {
      case CaseOutcome::kPassed:
        if (verbose) std::printf("PASS %s (%.2f s)\n", r.name.c_str(), r.seconds);
        break;
      case CaseOutcome::kFailed:
        std::printf("FAIL %s: %s\n", r.name.c_str(), r.detail.c_str());
        break;
      case CaseOutcome::kSkipped:
        std::printf("SKIP %s: %s\n", r.name.c_str(), r.detail.c_str());
        break;
    }
    std::fflush(stdout);
  });
  if (!summary.ok()) return ReportError(summary.status());
  std::map<std::string, int64_t> by_reason;
  for (const PartitioningCaseResult& r : summary->cases)
    if (r.outcome == CaseOutcome::kSkipped) by_reason[r.reason.empty() ? "other" : r.reason]++;
  for (const auto& [reason, count] : by_reason)
    std::printf("skipped (%s): %lld\n", reason.c_str(), static_cast<long long>(count));
  // Timeouts depend on the machine's load (the wall-clock backstop is
  // MESHSPLIT_CONFORMANCE_WALL_FACTOR x --timeout), so they are counted apart.
  int64_t timeouts = 0;
  for (const PartitioningCaseResult& r : summary->cases)
    if (r.outcome == CaseOutcome::kFailed && r.detail.rfind("timeout", 0) == 0) ++timeouts;
  if (timeouts > 0)
    std::printf("failed (timeout): %lld\n", static_cast<long long>(timeouts));
  std::printf("%lld passed, %lld failed, %lld skipped\n",
              static_cast<long long>(summary->passed), static_cast<long long>(summary->failed),
              static_cast<long long>(summary->skipped));
  return summary->failed == 0 ? 0 : 1;
}

}  // namespace meshsplit::cli
