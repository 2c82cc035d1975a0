// The table of passes `meshsplit opt --passes=...` can run.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/pass.h"

namespace meshsplit::cli {

struct PassInfo {
  std::string name;
  std::string summary;
  std::function<std::unique_ptr<Pass>()> create;
};

// Every registered pass, in a fixed order.
const std::vector<PassInfo>& PassTable();
const PassInfo* FindPass(const std::string& name);

}  // namespace meshsplit::cli
