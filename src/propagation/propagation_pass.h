// Sharding propagation as a pass for `meshsplit opt --passes=propagate`
// (register it with one line in src/cli/passes.cc). Uses SPMD mode and keeps
// the entry signature's shardings, like `meshsplit propagate`.
#pragma once

#include <iostream>

#include "ir/pass.h"
#include "propagation/propagation.h"

namespace meshsplit {

class PropagationPass : public Pass {
 public:
  explicit PropagationPass(PropagationOptions options = {})
      : options_(std::move(options)) {}
  std::string_view name() const override { return "propagate"; }
  StatusOr<bool> Run(Module& module) override {
    PropagationReport report;
    auto changed = PropagateShardings(module, options_, &report);
    for (const std::string& w : report.warnings)
      std::cerr << "warning: " << w << "\n";
    return changed;
  }

 private:
  PropagationOptions options_;
};

}  // namespace meshsplit
