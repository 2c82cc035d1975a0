// `--shard SPEC.json` and `--mesh a=2,b=4` for the commands that take a
// module to partition (partition, verify, run): loads the module (HLO text or
// ONNX, import/load.h) and applies the sharding spec before propagation.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit::cli {

struct ShardFlags {
  std::string spec;  // --shard: sharding spec file (docs/shard_spec.md)
  std::string mesh;  // --mesh: overrides the spec's mesh
  bool keep_batch_norm = false;  // --keep-batch-norm
};

void AddShardFlags(CLI::App* app, ShardFlags* flags);

// LoadModule(path), then ApplyShardSpec when --shard is given. --mesh without
// --shard only sets the module's num_partitions to the mesh size. Batch-norm
// ops are expanded into reductions (transforms/batch_norm_expander.h) unless
// --keep-batch-norm, with a note on stderr.
StatusOr<std::unique_ptr<Module>> LoadShardedModule(const std::string& path,
                                                    const ShardFlags& flags);

}  // namespace meshsplit::cli
