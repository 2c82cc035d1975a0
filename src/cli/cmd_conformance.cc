// `meshsplit conformance DIR`: runs a conformance corpus and prints one line per
// failing case, then "N passed, M failed". Propagation corpora (NAME.hlo +
// NAME.expected) and partitioning corpora (conformance_partitioning_cli.h)
// are supported.
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/conformance_partitioning_cli.h"
#include "verify/conformance_propagation.h"

namespace meshsplit::cli {
namespace {

struct ConformanceOptions {
  std::string dir;
  bool verbose = false;
  PartitioningCliOptions partitioning;
};

int RunConformance(const ConformanceOptions& opts) {
  if (opts.dir.empty())
    return ReportError(Status::Error("conformance: missing DIR"));
  if (LooksLikePartitioningCorpus(opts.dir))
    return RunPartitioningCorpus(opts.dir, opts.verbose, opts.partitioning);
  auto summary = RunPropagationConformance(opts.dir);
  if (!summary.ok()) return ReportError(summary.status());
  for (const ConformanceCase& c : summary->cases) {
    if (c.passed) {
      if (opts.verbose) std::cout << "PASS " << c.name << "\n";
      continue;
    }
    std::cout << "FAIL " << c.name << ":";
    for (size_t i = 0; i < c.failures.size(); ++i)
      std::cout << (i ? "; " : " ") << c.failures[i];
    std::cout << "\n";
  }
  std::cout << summary->passed << " passed, " << summary->failed << " failed\n";
  return summary->failed == 0 ? 0 : 1;
}

const bool registered = RegisterCommand(
    "conformance", "run a conformance corpus directory and report N passed, M failed",
    [](CLI::App* app) {
      auto opts = std::make_shared<ConformanceOptions>();
      app->add_option("dir", opts->dir, "corpus directory");
      app->add_flag("-v,--verbose", opts->verbose, "also list passing cases");
      app->add_option("--timeout", opts->partitioning.timeout_seconds,
                      "partitioning corpora: CPU seconds per case (default 60)");
      app->add_option("--filter", opts->partitioning.filter,
                      "partitioning corpora: only cases whose name contains this");
      app->add_flag("--json", opts->partitioning.json,
                    "partitioning corpora: print one JSON document (counts and every case)");
      app->add_option("--max-memory", opts->partitioning.max_memory_gib,
                      "partitioning corpora: cases whose estimated peak memory exceeds this "
                      "many GiB run at reduced shapes (or are skipped); default 6");
      return [opts]() { return RunConformance(*opts); };
    });

}  // namespace
}  // namespace meshsplit::cli
