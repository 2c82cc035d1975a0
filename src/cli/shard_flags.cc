// --shard / --mesh handling shared by partition, verify and run.
#include "cli/shard_flags.h"

#include "import/load.h"
#include "import/shard_spec.h"
#include "partitioner/partitioner.h"
#include <iostream>

#include "sharding/mesh.h"
#include "transforms/batch_norm_expander.h"

namespace meshsplit::cli {

void AddShardFlags(CLI::App* app, ShardFlags* flags) {
  app->add_option("--shard", flags->spec,
                  "Sharding spec JSON: mesh + name-glob rules applied before propagation");
  app->add_option("--mesh", flags->mesh,
                  "Device mesh 'data=2,model=4' (overrides the spec's mesh)");
  app->add_flag("--keep-batch-norm", flags->keep_batch_norm,
                "Keep batch-norm ops fused (they are then replicated: no rule partitions them)");
  // Partitioner option shared by every command that partitions; it sets the
  // process-wide default so that verify's and report's own pipelines see it.
  app->add_option_function<int64_t>(
      "--windowed-einsum-threshold",
      [](const int64_t& bytes) { DefaultWindowedEinsumThresholdBytes() = bytes; },
      "Windowed einsum: loop over shards with collective-permute instead of "
      "all-gathering a dot operand bigger than BYTES per partition (default: off)");
  app->add_option_function<int64_t>(
      "--windowed-einsum-max-iterations",
      [](const int64_t& n) { DefaultMaxWindowedEinsumIterations() = n; },
      "Windowed einsum: no loop of more than N iterations (default 32)");
  app->add_flag_function(
      "--windowed-einsum-bidirectional",
      [](int64_t count) { DefaultBidirectionalWindowedEinsum() = count > 0; },
      "Windowed einsum: pass shards both ways around the ring (half the iterations)");
  app->add_flag_function(
      "--windowed-einsum-reduce-scatter",
      [](int64_t count) { DefaultWindowedEinsumReduceScatter() = count > 0; },
      "Windowed einsum: also loop over result blocks instead of reduce-scattering partial sums");
}

StatusOr<std::unique_ptr<Module>> LoadShardedModule(const std::string& path,
                                                    const ShardFlags& flags) {
  MS_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, LoadModule(path));
  if (!flags.spec.empty()) {
    MS_RETURN_IF_ERROR(ApplyShardSpec(*module, flags.spec, flags.mesh));
  } else if (!flags.mesh.empty()) {
    auto mesh = Mesh::Parse(flags.mesh);
    if (!mesh.ok()) return Status::Error("--mesh: " + mesh.status().message());
    module->set_num_partitions(mesh->num_devices());
  }
  if (!flags.keep_batch_norm) {
    // Neither propagation nor the partitioner has a rule for the fused ops;
    // as reductions a batch-sharded network stays sharded through them.
    MS_ASSIGN_OR_RETURN(int64_t expanded, ExpandBatchNorm(*module));
    if (expanded > 0)
      std::cerr << "note: expanded " << expanded
                << " batch-norm ops into reductions and elementwise ops (--keep-batch-norm "
                   "keeps them)\n";
  }
  return module;
}

}  // namespace meshsplit::cli
