// HLO text -> Module. Reads what XLA and JAX print (with or without `%`,
// operand shapes inline or not, old and new computation headers). Every
// instruction keeps the SourceLoc of its name. Duplicate instruction names
// across computations are renamed as XLA does on parse.
#pragma once

#include <memory>
#include <string>

#include "ir/module.h"
#include "support/source_loc.h"
#include "support/status.h"

namespace meshsplit {

StatusOr<std::unique_ptr<Module>> ParseModule(
    std::shared_ptr<const SourceFile> file);

// Convenience for tests: parses `text` as a file named "<string>".
StatusOr<std::unique_ptr<Module>> ParseModuleText(const std::string& text);

// Reads FILE ("-" = stdin) whole, for parsing and for quoting in
// diagnostics. Errors name the file (missing, unreadable, a directory).
StatusOr<std::shared_ptr<const SourceFile>> ReadSourceFile(const std::string& path);

// Reads FILE ("-" = stdin) and parses it. Errors name the file.
StatusOr<std::unique_ptr<Module>> ParseModuleFile(const std::string& path);

}  // namespace meshsplit
