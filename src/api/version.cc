// The version the build was configured with (project(VERSION) in the root
// CMakeLists.txt), shared with `meshsplit --version`.
#include "meshsplit/meshsplit.h"

namespace meshsplit::api {

std::string Version() { return MESHSPLIT_VERSION; }

}  // namespace meshsplit::api
