// The compile pipeline (compile.h): the pass list for the options, then each
// pass from the table in turn, then the partitioner beside the input.
#include "compiler/compile.h"

#include "compiler/collective_check.h"

#include "compiler/partition_count.h"
#include "compiler/passes.h"
#include "import/load.h"
#include "ir/verifier.h"

namespace meshsplit {

StatusOr<std::optional<PipelineRequest>> RequestedPipeline(const CompileOptions& o) {
  std::optional<PipelineSpec> spec = o.pipeline;
  Mesh mesh;
  bool has_mesh = false;
  if (o.spec != nullptr) {
    if (!spec) spec = o.spec->pipeline;
    mesh = o.spec->mesh;
    has_mesh = o.spec->has_mesh;
  } else if (!o.spec_path.empty()) {
    MS_ASSIGN_OR_RETURN(ShardSpec file, ReadShardSpec(o.spec_path, o.mesh));
    if (!spec) spec = file.pipeline;
    mesh = file.mesh;
    has_mesh = file.has_mesh;
  } else if (!o.mesh.empty()) {
    auto parsed = Mesh::Parse(o.mesh);
    if (!parsed.ok()) return Status::Error("--mesh: " + parsed.status().message());
    mesh = std::move(*parsed);
    has_mesh = true;
  }
  if (!spec) return std::optional<PipelineRequest>();
  if (o.pipeline_mesh) {
    mesh = *o.pipeline_mesh;
    has_mesh = true;
  }
  if (!has_mesh)
    return Status::Error("pipelining needs a mesh with a stage axis: give --mesh "
                         "(e.g. --mesh " + spec->axis + "=4) or a spec with a mesh");
  return std::optional<PipelineRequest>(PipelineRequest{*spec, std::move(mesh)});
}

std::vector<std::string> PipelinePasses(const CompileOptions& o) {
  std::vector<std::string> passes;
  if (o.spec != nullptr || !o.spec_path.empty() || !o.mesh.empty())
    passes.push_back("apply-spec");
  if (o.verify_input) passes.push_back("verify");
  if (o.expand_batch_norm) passes.push_back("expand-batch-norm");
  if (o.until == CompileStage::kPrepared) return passes;
  StatusOr<std::optional<PipelineRequest>> pipeline = RequestedPipeline(o);
  // A request that cannot be read is the pipeline pass's error to report.
  const bool pipelines = !pipeline.ok() || pipeline->has_value();
  // An unrolled model becomes a scan before propagation sees it.
  if (pipelines) passes.push_back("roll-layers");
  if (o.propagate) passes.push_back("propagate");
  if (pipelines) {
    passes.push_back("pipeline");
    // The new loops and the per-stage region get their shardings.
    if (o.propagate) passes.push_back("propagate");
  }
  if (o.until == CompileStage::kPropagated) return passes;
  passes.push_back("partition");
  return passes;
}

Status Compile(Module& module, const CompileOptions& options, CompileResult* result) {
  CompileResult local;
  CompileResult& out = result != nullptr ? *result : local;
  auto fail = [&](const std::string& pass, Status status) {
    out.failed_pass = pass;
    return status;
  };
  if (options.num_partitions < 0)
    return Status::Error("the number of partitions must be at least 1 (got " +
                         std::to_string(options.num_partitions) + ")");
  out.declared_partitions = module.num_partitions();
  const std::vector<std::string> passes = PipelinePasses(options);
  // The partition count is settled once, after the spec (whose mesh sets it
  // and was checked against options.num_partitions) and before anything that
  // reads it: the options', else the header's or the mesh's, else the
  // shardings'.
  auto settle = [&] {
    if (options.num_partitions > 0) module.set_num_partitions(options.num_partitions);
    DerivePartitionCount(module, options.num_partitions);
  };
  if (passes.empty() || passes.front() != "apply-spec") settle();
  // Only a pipeline that partitions needs every tiled sharding to span the
  // count (propagation alone, like XLA's, reads a smaller tile assignment as
  // given). Checked before propagation, on the shardings the user wrote.
  bool covered = options.until != CompileStage::kPartitioned;
  for (const std::string& name : passes) {
    if ((name == "propagate" || name == "partition") && !covered) {
      const int64_t n = options.partition.num_partitions > 0 ? options.partition.num_partitions
                                                             : module.num_partitions();
      if (Status st = CheckShardingsCoverPartitions(module, n); !st.ok()) return fail(name, st);
      covered = true;
    }
    if (name == "partition") {
      // Built beside the input, which the report and verify still read.
      StatusOr<std::unique_ptr<Module>> partitioned = PartitionModule(module, options.partition);
      if (!partitioned.ok()) return fail(name, partitioned.status());
      if (options.verify_output) {
        Status valid = VerifyModule(**partitioned);
        if (!valid.ok())
          return fail(name, Status::Error("the partitioned module is ill-formed: " +
                                          valid.ToString()));
      }
      if (options.check_collectives) {
        CollectiveCheckResult check =
            CheckCollectives(**partitioned, &module, (*partitioned)->num_partitions());
        out.collectives = check.collectives;
        out.collectives_checked = check.checked;
        if (!check.ok()) return fail("check-collectives", check.ToStatus());
      }
      out.partitioned = std::move(partitioned).value();
      continue;
    }
    const PassInfo* info = FindPass(name);
    StatusOr<bool> changed = info->create(options, &out)->Run(module);
    if (!changed.ok()) return fail(name, changed.status());
    if (name == "apply-spec") settle();
  }
  return Status::Ok();
}

StatusOr<CompileResult> Compile(Module& module, const CompileOptions& options) {
  CompileResult result;
  MS_RETURN_IF_ERROR(Compile(module, options, &result));
  return result;
}

StatusOr<CompileResult> CompileFile(const std::string& path, const CompileOptions& options,
                                    std::unique_ptr<Module>* module) {
  MS_ASSIGN_OR_RETURN(*module, LoadModule(path, options.parse));
  return Compile(**module, options);
}

}  // namespace meshsplit
