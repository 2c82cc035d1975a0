// Formatting of Status values and diagnostics.
#include "support/status.h"

#include <cstdio>
#include <cstdlib>

#include "support/check.h"

namespace meshsplit {

std::string Status::ToString() const {
  if (ok()) return "ok";
  return FormatDiagnostic(error_->loc, "error", error_->message);
}

const std::string& Status::EmptyMessage() {
  static const std::string* empty = new std::string;
  return *empty;
}

const SourceLoc& Status::EmptyLoc() {
  static const SourceLoc* empty = new SourceLoc;
  return *empty;
}

std::string FormatDiagnostic(const SourceLoc& loc, const std::string& severity,
                             const std::string& message) {
  if (!loc.known()) return severity + ": " + message;
  std::string out = loc.file->name + ":" + std::to_string(loc.line) + ":" +
                    std::to_string(loc.column) + ": " + severity + ": " +
                    message;
  // Quote the source line with a caret under the culprit.
  const std::string& text = loc.file->text;
  size_t pos = 0;
  for (int l = 1; l < loc.line && pos != std::string::npos; ++l) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos || pos > text.size()) return out;
  size_t end = text.find('\n', pos);
  std::string line =
      text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  if (line.size() > 400) return out;  // do not quote huge lines
  out += "\n" + line + "\n";
  int col = std::max(1, loc.column);
  for (int i = 1; i < col && i - 1 < static_cast<int>(line.size()); ++i)
    out += line[i - 1] == '\t' ? '\t' : ' ';
  out += '^';
  int len = std::max(1, loc.length);
  int room = static_cast<int>(line.size()) - col;
  for (int i = 1; i < len && i <= room; ++i) out += '~';
  return out;
}

namespace internal {
void CheckFailed(const char* file, int line, const char* cond,
                 const std::string& message) {
  std::fprintf(stderr, "%s:%d: internal error: check failed: %s %s\n", file,
               line, cond, message.c_str());
  std::abort();
}
}  // namespace internal

}  // namespace meshsplit
