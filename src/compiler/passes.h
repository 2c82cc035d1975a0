// The pass table: every named module transformation, listed once with a
// one-sentence summary. Compile() (compiler/compile.h) builds its pipeline
// from these names and `meshsplit opt --passes=a,b` runs any sequence of them;
// `meshsplit opt --list-passes` prints the table.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/pass.h"

namespace meshsplit {

struct CompileOptions;
struct CompileResult;

struct PassInfo {
  std::string name;
  std::string summary;
  // Makes the pass with its options taken from `options`; a pass that
  // reports something (propagation's provenance) writes it into `result`.
  std::function<std::unique_ptr<Pass>(const CompileOptions& options, CompileResult* result)>
      create;
};

// Every registered pass, in pipeline order.
const std::vector<PassInfo>& PassTable();
const PassInfo* FindPass(const std::string& name);

}  // namespace meshsplit
