// The compile pipeline (compile.h): the pass list for the options, then each
// pass from the table in turn, then the partitioner beside the input.
#include "compiler/compile.h"

#include "compiler/passes.h"
#include "import/load.h"
#include "import/shardy_input.h"
#include "ir/verifier.h"

namespace meshsplit {

std::vector<std::string> PipelinePasses(const CompileOptions& o) {
  std::vector<std::string> passes;
  if (o.spec != nullptr || !o.spec_path.empty() || !o.mesh.empty())
    passes.push_back("apply-spec");
  if (o.verify_input) passes.push_back("verify");
  if (o.expand_batch_norm) passes.push_back("expand-batch-norm");
  if (o.until == CompileStage::kPrepared) return passes;
  if (o.propagate) passes.push_back("propagate");
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
  for (const std::string& name : PipelinePasses(options)) {
    if (name == "propagate" && options.num_partitions > 0)
      module.set_num_partitions(options.num_partitions);
    if (name == "partition") {
      // Built beside the input, which the report and verify still read.
      if (options.num_partitions > 0) module.set_num_partitions(options.num_partitions);
      StatusOr<std::unique_ptr<Module>> partitioned = PartitionModule(module, options.partition);
      if (!partitioned.ok()) return fail(name, partitioned.status());
      if (options.verify_output) {
        Status valid = VerifyModule(**partitioned);
        if (!valid.ok())
          return fail(name, Status::Error("the partitioned module is ill-formed: " +
                                          valid.ToString()));
      }
      out.partitioned = std::move(partitioned).value();
      continue;
    }
    const PassInfo* info = FindPass(name);
    StatusOr<bool> changed = info->create(options, &out)->Run(module);
    if (!changed.ok()) return fail(name, changed.status());
  }
  if (options.until != CompileStage::kPartitioned && options.num_partitions > 0)
    module.set_num_partitions(options.num_partitions);
  return Status::Ok();
}

StatusOr<CompileResult> Compile(Module& module, const CompileOptions& options) {
  CompileResult result;
  MS_RETURN_IF_ERROR(Compile(module, options, &result));
  return result;
}

StatusOr<CompileResult> CompileFile(const std::string& path, const CompileOptions& options,
                                    std::unique_ptr<Module>* module) {
  MS_ASSIGN_OR_RETURN(*module, LoadModule(path));
  MS_RETURN_IF_ERROR(
      CheckShardyInput(**module, options.propagation.strict || options.partition.strict));
  return Compile(**module, options);
}

}  // namespace meshsplit
