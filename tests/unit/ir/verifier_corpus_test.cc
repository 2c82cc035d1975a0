// Runs parse + VerifyModule over every HLO file of the shared corpus
// (conformance/xla/**/*.hlo and models/hlo/*.hlo): all of them are well-typed
// XLA input, including the cases the partitioner must reject, so the verifier
// must accept each one.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../shared_data.h"
#include "ir/verifier.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> CorpusFiles(const fs::path& shared) {
  std::vector<fs::path> files;
  for (const char* dir : {"conformance/xla", "models/hlo"}) {
    fs::path root = shared / dir;
    if (!fs::is_directory(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root))
      if (entry.is_regular_file() && entry.path().extension() == ".hlo")
        files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(VerifierCorpusTest, AcceptsEveryCorpusFile) {
  MESHSPLIT_SKIP_WITHOUT_SHARED("conformance/xla");
  const fs::path shared = MESHSPLIT_SHARED_DIR;
  std::vector<fs::path> files = CorpusFiles(shared);
  ASSERT_GT(files.size(), 100u);
  int parse_failures = 0, verify_failures = 0;
  for (const fs::path& file : files) {
    auto module = ParseModuleFile(file.string());
    if (!module.ok()) {
      ++parse_failures;
      ADD_FAILURE() << "parse: " << module.status().ToString();
      continue;
    }
    Status status = VerifyModule(**module);
    if (!status.ok()) {
      ++verify_failures;
      ADD_FAILURE() << "verify: " << status.ToString();
    }
  }
  EXPECT_EQ(parse_failures, 0) << "of " << files.size() << " files";
  EXPECT_EQ(verify_failures, 0) << "of " << files.size() << " files";
}

}  // namespace
}  // namespace meshsplit
