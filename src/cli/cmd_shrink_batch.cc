// `meshsplit shrink-batch FILE --param NAME [--param NAME...] --factor K`:
// prints the module with the batch dim of the named parameters (and every
// dim derived from it) K times smaller, so that a large model can be
// partitioned and verified on a small machine (see transforms/shrink_batch.h).
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "import/load.h"
#include "text/printer.h"
#include "transforms/shrink_batch.h"

namespace meshsplit::cli {
namespace {

const bool kRegistered = RegisterCommand(
    "shrink-batch",
    "make a module's batch dimension K times smaller (to verify big models quickly)",
    [](CLI::App* app) -> std::function<int()> {
      auto file = std::make_shared<std::string>();
      auto options = std::make_shared<ShrinkBatchOptions>();
      auto output = std::make_shared<std::string>();
      auto parse = std::make_shared<ParseOptions>();
      AddOutputFlag(app, output.get());
      AddXlaStrictFlag(app, parse.get());
      app->add_option("FILE", *file, "HLO file ('-' for stdin)")->required();
      app->add_option("--param", options->parameters,
                      "entry parameter whose batch dim shrinks (repeatable)")
          ->required();
      app->add_option("--batch-dim", options->batch_dim, "the batch dim of those parameters")
          ->capture_default_str();
      app->add_option("--factor", options->factor, "how many times smaller")->required();
      return [=]() {
        StatusOr<std::unique_ptr<Module>> module = LoadModule(*file, *parse);
        if (!module.ok()) return ReportError(module.status());
        auto report = ShrinkBatch(**module, *options);
        if (!report.ok()) return ReportError(report.status());
        std::cerr << "shrink-batch: " << report->instructions_shrunk
                  << " instructions shrunk by " << options->factor << "\n";
        for (const std::string& note : report->notes) std::cerr << "shrink-batch: " << note << "\n";
        return WriteOutput(*output, PrintModule(**module));
      };
    });

}  // namespace
}  // namespace meshsplit::cli
