// A position in an input file, kept on every parsed instruction so that later
// passes can point diagnostics into the user's text.
#pragma once

#include <memory>
#include <string>

namespace meshsplit {

// The text of one input file, shared by every SourceLoc into it so that a
// diagnostic can quote the offending line long after parsing.
struct SourceFile {
  std::string name;  // as given on the command line ("-" for stdin)
  std::string text;
};

struct SourceLoc {
  std::shared_ptr<const SourceFile> file;
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based
  int length = 1;  // how many characters to underline

  bool known() const { return file != nullptr && line > 0; }
};

// "FILE:LINE:COL: error: message\n  <source line>\n  ^~~~" (no trailing
// newline). `severity` is "error", "warning" or "note".
std::string FormatDiagnostic(const SourceLoc& loc, const std::string& severity,
                             const std::string& message);

}  // namespace meshsplit
