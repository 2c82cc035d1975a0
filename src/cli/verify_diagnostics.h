// `--verify-diagnostics` (MLIR's -verify-diagnostics) for diagnostic tests:
// the input carries `// expected-error@+1 {{text}}` comments; the mode parses
// and verifies it, and succeeds iff every expected error was produced on its
// line with a message containing the text, and no other error was.
#pragma once

#include <string>

namespace meshsplit::cli {

// Reads FILE ("-" = stdin), runs parse + verify, matches the diagnostics
// against the expectations in the text. Prints each mismatch to stderr and
// returns the exit status: 0 when everything matched, 1 otherwise.
//
// Expectation syntax, in `//` comments:
//   expected-error {{substring}}       error on this line
//   expected-error@+N {{substring}}    error N lines below
//   expected-error@-N {{substring}}    error N lines above
//   expected-error@N {{substring}}     error on line N
//   expected-error@unknown {{...}}     error without a source location
// An optional `:COL` after the line (`@+1:12`) also checks the column.
int RunVerifyDiagnostics(const std::string& path);

}  // namespace meshsplit::cli
