// Round trip over the shared corpus: every .hlo under conformance/xla and
// models/hlo parses, and print(parse(print(parse(x)))) == print(parse(x)).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> CorpusFiles() {
  std::vector<fs::path> files;
  fs::path shared(MESHSPLIT_SHARED_DIR);
  for (const char* sub : {"conformance/xla", "models/hlo"}) {
    fs::path dir = shared / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(dir))
      if (entry.is_regular_file() && entry.path().extension() == ".hlo")
        files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(CorpusRoundTrip, EveryFileParsesAndPrintsToAFixedPoint) {
  std::vector<fs::path> files = CorpusFiles();
  if (files.empty())
    GTEST_SKIP() << "no corpus under " << MESHSPLIT_SHARED_DIR
                 << " (conformance/xla, models/hlo): shared directory absent";
  int checked = 0;
  for (const fs::path& path : files) {
    auto first = ParseModuleFile(path.string());
    if (!first.ok()) {
      ADD_FAILURE() << first.status().ToString();
      continue;
    }
    std::string printed = PrintModule(**first);
    auto second = ParseModuleText(printed);
    if (!second.ok()) {
      ADD_FAILURE() << path.string() << ": printed text does not parse: "
                    << second.status().ToString();
      continue;
    }
    std::string reprinted = PrintModule(**second);
    EXPECT_EQ(printed, reprinted) << path.string() << ": not a fixed point";
    ++checked;
  }
  // The public corpus has 526 conformance files and 2 models.
  EXPECT_GE(checked, 500);
}

}  // namespace
}  // namespace meshsplit
