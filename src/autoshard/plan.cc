// Planner: the lift, decision space and evaluator of one search (plan.h).
#include "autoshard/plan.h"

namespace meshsplit::autoshard {

StatusOr<std::unique_ptr<Planner>> Planner::Create(Module& module, const Mesh& mesh,
                                                   PlanOptions options) {
  // Lift the module's own shardings onto the mesh first (no rules), so the
  // decisions see them as the mesh_splits they become.
  ShardSpec lift;
  lift.mesh = mesh;
  lift.has_mesh = true;
  lift.existing_axes = options.existing_axes;
  MS_RETURN_IF_ERROR(ApplyShardSpec(module, lift).status());
  if (options.pipeline) {
    if (!mesh.AxisIndex(options.pipeline->axis))
      return Status::Error("the pipeline's stage axis '" + options.pipeline->axis +
                           "' is not an axis of the mesh " + mesh.ToString());
    options.space.excluded_axes.push_back(options.pipeline->axis);
  }
  MS_ASSIGN_OR_RETURN(DecisionSpace space, BuildDecisionSpace(module, mesh, options.space));
  std::unique_ptr<Planner> p(new Planner(std::move(options), std::move(space)));
  p->evaluator_ = std::make_unique<Evaluator>(module, p->space_, p->options_.machine,
                                              p->options_.existing_axes);
  p->evaluator_->set_pipeline(p->options_.pipeline);
  return p;
}

}  // namespace meshsplit::autoshard
