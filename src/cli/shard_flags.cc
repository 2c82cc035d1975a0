// --num-partitions / --shard / --mesh / --windowed-einsum-* handling shared
// by the commands that partition.
#include "cli/shard_flags.h"

#include "cli/command.h"
#include "import/load.h"
#include "import/pipeline_spec.h"

namespace meshsplit::cli {

void AddShardFlags(CLI::App* app, ShardFlags* flags) {
  app->add_option("--shard", flags->spec,
                  "Sharding spec JSON: mesh + name-glob rules applied before propagation");
  app->add_option("--mesh", flags->mesh,
                  "Device mesh 'data=2,model=4' (overrides the spec's mesh)");
  app->add_flag("--keep-batch-norm", flags->keep_batch_norm,
                "Keep batch-norm ops fused (they are then replicated: no rule partitions them)");
  app->add_option("--pipeline", flags->pipeline,
                  "Pipeline the layer loops: axis=stage,microbatches=8[,schedule=gpipe]"
                  "[,batch_dim=0][,loops=a;b] (docs/pipeline.md; overrides the spec's key)")
      ->check([](const std::string& text) {
        auto parsed = ParsePipelineFlag(text);
        return parsed.ok() ? std::string() : parsed.status().message();
      });
  AddXlaStrictFlag(app, &flags->parse);
  PartitionOptions& w = flags->windowed_einsum;
  app->add_option("--windowed-einsum-threshold", w.windowed_einsum_threshold_bytes,
                  "Windowed einsum: loop over shards with collective-permute instead of "
                  "all-gathering a dot operand bigger than BYTES per partition (default: off)");
  app->add_option("--windowed-einsum-max-iterations", w.max_windowed_einsum_iterations,
                  "Windowed einsum: no loop of more than N iterations (default 32)");
  app->add_flag("--windowed-einsum-bidirectional", w.bidirectional_windowed_einsum,
                "Windowed einsum: pass shards both ways around the ring (half the iterations)");
  app->add_flag("--windowed-einsum-reduce-scatter", w.windowed_einsum_reduce_scatter,
                "Windowed einsum: also loop over result blocks instead of reduce-scattering "
                "partial sums");
}

void AddNumPartitionsFlag(CLI::App* app, int64_t* n, const std::string& help) {
  app->add_option("--num-partitions", *n, help)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            int64_t v = 0;
            if (!CLI::detail::lexical_cast(text, v)) return "not an integer: " + text;
            return v >= 1 ? "" : "must be at least 1 (got " + text + ")";
          },
          "N >= 1"));
}

CompileOptions CompileOptionsFor(const ShardFlags& flags) {
  CompileOptions options;
  options.num_partitions = flags.num_partitions;
  options.partition.num_partitions = flags.num_partitions;
  options.spec_path = flags.spec;
  options.mesh = flags.mesh;
  options.expand_batch_norm = !flags.keep_batch_norm;
  if (!flags.pipeline.empty()) {
    auto parsed = ParsePipelineFlag(flags.pipeline);  // checked when the flag was read
    if (parsed.ok()) options.pipeline = *parsed;
  }
  options.parse = flags.parse;
  const PartitionOptions& w = flags.windowed_einsum;
  options.partition.windowed_einsum_threshold_bytes = w.windowed_einsum_threshold_bytes;
  options.partition.max_windowed_einsum_iterations = w.max_windowed_einsum_iterations;
  options.partition.bidirectional_windowed_einsum = w.bidirectional_windowed_einsum;
  options.partition.windowed_einsum_reduce_scatter = w.windowed_einsum_reduce_scatter;
  return options;
}

StatusOr<std::unique_ptr<Module>> LoadShardedModule(const std::string& path,
                                                    const ShardFlags& flags) {
  CompileOptions options = CompileOptionsFor(flags);
  options.until = CompileStage::kPrepared;
  std::unique_ptr<Module> module;
  MS_RETURN_IF_ERROR(CompileFile(path, options, &module).status());
  return module;
}

}  // namespace meshsplit::cli
