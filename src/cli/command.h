// Registry of `meshsplit` subcommands. Each command lives in its own
// cmd_<name>.cc and registers itself with one line, so the CLI lists every
// command in --help without a central switch.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "support/status.h"

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

}  // namespace meshsplit::cli
