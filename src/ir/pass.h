// The pass interface: a named transformation of a module. Passes are listed
// in one table in the CLI (src/cli/passes.cc) and run by `meshsplit opt
// --passes=a,b`.
#pragma once

#include <string_view>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

class Pass {
 public:
  virtual ~Pass() = default;
  // Kebab-case; also the name used on the command line.
  virtual std::string_view name() const = 0;
  // Returns whether the module changed.
  virtual StatusOr<bool> Run(Module& module) = 0;
};

}  // namespace meshsplit
