// `meshsplit opt FILE --passes=a,b [--print-after-all] [--dump-dir DIR]`:
// runs named passes in order and prints the resulting module. The passes
// take their options from the sharding flags as every compiling command
// does (`--shard`, `--mesh`, `--pipeline`, ...: apply-spec applies them,
// pipeline reads the spec's pipeline).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "cli/shard_flags.h"
#include "compiler/compile.h"
#include "compiler/passes.h"
#include "import/load.h"
#include "text/printer.h"

namespace meshsplit::cli {
namespace {

struct OptOptions {
  std::string file;
  std::string passes;
  bool print_after_all = false;
  std::string dump_dir;
  bool list = false;
  std::string output;
  ShardFlags shard;
};

int RunOpt(const OptOptions& opts) {
  if (opts.list) {
    for (const PassInfo& p : PassTable())
      std::cout << p.name << "\t" << p.summary << "\n";
    return 0;
  }
  if (opts.file.empty())
    return ReportError(Status::Error("opt: missing input FILE"));
  // Each pass with its default options; propagation lists the ops it had no
  // rule for on stderr.
  CompileOptions options = CompileOptionsFor(opts.shard);
  options.print_propagation_warnings = true;
  CompileResult result;
  std::vector<std::unique_ptr<Pass>> pipeline;
  std::stringstream ss(opts.passes);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) continue;
    const PassInfo* info = FindPass(name);
    if (info == nullptr) {
      std::string known;
      for (const PassInfo& p : PassTable()) known += (known.empty() ? "" : ", ") + p.name;
      return ReportError(Status::Error("unknown pass '" + name +
                                       "' (known passes: " + known + ")"));
    }
    pipeline.push_back(info->create(options, &result));
  }
  auto module_or = LoadModule(opts.file, opts.shard.parse);
  if (!module_or.ok()) return ReportError(module_or.status());
  Module& module = **module_or;
  int index = 0;
  for (auto& pass : pipeline) {
    auto changed = pass->Run(module);
    if (!changed.ok()) return ReportError(changed.status());
    std::string text;
    if (opts.print_after_all || !opts.dump_dir.empty()) text = PrintModule(module);
    if (opts.print_after_all)
      std::cerr << "// ----- after " << pass->name() << " -----\n" << text << "\n";
    if (!opts.dump_dir.empty()) {
      std::filesystem::create_directories(opts.dump_dir);
      std::ofstream(std::filesystem::path(opts.dump_dir) /
                    (std::to_string(index) + "." + std::string(pass->name()) + ".hlo"))
          << text;
    }
    ++index;
  }
  return WriteOutput(opts.output, PrintModule(module));
}

const bool registered = RegisterCommand(
    "opt", "run named passes over a module and print it",
    [](CLI::App* app) {
      auto opts = std::make_shared<OptOptions>();
      app->add_option("file", opts->file, "HLO file ('-' for stdin)");
      app->add_option("--passes", opts->passes, "comma-separated pass names, run in order");
      app->add_flag("--print-after-all", opts->print_after_all,
                    "print the module to stderr after every pass");
      app->add_option("--dump-dir", opts->dump_dir, "write the module after every pass into DIR");
      app->add_flag("--list-passes", opts->list, "list the available passes");
      AddShardFlags(app, &opts->shard);
      AddOutputFlag(app, &opts->output);
      return [opts]() { return RunOpt(*opts); };
    });

}  // namespace
}  // namespace meshsplit::cli
