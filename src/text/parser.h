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

struct ParseOptions {
  // Refuse, with a located error, what XLA's own HLO parser
  // (xla/hlo/parser/hlo_parser.cc) refuses but meshsplit reads for
  // compatibility: instruction attributes the opcode does not take (XLA's
  // per-opcode attribute table, text/xla_attributes.cc), module header
  // attributes XLA does not know (`mesh=`), an array constant written as one
  // value (`f32[4] constant(0)`, which XLA reads element by element),
  // `mesh_split` shardings, and frontend attributes that are not
  // `{key="value", ...}`. `meshsplit ... --xla-strict`; docs/xla_output.md.
  bool xla_strict = false;
};

StatusOr<std::unique_ptr<Module>> ParseModule(
    std::shared_ptr<const SourceFile> file, const ParseOptions& options = {});

// Convenience for tests: parses `text` as a file named "<string>".
StatusOr<std::unique_ptr<Module>> ParseModuleText(const std::string& text,
                                                  const ParseOptions& options = {});

// Reads FILE ("-" = stdin) whole, for parsing and for quoting in
// diagnostics. Errors name the file (missing, unreadable, a directory).
StatusOr<std::shared_ptr<const SourceFile>> ReadSourceFile(const std::string& path);

// Reads FILE ("-" = stdin) and parses it. Errors name the file.
StatusOr<std::unique_ptr<Module>> ParseModuleFile(const std::string& path,
                                                  const ParseOptions& options = {});

}  // namespace meshsplit
