// Detects modules exported from the Shardy era (JAX with the Shardy
// partitioner): their shardings travel as `xla.sdy.*` frontend attributes and
// `xla.sdy.*` custom-calls, which meshsplit does not read yet. Without this
// check such a module would silently get a replicated plan. Compile() calls
// it first, so every command that propagates or partitions sees it.
#pragma once

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

// When `module` carries Shardy attributes or custom-calls: an error located
// at the first one under `strict`, else one warning on stderr (with the
// first location and how many there are) and OK. OK and silent otherwise.
Status CheckShardyInput(const Module& module, bool strict);

}  // namespace meshsplit
