// One line per pass: name, summary, factory. Keep sorted by pipeline order.
#include "cli/passes.h"

#include "partitioner/partitioner.h"

namespace meshsplit::cli {

const std::vector<PassInfo>& PassTable() {
  static const std::vector<PassInfo> table = {
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
