// `meshsplit partition FILE [--num-partitions N] [--no-propagate] [--strict]`:
// parses a module, completes its shardings (sharding propagation, when that
// module is built in), partitions it and prints the SPMD program.
#include <iostream>

#include "cli/command.h"
#include "cli/shard_flags.h"
#include "partitioner/partitioner.h"
#include "text/parser.h"
#include "text/printer.h"

#if __has_include("propagation/propagation.h")
#include "propagation/propagation.h"
#define MESHSPLIT_HAVE_PROPAGATION 1
#endif

namespace meshsplit::cli {
namespace {

struct PartitionCliOptions {
  std::string file;
  int64_t num_partitions = 0;
  bool no_propagate = false;
  bool strict = false;
  ShardFlags shard;
};

[[maybe_unused]] const Status& StatusOf(const Status& s) { return s; }
template <typename T>
[[maybe_unused]] const Status& StatusOf(const StatusOr<T>& s) {
  return s.status();
}

int RunPartition(const PartitionCliOptions& opts) {
  auto module_or = LoadShardedModule(opts.file, opts.shard);
  if (!module_or.ok()) return ReportError(module_or.status());
  Module& module = **module_or;
  if (opts.num_partitions > 0) module.set_num_partitions(opts.num_partitions);
  if (!opts.no_propagate) {
#ifdef MESHSPLIT_HAVE_PROPAGATION
    PropagationOptions popts;
    auto result = PropagateShardings(module, popts);
    if (!StatusOf(result).ok()) return ReportError(StatusOf(result));
#else
    std::cerr << "warning: sharding propagation is not built in; partitioning "
                 "with the annotations as given (as --no-propagate)\n";
#endif
  }
  PartitionOptions options;
  options.num_partitions = opts.num_partitions;
  options.strict = opts.strict;
  auto out = PartitionModule(module, options);
  if (!out.ok()) return ReportError(out.status());
  std::cout << PrintModule(**out);
  return 0;
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
      AddShardFlags(app, &opts->shard);
      return [opts]() { return RunPartition(*opts); };
    });

}  // namespace
}  // namespace meshsplit::cli
