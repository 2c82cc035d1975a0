// Printing for the partitioning conformance runner.
#include "cli/conformance_partitioning_cli.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "verify/conformance_partitioning.h"

namespace meshsplit::cli {
namespace {

std::string ReducedNote(int64_t n) {
  return n == 0 ? "" : " (" + std::to_string(n) + " at reduced shapes)";
}

const char* OutcomeName(CaseOutcome o) {
  return o == CaseOutcome::kPassed ? "pass" : o == CaseOutcome::kSkipped ? "skip" : "fail";
}

// One JSON document: the counts, then every case.
int PrintJson(const PartitioningSummary& summary) {
  nlohmann::json doc;
  doc["passed"] = summary.passed;
  doc["passed_at_reduced_shapes"] = summary.passed_reduced;
  doc["failed"] = summary.failed;
  doc["failed_at_reduced_shapes"] = summary.failed_reduced;
  doc["skipped"] = summary.skipped;
  nlohmann::json cases = nlohmann::json::array();
  for (const PartitioningCaseResult& r : summary.cases) {
    nlohmann::json c;
    c["name"] = r.name;
    c["outcome"] = OutcomeName(r.outcome);
    c["reduced_shapes"] = r.reduced_shapes;
    if (!r.reason.empty()) c["reason"] = r.reason;
    if (!r.detail.empty()) c["detail"] = r.detail;
    c["seconds"] = r.seconds;
    cases.push_back(std::move(c));
  }
  doc["cases"] = std::move(cases);
  std::printf("%s\n", doc.dump(2).c_str());
  return summary.failed == 0 ? 0 : 1;
}

}  // namespace

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
  if (!cli.filter.empty()) options.filter = cli.filter;
  if (cli.timeout_seconds > 0) options.timeout_seconds = cli.timeout_seconds;
  if (cli.max_memory_gib > 0) {
    options.max_run_bytes = static_cast<int64_t>(cli.max_memory_gib * (int64_t{1} << 30));
    options.child_memory_bytes = options.max_run_bytes + (int64_t{2} << 30);
  }
  auto summary = RunPartitioningConformance(dir, options, [&](const PartitioningCaseResult& r) {
    switch (r.outcome) {
      case CaseOutcome::kPassed:
        if (cli.json) break;
        // Passes at reduced shapes are always listed: they say what ran.
        if (r.reduced_shapes)
          std::printf("PASS %s (%s) (%.2f s)\n", r.name.c_str(), r.detail.c_str(), r.seconds);
        else if (verbose)
          std::printf("PASS %s (%.2f s)\n", r.name.c_str(), r.seconds);
        break;
      case CaseOutcome::kFailed:
        if (cli.json) break;
        std::printf("FAIL %s: %s\n", r.name.c_str(), r.detail.c_str());
        break;
      case CaseOutcome::kSkipped:
        if (cli.json) break;
        std::printf("SKIP %s: %s\n", r.name.c_str(), r.detail.c_str());
        break;
    }
    std::fflush(stdout);
  });
  if (!summary.ok()) return ReportError(summary.status());
  if (cli.json) return PrintJson(*summary);
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
  // Cases verified at reduced shapes are counted apart, so that nobody
  // mistakes them for runs at the written shapes.
  std::printf("%lld passed%s, %lld failed%s, %lld skipped\n",
              static_cast<long long>(summary->passed),
              ReducedNote(summary->passed_reduced).c_str(),
              static_cast<long long>(summary->failed),
              ReducedNote(summary->failed_reduced).c_str(),
              static_cast<long long>(summary->skipped));
  return summary->failed == 0 ? 0 : 1;
}

}  // namespace meshsplit::cli
