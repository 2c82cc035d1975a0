// `meshsplit run FILE --inputs DIR --outputs DIR [--print]`: evaluates a
// module's entry computation on .npy inputs with the reference interpreter
// and writes its results as .npy files (see runtime/run_module.h for the
// file naming). Nothing is written when anything fails.
#include <cstdio>

#include "cli/command.h"
#include "runtime/run_module.h"
#include "text/parser.h"

namespace meshsplit::cli {
namespace {

struct RunFlags {
  std::string file;
  std::string inputs;
  std::string outputs;
  bool print = false;
};

int RunCommand(const RunFlags& flags) {
  StatusOr<std::unique_ptr<Module>> module = ParseModuleFile(flags.file);
  if (!module.ok()) return ReportError(module.status());
  const Module& m = **module;
  if (m.entry() == nullptr) return ReportError(Status::Error(flags.file + ": module has no entry computation"));
  std::vector<Literal> inputs;
  if (flags.inputs.empty()) {
    if (m.entry()->parameter_count() > 0)
      return ReportError(Status::Error("the entry computation takes " +
                                       std::to_string(m.entry()->parameter_count()) +
                                       " parameters; pass --inputs DIR"));
  } else {
    StatusOr<std::vector<Literal>> in = ReadEntryInputs(*m.entry(), flags.inputs);
    if (!in.ok()) return ReportError(in.status());
    inputs = std::move(in).value();
  }
  RunOptions options;
  StatusOr<Literal> result = RunEntry(m, std::move(inputs), options);
  if (!result.ok()) return ReportError(result.status());
  if (!flags.outputs.empty()) {
    Status s = WriteOutputs(*result, flags.outputs);
    if (!s.ok()) return ReportError(s);
  }
  if (flags.print) {
    std::vector<const Literal*> outs = OutputArrays(*result);
    for (size_t i = 0; i < outs.size(); ++i)
      std::printf("out%zu = %s\n", i, FormatOutput(*outs[i]).c_str());
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const bool kRegistered = RegisterCommand(
    "run", "Evaluate a module on .npy inputs with the reference interpreter",
    [](CLI::App* app) -> std::function<int()> {
      auto flags = std::make_shared<RunFlags>();
      app->add_option("FILE", flags->file, "HLO text file ('-' for stdin)")->required();
      app->add_option("--inputs", flags->inputs,
                      "Directory with <parameter name>.npy or param<i>.npy per entry parameter");
      app->add_option("--outputs", flags->outputs, "Directory to write out<i>.npy into");
      app->add_flag("--print", flags->print, "Print each output's values to stdout");
      return [flags]() { return RunCommand(*flags); };
    });

}  // namespace
}  // namespace meshsplit::cli
