// Runner for propagation conformance corpora laid out like
// ../shared/conformance/xla/propagation: NAME.hlo plus NAME.expected holding
// the pass options and the expected shardings (see that corpus's README).
// Shared by `meshsplit conformance` and the regression test.
#pragma once

#include <string>
#include <vector>

#include "propagation/propagation.h"
#include "support/status.h"

namespace meshsplit {

struct ConformanceCase {
  std::string name;
  bool passed = false;
  std::vector<std::string> failures;  // one line per mismatching check
};

struct ConformanceSummary {
  int passed = 0;
  int failed = 0;
  std::vector<ConformanceCase> cases;
};

// Parses the `# options: ...` line of a .expected file.
StatusOr<PropagationOptions> ParseConformanceOptions(const std::string& line);

// Runs one case: parses `hlo_path`, propagates with the options from
// `expected_path`, and checks every line.
ConformanceCase RunPropagationCase(const std::string& name,
                                   const std::string& hlo_path,
                                   const std::string& expected_path);

// Runs every NAME.hlo with a NAME.expected in `dir`, in name order. Errors if
// the directory cannot be read or holds no such pairs.
StatusOr<ConformanceSummary> RunPropagationConformance(const std::string& dir);

// True if `dir` holds .hlo files but no .expected ones (a partitioning corpus).
bool LooksLikePartitioningCorpus(const std::string& dir);

}  // namespace meshsplit
