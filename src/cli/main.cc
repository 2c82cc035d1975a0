// The `meshsplit` command: dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "support/status.h"

namespace meshsplit::cli {

std::vector<Command>& CommandRegistry() {
  static std::vector<Command> registry;
  return registry;
}

bool RegisterCommand(std::string name, std::string summary, CommandSetup setup) {
  CommandRegistry().push_back({std::move(name), std::move(summary), std::move(setup)});
  return true;
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

}  // namespace meshsplit::cli

int main(int argc, char** argv) {
  using namespace meshsplit::cli;
  CLI::App app{"meshsplit: shard an HLO program over a mesh of devices, run it, verify it"};
  app.set_version_flag("--version", std::string("meshsplit ") + MESHSPLIT_VERSION);
  app.require_subcommand(1);
  // A usage error (unknown option, bad value) is an "error:" like every
  // other refusal, but exits 2 where a refused input exits 1.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return "error: " + CLI::FailureMessage::simple(a, e);
  });
  std::vector<std::pair<CLI::App*, std::function<int()>>> actions;
  auto registry = CommandRegistry();
  std::sort(registry.begin(), registry.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  for (const Command& cmd : registry) {
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.summary);
    actions.push_back({sub, cmd.setup(sub)});
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  for (auto& [sub, action] : actions)
    if (sub->parsed()) return action();
  return 1;
}
