// One line per pass: name, summary, factory. Kept in pipeline order.
#include "compiler/passes.h"

#include <iostream>

#include "compiler/compile.h"
#include "import/shard_spec.h"
#include "ir/verifier.h"
#include "partitioner/partitioner.h"
#include "pipeline/layer_loop.h"
#include "pipeline/roll_layers.h"
#include "propagation/propagation.h"
#include "sharding/mesh.h"
#include "transforms/batch_norm_expander.h"
#include "transforms/shrink_batch.h"
#include "transforms/shrink_shapes.h"

namespace meshsplit {
namespace {

// A pass whose work is one function of the module; `name` is the table's.
class FunctionPass : public Pass {
 public:
  FunctionPass(std::string name, std::function<StatusOr<bool>(Module&)> run)
      : name_(std::move(name)), run_(std::move(run)) {}
  std::string_view name() const override { return name_; }
  StatusOr<bool> Run(Module& module) override { return run_(module); }

 private:
  std::string name_;
  std::function<StatusOr<bool>(Module&)> run_;
};

StatusOr<bool> VerifyIr(Module& module) {
  MS_RETURN_IF_ERROR(VerifyModule(module));
  return false;
}

// The spec in memory, else the spec file (whose rules that match nothing are
// warned about), else --mesh alone, which only sets the partition count. The
// mesh's size is the partition count: a different options.num_partitions is
// an error, not a silent choice of one of them.
StatusOr<bool> ApplySpec(Module& module, const CompileOptions& o, CompileResult* result) {
  Mesh mesh;
  std::string from;
  if (o.spec != nullptr) {
    MS_RETURN_IF_ERROR(ApplyShardSpec(module, *o.spec).status());
    mesh = o.spec->mesh;
    from = "the spec's mesh";
  } else if (!o.spec_path.empty()) {
    MS_ASSIGN_OR_RETURN(mesh, ApplyShardSpec(module, o.spec_path, o.mesh));
    from = o.mesh.empty() ? "the mesh of " + o.spec_path : "--mesh";
  } else if (!o.mesh.empty()) {
    auto parsed = Mesh::Parse(o.mesh);
    if (!parsed.ok()) return Status::Error("--mesh: " + parsed.status().message());
    mesh = std::move(parsed).value();
    module.set_num_partitions(mesh.num_devices());
    from = "--mesh";
  } else {
    return false;
  }
  if (o.num_partitions > 0 && o.num_partitions != mesh.num_devices())
    return Status::Error("--num-partitions " + std::to_string(o.num_partitions) +
                         " differs from the " + std::to_string(mesh.num_devices()) +
                         " devices of " + from + " (" + mesh.ToString() +
                         "); give a mesh of that many devices, or leave --num-partitions out");
  if (result != nullptr) result->mesh = mesh.ToString();
  return true;
}

StatusOr<bool> ExpandBatchNormOps(Module& module) {
  MS_ASSIGN_OR_RETURN(int64_t expanded, ExpandBatchNorm(module));
  if (expanded > 0)
    std::cerr << "note: expanded " << expanded
              << " batch-norm ops into reductions and elementwise ops (--keep-batch-norm "
                 "keeps them)\n";
  return expanded > 0;
}

StatusOr<bool> Propagate(Module& module, const CompileOptions& o, CompileResult* result) {
  PropagationReport local;
  PropagationReport& report = result != nullptr ? result->propagation : local;
  MS_ASSIGN_OR_RETURN(bool changed, PropagateShardings(module, o.propagation, &report));
  if (o.print_propagation_warnings)
    for (const std::string& w : report.warnings) std::cerr << "warning: " << w << "\n";
  return changed;
}

// Rolls unrolled layers into a scan unless the entry already has a layer
// loop. The module as it was is kept as verify's one-device reference, so
// that verify proves the rolled (and pipelined) program equal to it.
StatusOr<bool> RollLayersPass(Module& module, CompileResult* result) {
  if (!FindLayerLoops(*module.entry(), nullptr).empty()) return false;
  std::unique_ptr<Module> before = module.Clone();
  MS_ASSIGN_OR_RETURN(std::optional<RollLayersReport> rolled, RollLayers(module));
  if (!rolled) return false;
  std::cerr << "note: rolled " << rolled->layers << " layers of " << rolled->pattern << " ("
            << rolled->weights << " weights, " << rolled->layer_instructions
            << " instructions each) into the scan %" << rolled->loop;
  if (!rolled->backward_loop.empty())
    std::cerr << ", and their backward pass (" << rolled->backward_layer_instructions
              << " instructions each) into the reverse scan %" << rolled->backward_loop;
  std::cerr << "\n";
  if (result != nullptr && result->unpipelined == nullptr) result->unpipelined = std::move(before);
  return true;
}

StatusOr<bool> PipelinePass(Module& module, const CompileOptions& o, CompileResult* result) {
  MS_ASSIGN_OR_RETURN(std::optional<PipelineRequest> request, RequestedPipeline(o));
  if (!request) return false;
  std::unique_ptr<Module> before = module.Clone();
  PipelineRunOptions run;
  run.fill_nan = o.pipeline_fill_nan;
  run.skip_idle = o.pipeline_skip_idle;
  MS_ASSIGN_OR_RETURN(PipelineReport report,
                      PipelineLayerLoops(module, request->mesh, request->spec, run));
  if (result != nullptr) {
    result->pipeline = std::move(report);
    // roll-layers may have kept the module before it, the true reference.
    if (result->unpipelined == nullptr) result->unpipelined = std::move(before);
  }
  return true;
}

StatusOr<bool> ShrinkBatchPass(Module& module, const CompileOptions& o) {
  MS_ASSIGN_OR_RETURN(ShrinkBatchReport report, ShrinkBatch(module, o.shrink_batch));
  return report.instructions_shrunk > 0;
}

StatusOr<bool> ShrinkShapesPass(Module& module, const CompileOptions& o) {
  MS_ASSIGN_OR_RETURN(ShrinkShapesReport report, ShrinkShapes(module, o.shrink_shapes));
  return report.dims_shrunk > 0;
}

template <typename F>
PassInfo Entry(std::string name, std::string summary, F run) {
  PassInfo info{std::move(name), std::move(summary), nullptr};
  info.create = [pass_name = info.name, run](const CompileOptions& options,
                                             CompileResult* result) -> std::unique_ptr<Pass> {
    return std::make_unique<FunctionPass>(
        pass_name, [&options, result, run](Module& m) { return run(m, options, result); });
  };
  return info;
}

}  // namespace

const std::vector<PassInfo>& PassTable() {
  using O = const CompileOptions&;
  using R = CompileResult*;
  static const std::vector<PassInfo> table = {
      Entry("apply-spec", "apply the sharding spec (--shard) or mesh (--mesh) to the module",
            [](Module& m, O o, R r) { return ApplySpec(m, o, r); }),
      Entry("verify", "check shapes, operands and shardings (changes nothing)",
            [](Module& m, O, R) { return VerifyIr(m); }),
      Entry("expand-batch-norm", "rewrite batch-norm ops into reductions and elementwise ops",
            [](Module& m, O, R) { return ExpandBatchNormOps(m); }),
      Entry("shrink-batch", "make the batch dim of the named parameters smaller (shrink-batch)",
            [](Module& m, O o, R) { return ShrinkBatchPass(m, o); }),
      Entry("shrink-shapes", "make large dims small, keeping shardings and tile divisibility",
            [](Module& m, O o, R) { return ShrinkShapesPass(m, o); }),
      Entry("roll-layers", "roll unrolled identical layers into a scan over stacked weights",
            [](Module& m, O, R r) { return RollLayersPass(m, r); }),
      Entry("propagate", "infer a sharding for every instruction (SPMD mode)",
            [](Module& m, O o, R r) { return Propagate(m, o, r); }),
      Entry("pipeline", "split the layer loops over the spec's stage axis (docs/pipeline.md)",
            [](Module& m, O o, R r) { return PipelinePass(m, o, r); }),
      Entry("partition", "partition a sharded module into one SPMD program",
            [](Module& m, O o, R) { return PartitionPass(o.partition).Run(m); }),
  };
  return table;
}

const PassInfo* FindPass(const std::string& name) {
  for (const PassInfo& p : PassTable())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace meshsplit
