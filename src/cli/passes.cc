// One line per pass: name, summary, factory. Keep sorted by pipeline order.
#include "cli/passes.h"

namespace meshsplit::cli {

const std::vector<PassInfo>& PassTable() {
  static const std::vector<PassInfo> table = {
  };
  return table;
}

const PassInfo* FindPass(const std::string& name) {
  for (const PassInfo& p : PassTable())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace meshsplit::cli
