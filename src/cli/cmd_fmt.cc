// `meshsplit fmt FILE`: parse HLO text and print it back in canonical form.
#include <cstdio>

#include "cli/command.h"
#include "import/load.h"
#include "cli/verify_diagnostics.h"
#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit::cli {
namespace {

const bool kRegistered = RegisterCommand(
    "fmt", "Parse an HLO module and print it as canonical text",
    [](CLI::App* app) -> std::function<int()> {
      auto file = std::make_shared<std::string>();
      auto no_metadata = std::make_shared<bool>(false);
      auto operand_shapes = std::make_shared<bool>(false);
      auto verify_diagnostics = std::make_shared<bool>(false);
      auto output = std::make_shared<std::string>();
      auto parse = std::make_shared<ParseOptions>();
      app->add_option("FILE", *file, "HLO text file ('-' for stdin)")->required();
      app->add_flag("--no-metadata", *no_metadata, "Drop metadata={...} attributes");
      app->add_flag("--operand-shapes", *operand_shapes,
                    "Print operand shapes inline: add(f32[2] %a, f32[2] %b)");
      AddXlaStrictFlag(app, parse.get());
      AddOutputFlag(app, output.get());
      app->add_flag("--verify-diagnostics", *verify_diagnostics,
                    "Check the errors against // expected-error comments (tests)");
      return [=]() {
        if (*verify_diagnostics) return RunVerifyDiagnostics(*file);
        StatusOr<std::unique_ptr<Module>> module = LoadModule(*file, *parse);
        if (!module.ok()) return ReportError(module.status());
        PrintOptions options;
        options.print_metadata = !*no_metadata;
        options.print_operand_shapes = *operand_shapes;
        return WriteOutput(*output, PrintModule(**module, options));
      };
    });

}  // namespace
}  // namespace meshsplit::cli
