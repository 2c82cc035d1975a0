// Registry of `meshsplit` subcommands. Each command lives in its own
// cmd_<name>.cc and registers itself with one line, so the CLI lists every
// command in --help without a central switch.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "support/status.h"
#include "text/parser.h"

namespace meshsplit::cli {

// Called once with the command's CLI11 sub-app: declares the options and
// returns the action to run when the command is chosen. The action returns
// the process exit status.
using CommandSetup = std::function<std::function<int()>(CLI::App* app)>;

struct Command {
  std::string name;
  std::string summary;
  CommandSetup setup;
};

std::vector<Command>& CommandRegistry();
bool RegisterCommand(std::string name, std::string summary, CommandSetup setup);

// Prints a Status as a diagnostic on stderr and returns exit status 1.
int ReportError(const Status& status);

// Declares `-o,--output FILE` for a command that prints a module or a
// document: where WriteOutput writes it.
void AddOutputFlag(CLI::App* app, std::string* path);

// Declares `--xla-strict` for a command that reads HLO text: parse it as
// XLA's parser would, refusing what XLA refuses (text/parser.h ParseOptions).
void AddXlaStrictFlag(CLI::App* app, ParseOptions* parse);

// Writes `text` to `path` ("" or "-": standard output). A file is written
// under a temporary name beside it and renamed into place, so a failure never
// leaves a partial file. Returns the exit status (1, with a diagnostic, when
// the text could not be written).
int WriteOutput(const std::string& path, const std::string& text);

}  // namespace meshsplit::cli
