// The flags of every command that partitions (partition, verify, run, report,
// autoshard, shrink-shapes): `--shard SPEC.json`, `--mesh a=2,b=4`,
// `--keep-batch-norm` and the windowed-einsum options, collected into the
// compile pipeline's options (compiler/compile.h).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "compiler/compile.h"
#include "ir/module.h"
#include "partitioner/partitioner.h"
#include "support/status.h"

namespace meshsplit::cli {

struct ShardFlags {
  std::string spec;  // --shard: sharding spec file (docs/shard_spec.md)
  std::string mesh;  // --mesh: overrides the spec's mesh
  bool keep_batch_norm = false;  // --keep-batch-norm
  // --windowed-einsum-*: the partitioner's windowed-einsum options.
  PartitionOptions windowed_einsum;
};

void AddShardFlags(CLI::App* app, ShardFlags* flags);

// The compile options the flags ask for: the spec or mesh to apply, batch-norm
// expansion unless --keep-batch-norm, and the windowed-einsum options; every
// stage on, nothing else set.
CompileOptions CompileOptionsFor(const ShardFlags& flags);

// Loads the module and runs the pipeline's front passes (apply-spec,
// expand-batch-norm) on it, as CompileOptionsFor(flags) asks.
StatusOr<std::unique_ptr<Module>> LoadShardedModule(const std::string& path,
                                                    const ShardFlags& flags);

}  // namespace meshsplit::cli
