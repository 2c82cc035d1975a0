// `meshsplit partition FILE [--num-partitions N] [--no-propagate] [--strict]
// [--check-collectives]`:
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
  bool no_propagate = false;
  bool strict = false;
  bool check_collectives = false;
  std::string output;
  ShardFlags shard;
};

int RunPartition(const PartitionCliOptions& opts) {
  CompileOptions options = CompileOptionsFor(opts.shard);
  options.propagate = !opts.no_propagate;
  options.partition.strict = opts.strict;
  options.check_collectives = opts.check_collectives;
  // A program the IR verifier refuses is a partitioner bug: say so rather
  // than print it (verifying costs little next to partitioning).
  options.verify_output = true;
  std::unique_ptr<Module> module;
  auto compiled = CompileFile(opts.file, options, &module);
  if (!compiled.ok()) return ReportError(compiled.status());
  if (opts.check_collectives)
    std::cerr << "collective check: " << compiled->collectives << " collectives, "
              << compiled->collectives_checked << " compared with a sharding, all agree\n";
  return WriteOutput(opts.output, PrintModule(*compiled->partitioned));
}

const bool registered = RegisterCommand(
    "partition", "partition a sharded module into one SPMD program and print it",
    [](CLI::App* app) {
      auto opts = std::make_shared<PartitionCliOptions>();
      app->add_option("file", opts->file, "HLO file ('-' for stdin)")->required();
      AddNumPartitionsFlag(app, &opts->shard.num_partitions,
                           "number of partitions (default: the mesh's, else the module "
                           "header's, else the devices its shardings name)");
      app->add_flag("--no-propagate", opts->no_propagate,
                    "partition with the annotations as given (unannotated = replicated)");
      app->add_flag("--strict", opts->strict,
                    "fail instead of replicating ops that have no partitioning rule");
      app->add_flag("--check-collectives", opts->check_collectives,
                    "fail when a collective's groups disagree with the shardings of the "
                    "values it serves (verify always checks)");
      AddOutputFlag(app, &opts->output);
      AddShardFlags(app, &opts->shard);
      return [opts]() { return RunPartition(*opts); };
    });

}  // namespace
}  // namespace meshsplit::cli
