// One line per pass: name, summary, factory. Keep sorted by pipeline order.
#include "cli/passes.h"

#include "ir/verifier.h"
#include "partitioner/partitioner.h"
#include "propagation/propagation_pass.h"

namespace meshsplit::cli {
namespace {

// Runs the IR verifier; never changes the module. Useful between passes.
class VerifyPass : public Pass {
 public:
  std::string_view name() const override { return "verify"; }
  StatusOr<bool> Run(Module& module) override {
    MS_RETURN_IF_ERROR(VerifyModule(module));
    return false;
  }
};

}  // namespace

const std::vector<PassInfo>& PassTable() {
  static const std::vector<PassInfo> table = {
      {"verify", "check shapes, operands and shardings (changes nothing)", [] { return std::unique_ptr<Pass>(new VerifyPass()); }},
      {"propagate", "infer a sharding for every instruction (SPMD mode)", [] { return std::unique_ptr<Pass>(new PropagationPass()); }},
      {"partition", "partition a sharded module into one SPMD program", [] { return std::unique_ptr<Pass>(new PartitionPass()); }},
  };
  return table;
}

const PassInfo* FindPass(const std::string& name) {
  for (const PassInfo& p : PassTable())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace meshsplit::cli
