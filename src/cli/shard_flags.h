// The flags of every command that partitions (partition, verify, run, report,
// autoshard, shrink-shapes): `--shard SPEC.json`, `--mesh a=2,b=4`,
// `--keep-batch-norm`, `--xla-strict` and the windowed-einsum options, collected into the
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
  // --num-partitions (0: not given), declared by AddNumPartitionsFlag with
  // the command's own help text.
  int64_t num_partitions = 0;
  std::string spec;  // --shard: sharding spec file (docs/shard_spec.md)
  std::string mesh;  // --mesh: overrides the spec's mesh
  bool keep_batch_norm = false;  // --keep-batch-norm
  std::string pipeline;  // --pipeline axis=stage,microbatches=8,... (docs/pipeline.md)
  // --windowed-einsum-*: the partitioner's windowed-einsum options.
  PartitionOptions windowed_einsum;
  ParseOptions parse;  // --xla-strict
};

void AddShardFlags(CLI::App* app, ShardFlags* flags);

// Declares `--num-partitions N` into `*n`. N must be at least 1: 0 or a
// negative count is a usage error (exit 2), never "not given".
void AddNumPartitionsFlag(CLI::App* app, int64_t* n, const std::string& help);

// The compile options the flags ask for: the partition count, the spec or
// mesh to apply, batch-norm expansion unless --keep-batch-norm, and the
// windowed-einsum options; every stage on, nothing else set. Compile()
// settles the partition count from them (compiler/partition_count.h).
CompileOptions CompileOptionsFor(const ShardFlags& flags);

// Loads the module and runs the pipeline's front passes (apply-spec,
// expand-batch-norm) on it, as CompileOptionsFor(flags) asks; the module
// comes back with its partition count settled.
StatusOr<std::unique_ptr<Module>> LoadShardedModule(const std::string& path,
                                                    const ShardFlags& flags);

}  // namespace meshsplit::cli
