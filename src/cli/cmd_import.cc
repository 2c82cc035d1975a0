// `meshsplit import FILE.onnx [-o OUT.hlo]`: lowers an ONNX model to HLO text
// (see docs/onnx_import.md for the naming rules).
#include <fstream>
#include <iostream>

#include "cli/command.h"
#include "import/load.h"
#include "text/printer.h"

namespace meshsplit::cli {
namespace {

struct Options {
  std::string file;
  std::string output;
};

const bool registered = RegisterCommand(
    "import", "Import an ONNX model (or HLO text) and print it as HLO text",
    [](CLI::App* app) -> std::function<int()> {
      auto opts = std::make_shared<Options>();
      app->add_option("file", opts->file, "model (.onnx or .hlo)")->required();
      AddOutputFlag(app, &opts->output);
      return [opts]() -> int {
        auto module = LoadModule(opts->file);
        if (!module.ok()) return ReportError(module.status());
        return WriteOutput(opts->output, PrintModule(**module));
      };
    });

}  // namespace
}  // namespace meshsplit::cli
