// `meshsplit run FILE --inputs DIR --outputs DIR [--print]`: evaluates a
// module's entry computation on .npy inputs with the reference interpreter
// and writes its results as .npy files (see runtime/run_module.h for the
// file naming). Nothing is written when anything fails.
#include <cstdio>

#include "cli/command.h"
#include "cli/shard_flags.h"
#include "import/load.h"
#include "runtime/run_module.h"
#include "verify/mpi_runner.h"
#include "verify/run_spmd.h"
#include "text/parser.h"

namespace meshsplit::cli {
namespace {

struct RunFlags {
  std::string file;
  std::string inputs;
  std::string outputs;
  bool print = false;
  // SPMD (verify/run_spmd.h): partition to N and run on N virtual devices, or
  // run an already partitioned module (the count is shard.num_partitions).
  bool partitioned = false;
  bool no_propagate = false;
  std::string backend = "threads";
  int64_t max_while_iterations = kDefaultMaxWhileIterations;
  ShardFlags shard;
};

// Says on stderr where the outputs went, then prints them: whole with
// --print, else (no --outputs either) a short line each, so a run never
// ends silently. Outputs are named as the model names them (ONNX graph
// outputs, import/load.h EntryOutputNames), else out<i>.
int ShowOutputs(const RunFlags& flags, const std::vector<std::string>& names,
                const std::vector<std::string>& files, const Literal& result) {
  if (!files.empty()) {
    std::string list;
    for (size_t i = 0; i < files.size() && i < 4; ++i) list += (i ? ", " : "") + files[i];
    if (files.size() > 4) list += ", ...";
    std::fprintf(stderr, "note: wrote %zu outputs to %s (%s)\n", files.size(),
                 flags.outputs.c_str(), list.c_str());
  }
  std::vector<const Literal*> outs = OutputArrays(result);
  if (flags.print || flags.outputs.empty()) {
    const size_t max_chars = flags.print ? 2000 : 120;
    for (size_t i = 0; i < outs.size(); ++i) {
      std::string label = names.size() == outs.size() ? names[i] : "out" + std::to_string(i);
      std::printf("%s = %s\n", label.c_str(), FormatOutput(*outs[i], max_chars).c_str());
    }
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

// `--backend mpi` (one process per partition under mpirun): rank 0 reads
// the inputs and sends each rank its shard; every rank runs its partition;
// rank 0 alone writes/prints.
int RunCommandMpi(const RunFlags& flags, Module& m) {
  if (m.entry() == nullptr)
    return ReportError(Status::Error(flags.file + ": module has no entry computation"));
  std::unique_ptr<Computation> global_sig;
  if (flags.partitioned) global_sig = GlobalSignature(m);
  StatusOr<std::vector<Literal>> inputs = std::vector<Literal>();
  if (!MpiIsRoot()) {
    // Nothing to read: the shards come from rank 0.
  } else if (flags.inputs.empty()) {
    if (m.entry()->parameter_count() > 0)
      inputs = Status::Error("the entry computation takes " +
                             std::to_string(m.entry()->parameter_count()) +
                             " parameters; pass --inputs DIR");
  } else {
    inputs = ReadEntryInputs(global_sig ? *global_sig : *m.entry(), flags.inputs);
  }
  SpmdRunRequest request{m.num_partitions(),
                         flags.partitioned, !flags.no_propagate, flags.backend,
                         CompileOptionsFor(flags.shard).partition};
  StatusOr<std::optional<PipelineRequest>> pipeline =
      RequestedPipeline(CompileOptionsFor(flags.shard));
  if (!pipeline.ok()) return ReportError(pipeline.status());
  request.pipeline = *pipeline;
  request.max_while_iterations = flags.max_while_iterations;
  StatusOr<MpiRunOutcome> out = RunModuleOnMpi(m, std::move(inputs), request);
  if (!out.ok()) return ReportError(out.status());
  // Only now, with every rank agreed on success, does rank 0 write (each
  // file to a temporary name, then renamed); a failed write fails every rank.
  Status written = Status::Ok();
  const std::vector<std::string> names = EntryOutputNames(m);
  std::vector<std::string> files;
  if (out->is_root && !flags.outputs.empty())
    written = WriteOutputs(out->result, flags.outputs, names, &files);
  written = AgreeAcrossRanks(written);
  if (!written.ok()) return ReportError(written);
  if (!out->is_root) return 0;
  return ShowOutputs(flags, names, files, out->result);
}

int RunCommand(const RunFlags& flags) {
  StatusOr<std::unique_ptr<Module>> module = LoadShardedModule(flags.file, flags.shard);
  if (!module.ok()) return ReportError(module.status());
  Module& m = **module;
  if (flags.backend == "mpi") return RunCommandMpi(flags, m);
  StatusOr<std::optional<PipelineRequest>> pipeline =
      RequestedPipeline(CompileOptionsFor(flags.shard));
  if (!pipeline.ok()) return ReportError(pipeline.status());
  const bool spmd = flags.shard.num_partitions > 1 || flags.partitioned ||
                    (!flags.shard.spec.empty() && m.num_partitions() > 1) ||
                    pipeline->has_value();
  std::unique_ptr<Computation> global_sig;
  if (spmd && flags.partitioned && m.entry() != nullptr) global_sig = GlobalSignature(m);
  if (m.entry() == nullptr) return ReportError(Status::Error(flags.file + ": module has no entry computation"));
  std::vector<Literal> inputs;
  if (flags.inputs.empty()) {
    if (m.entry()->parameter_count() > 0)
      return ReportError(Status::Error("the entry computation takes " +
                                       std::to_string(m.entry()->parameter_count()) +
                                       " parameters; pass --inputs DIR"));
  } else {
    StatusOr<std::vector<Literal>> in =
        ReadEntryInputs(global_sig ? *global_sig : *m.entry(), flags.inputs);
    if (!in.ok()) return ReportError(in.status());
    inputs = std::move(in).value();
  }
  RunOptions options;
  options.context.max_while_iterations = flags.max_while_iterations;
  SpmdRunRequest spmd_request{m.num_partitions(),
                              flags.partitioned, !flags.no_propagate, flags.backend,
                              CompileOptionsFor(flags.shard).partition};
  spmd_request.pipeline = *pipeline;
  spmd_request.max_while_iterations = flags.max_while_iterations;
  StatusOr<Literal> result = spmd ? RunModuleOnDevices(m, std::move(inputs), spmd_request)
                                  : RunEntry(m, std::move(inputs), options);
  if (!result.ok()) return ReportError(result.status());
  const std::vector<std::string> names = EntryOutputNames(m);
  std::vector<std::string> files;
  if (!flags.outputs.empty()) {
    Status s = WriteOutputs(*result, flags.outputs, names, &files);
    if (!s.ok()) return ReportError(s);
  }
  return ShowOutputs(flags, names, files, *result);
}

const bool kRegistered = RegisterCommand(
    "run", "Evaluate a module on .npy inputs with the reference interpreter",
    [](CLI::App* app) -> std::function<int()> {
      auto flags = std::make_shared<RunFlags>();
      app->add_option("FILE", flags->file, "HLO text file ('-' for stdin)")->required();
      app->add_option("--inputs", flags->inputs,
                      "Directory with <parameter name>.npy or param<i>.npy per entry parameter");
      app->add_option("--outputs", flags->outputs, "Directory to write one .npy per output into (named after an ONNX model's outputs, else out<i>.npy)");
      app->add_flag("--print", flags->print, "Print each output's values to stdout");
      AddNumPartitionsFlag(app, &flags->shard.num_partitions,
                           "Partition to N and run on N virtual devices (full-shape .npy "
                           "in/out)");
      app->add_flag("--partitioned", flags->partitioned,
                    "FILE is already partitioned (header num_partitions); run it on that many "
                    "devices");
      app->add_flag("--no-propagate", flags->no_propagate,
                    "With --num-partitions: skip sharding propagation");
      app->add_option("--backend", flags->backend, "Collectives backend: threads, or mpi (under mpirun, one rank per partition)");
      app->add_option("--max-while-iterations", flags->max_while_iterations,
                      "Iterations one execution of a while loop may run before the run stops "
                      "with an error naming the loop (default " +
                          std::to_string(kDefaultMaxWhileIterations) + "; 0: no limit)")
          ->check(CLI::NonNegativeNumber);
      AddShardFlags(app, &flags->shard);
      return [flags]() { return RunCommand(*flags); };
    });

}  // namespace
}  // namespace meshsplit::cli
