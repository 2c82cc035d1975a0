// Round trip over the shared corpus: every .hlo under conformance/xla and
// models/hlo parses, and print(parse(print(parse(x)))) == print(parse(x)).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../shared_data.h"
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
  MESHSPLIT_SKIP_WITHOUT_SHARED("conformance/xla");
  std::vector<fs::path> files = CorpusFiles();
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

// The propagation cases name instructions in NAME.expected as XLA names them
// after parsing (with its renaming of duplicates); every such name must
// exist in our parse of NAME.hlo.
TEST(CorpusRoundTrip, ExpectedFilesNameExistingInstructions) {
  MESHSPLIT_SKIP_WITHOUT_SHARED("conformance/xla/propagation");
  fs::path dir = fs::path(MESHSPLIT_SHARED_DIR) / "conformance/xla/propagation";
  int names = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".expected") continue;
    std::string stem = entry.path().stem().string();
    fs::path hlo = dir / (stem + ".hlo");
    if (!fs::exists(hlo)) hlo = dir / (stem.substr(0, stem.find("__")) + ".hlo");
    if (!fs::exists(hlo)) continue;
    auto module = ParseModuleFile(hlo.string());
    if (!module.ok()) {
      ADD_FAILURE() << module.status().ToString();
      continue;
    }
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::string> fields;
      std::stringstream ss(line);
      for (std::string f; std::getline(ss, f, '\t');) fields.push_back(f);
      std::vector<std::string> refs;
      if (fields[0] == "@same" || fields[0] == "@differ") {
        refs.assign(fields.begin() + 1, fields.end());
      } else if (fields[0][0] != '@') {
        refs.push_back(fields[0]);
      }
      for (const std::string& name : refs) {
        ++names;
        EXPECT_TRUE((*module)->IsNameUsed(name)) << entry.path().string() << ": " << name;
      }
    }
  }
  EXPECT_GT(names, 100);
}

}  // namespace
}  // namespace meshsplit
