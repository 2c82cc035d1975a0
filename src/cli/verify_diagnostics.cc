// The expected-diagnostics test mode: collects `// expected-error` comments,
// runs the parser and the verifier, and pairs each produced diagnostic with an
// expectation on the same line whose text it contains.
#include "cli/verify_diagnostics.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <memory>
#include <sstream>
#include <vector>

#include "ir/verifier.h"
#include "support/source_loc.h"
#include "support/status.h"
#include "text/parser.h"

namespace meshsplit::cli {
namespace {

struct Expectation {
  int comment_line = 0;  // where the comment is (for messages)
  int line = 0;          // expected line; 0 = no location (@unknown)
  int column = 0;        // 0 = any
  std::string text;
  bool matched = false;
};

// Parses the expectations of `text`. Malformed expectation comments are
// reported as errors so that a typo cannot silently disable a check.
std::vector<Expectation> ParseExpectations(const SourceFile& file,
                                           std::vector<std::string>& problems) {
  std::vector<Expectation> out;
  std::istringstream in(file.text);
  std::string line;
  const std::string kTag = "expected-error";
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    size_t comment = line.find("//");
    if (comment == std::string::npos) continue;
    for (size_t pos = line.find(kTag, comment); pos != std::string::npos;
         pos = line.find(kTag, pos)) {
      pos += kTag.size();
      Expectation e;
      e.comment_line = line_no;
      e.line = line_no;
      auto bad = [&](const std::string& why) {
        problems.push_back(file.name + ":" + std::to_string(line_no) +
                           ": error: malformed expected-error: " + why);
      };
      if (pos < line.size() && line[pos] == '@') {
        ++pos;
        if (line.compare(pos, 7, "unknown") == 0) {
          e.line = 0;
          pos += 7;
        } else {
          int sign = 0;
          if (pos < line.size() && (line[pos] == '+' || line[pos] == '-'))
            sign = line[pos++] == '+' ? 1 : -1;
          size_t start = pos;
          while (pos < line.size() && std::isdigit(static_cast<unsigned char>(line[pos])))
            ++pos;
          if (start == pos) {
            bad("expected a line offset after '@'");
            continue;
          }
          int n = 0;
          if (std::from_chars(line.data() + start, line.data() + pos, n).ec != std::errc()) {
            bad("line offset " + line.substr(start, pos - start) + " is too large");
            continue;
          }
          e.line = sign == 0 ? n : line_no + sign * n;
          if (pos < line.size() && line[pos] == ':') {
            size_t cstart = ++pos;
            while (pos < line.size() &&
                   std::isdigit(static_cast<unsigned char>(line[pos])))
              ++pos;
            if (cstart == pos) {
              bad("expected a column after ':'");
              continue;
            }
            if (std::from_chars(line.data() + cstart, line.data() + pos, e.column).ec !=
                std::errc()) {
              bad("column " + line.substr(cstart, pos - cstart) + " is too large");
              continue;
            }
          }
        }
      }
      size_t open = line.find("{{", pos);
      size_t close = open == std::string::npos ? open : line.find("}}", open + 2);
      if (open == std::string::npos || close == std::string::npos) {
        bad("expected '{{message}}'");
        continue;
      }
      e.text = line.substr(open + 2, close - open - 2);
      pos = close + 2;
      out.push_back(e);
    }
  }
  return out;
}

std::string Where(const std::string& file, int line) {
  return line == 0 ? file : file + ":" + std::to_string(line);
}

}  // namespace

int RunVerifyDiagnostics(const std::string& path) {
  StatusOr<std::shared_ptr<const SourceFile>> file = ReadSourceFile(path);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> problems;
  std::vector<Expectation> expected = ParseExpectations(**file, problems);

  std::vector<Status> produced;
  auto module = ParseModule(*file);
  if (!module.ok()) {
    produced.push_back(module.status());
  } else {
    produced = VerifyModuleAll(**module);
  }

  bool ok = problems.empty();
  for (const std::string& p : problems) std::fprintf(stderr, "%s\n", p.c_str());
  for (const Status& s : produced) {
    int line = s.loc().known() ? s.loc().line : 0;
    bool found = false;
    for (Expectation& e : expected) {
      if (e.matched || e.line != line) continue;
      if (e.column != 0 && e.column != s.loc().column) continue;
      if (s.message().find(e.text) == std::string::npos) continue;
      e.matched = true;
      found = true;
      break;
    }
    if (!found) {
      ok = false;
      std::fprintf(stderr, "%s\n",
                   FormatDiagnostic(s.loc(), "error",
                                    "unexpected error: " + s.message())
                       .c_str());
    }
  }
  for (const Expectation& e : expected) {
    if (e.matched) continue;
    ok = false;
    std::string at = e.line == 0 ? "without a location" : "on line " + std::to_string(e.line);
    if (e.column != 0) at += " column " + std::to_string(e.column);
    std::fprintf(stderr, "%s: error: expected error %s was not produced: {{%s}}\n",
                 Where((*file)->name, e.comment_line).c_str(), at.c_str(),
                 e.text.c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace meshsplit::cli
