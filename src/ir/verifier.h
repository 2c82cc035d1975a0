// The module verifier: checks that a parsed or transformed Module is well
// formed (an entry, roots, contiguous parameters, operands in the same
// computation) and well typed (every declared shape agrees with shape
// inference, called computations have the right signatures, shardings name
// devices the module has). Runs after parsing in `fmt` and between passes.
#pragma once

#include <vector>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

// The first problem found (in text order), or OK. Errors carry the
// offending instruction's (or computation's) SourceLoc.
Status VerifyModule(const Module& module);

// Every problem found, at most one per instruction, sorted by source line.
// Empty when the module is valid. Used by `--verify-diagnostics`.
std::vector<Status> VerifyModuleAll(const Module& module);

}  // namespace meshsplit
