// -o FILE for every command that prints a module or a document, and
// --xla-strict for those that read HLO (command.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <unistd.h>

#include "cli/command.h"

namespace meshsplit::cli {

void AddOutputFlag(CLI::App* app, std::string* path) {
  app->add_option("-o,--output", *path, "write the output to FILE instead of stdout ('-': stdout)");
}

void AddXlaStrictFlag(CLI::App* app, ParseOptions* parse) {
  app->add_flag("--xla-strict", parse->xla_strict,
                "Refuse HLO that XLA's own parser refuses (unknown attributes, mesh= headers, "
                "one-value array constants, mesh_split shardings) instead of reading it");
}

int WriteOutput(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) != 0) return ReportError(Status::Error("cannot write to stdout"));
    return 0;
  }
  namespace fs = std::filesystem;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return ReportError(Status::Error(path + ": cannot write"));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return ReportError(Status::Error(path + ": cannot write: " + ec.message()));
  }
  return 0;
}

}  // namespace meshsplit::cli
