// `meshsplit partition FILE [--num-partitions N] [--no-propagate] [--strict]`:
// loads a module, completes its shardings (sharding propagation), partitions
// it and prints the SPMD program (the compile pipeline, compiler/compile.h).
#include <iostream>

#include "cli/command.h"
#include "cli/shard_flags.h"
#include "compiler/compile.h"
#include "text/printer.h"

namespace meshsplit::cli {
namespace {

struct PartitionCliOptions {
  std::string file;
  int64_t num_partitions = 0;
  bool no_propagate = false;
  bool strict = false;
  std::string output;
  ShardFlags shard;
};

int RunPartition(const PartitionCliOptions& opts) {
  CompileOptions options = CompileOptionsFor(opts.shard);
  options.num_partitions = opts.num_partitions;
  options.propagate = !opts.no_propagate;
  options.partition.num_partitions = opts.num_partitions;
  options.partition.strict = opts.strict;
  std::unique_ptr<Module> module;
  auto compiled = CompileFile(opts.file, options, &module);
  if (!compiled.ok()) return ReportError(compiled.status());
  return WriteOutput(opts.output, PrintModule(*compiled->partitioned));
}

const bool registered = RegisterCommand(
    "partition", "partition a sharded module into one SPMD program and print it",
    [](CLI::App* app) {
      auto opts = std::make_shared<PartitionCliOptions>();
      app->add_option("file", opts->file, "HLO file ('-' for stdin)")->required();
      app->add_option("--num-partitions", opts->num_partitions,
                      "number of partitions (default: the module header's)");
      app->add_flag("--no-propagate", opts->no_propagate,
                    "partition with the annotations as given (unannotated = replicated)");
      app->add_flag("--strict", opts->strict,
                    "fail instead of replicating ops that have no partitioning rule");
      AddOutputFlag(app, &opts->output);
      AddShardFlags(app, &opts->shard);
      return [opts]() { return RunPartition(*opts); };
    });

}  // namespace
}  // namespace meshsplit::cli
