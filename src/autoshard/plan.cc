// Planner: the lift, decision space and evaluator of one search (plan.h).
#include "autoshard/plan.h"

#include <chrono>

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
  p->module_ = module.Clone();
  return p;
}

}  // namespace meshsplit::autoshard

namespace meshsplit::autoshard {
namespace {

// The decision-space choice of an ILP solution: each group takes its class's
// strategy (strategies of decided tensors are the group's options).
Choice ToChoice(const StrategyGraph& g, const DecisionSpace& space, const std::vector<int>& cls) {
  Choice c = InitialChoice(space);
  for (size_t k = 0; k < g.classes.size(); ++k)
    if (g.classes[k].decision_group >= 0) c[g.classes[k].decision_group] = cls[k];
  return c;
}

// The match_op rules stating the ILP's result sharding of the computed
// values `which` selects, one per instruction (by name).
std::vector<ShardRule> OpRules(const StrategyGraph& g, const std::vector<int>& cls,
                               ExactConstraints which) {
  std::vector<ShardRule> rules;
  if (which == ExactConstraints::kParameters) return rules;
  const Mesh& mesh = *g.mesh;
  for (const GraphNode& node : g.nodes) {
    const Instruction& instr = *node.instr;
    const Opcode op = instr.opcode();
    if (node.sink || node.opaque || node.follower || op == Opcode::kParameter ||
        op == Opcode::kConstant || !instr.shape().IsArray() || instr.shape().rank() == 0)
      continue;
    if (which == ExactConstraints::kDots && op != Opcode::kDot) continue;
    const DimsMapping& m = node.strategies[cls[node.cls]].result;
    bool split = false;
    ShardRule rule;
    rule.on_op = true;
    rule.match = instr.name();
    for (const auto& axes : m) {
      rule.dims.emplace_back();
      for (int64_t a : axes) rule.dims.back().push_back(mesh.axes()[a].name);
      split = split || !axes.empty();
    }
    // A replicated result is stated too: propagation would otherwise
    // spread a neighbour's split into it, which the ILP did not cost.
    if (!split) {
      rule.dims.clear();
      rule.replicated = true;
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

}  // namespace

Evaluation Planner::Lower(const StrategyGraph& g, const std::vector<int>& cls,
                          ExactConstraints which, ExactResult* r) const {
  r->choice = ToChoice(g, space_, cls);
  std::vector<ExactConstraints> tries = {which};
  if (which == ExactConstraints::kBest)
    tries = {ExactConstraints::kAll, ExactConstraints::kParameters, ExactConstraints::kDots};
  r->lowerings_evaluated = 0;
  Evaluation first;
  for (ExactConstraints t : tries) {
    ShardSpec spec = SpecOf(r->choice);
    int64_t n = 0;
    for (ShardRule& rule : OpRules(g, cls, t)) {
      spec.rules.push_back(std::move(rule));
      ++n;
    }
    Evaluation eval = evaluator_->EvaluateSpec(spec);
    ++r->lowerings_evaluated;
    if (r->lowerings_evaluated == 1) first = eval;
    if (r->lowerings_evaluated == 1 || Better(eval, r->eval)) {
      r->spec = std::move(spec);
      r->op_rules = n;
      r->eval = std::move(eval);
      r->lowering = t;
    }
  }
  return first;
}

StatusOr<ExactResult> Planner::SolveExact(const ExactOptions& options) const {
  const auto t0 = std::chrono::steady_clock::now();
  const MachineModel& machine = options_.machine;
  MS_ASSIGN_OR_RETURN(StrategyGraph g,
                      BuildStrategyGraph(*module_, space_, machine, options.graph));
  ExactResult r;
  r.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.instructions = g.instructions;
  r.nodes = static_cast<int64_t>(g.nodes.size());
  r.followers = g.followers;
  r.free_sources = g.free_sources;
  r.opaque = g.opaque;
  r.classes = static_cast<int64_t>(g.classes.size());
  r.strategies = g.strategies;
  r.edges = static_cast<int64_t>(g.edges.size());
  const StrategyIlp program(g, machine);
  r.prepare_seconds = program.prepare_seconds();
  {
    // Strategy 0 of an op is its replicated one (no axis on any factor).
    std::vector<int> initial(g.classes.size(), 0);
    for (size_t k = 0; k < g.classes.size(); ++k)
      if (g.classes[k].decision_group >= 0)
        initial[k] = space_.groups[g.classes[k].decision_group].initial;
    r.initial_estimate = program.Cost(initial);
  }
  IlpOptions ilp;
  ilp.relax = options.relax;
  ilp.time_limit_seconds = options.time_limit_seconds;
  ilp.memory_limit_bytes = machine.memory_limit_bytes;
  // The ILP counts the values live at once in the unpartitioned program's
  // order; the partitioned program adds collectives' buffers, and views and
  // free sources count nothing: when the plan's real peak breaks the cap, the
  // ILP's cap becomes that plan's estimate less the overshoot, and it solves
  // again (a few times). The plan that stands is the best evaluated over
  // all solves. "The plan's real peak" is that of the lowering stating the
  // whole solution: a looser lowering (parameters only) may fit the cap
  // while propagation leaves it far from the ILP's plan and its cost (on
  // examples/gpt2 at 10MiB: 420 us against an estimate of 209 us), so its
  // fitting does not end the re-solves.
  const int max_solves = machine.memory_limit_bytes > 0 && !options.relax ? 6 : 1;
  // --time-limit bounds the whole exact plan (graph, every solve and the
  // lowerings), not each solve: a solve gets what is left of it.
  auto remaining = [&] {
    return options.time_limit_seconds -
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int solve = 0; solve < max_solves; ++solve) {
    if (solve > 0 && remaining() < 1.0) break;  // keep the last plan
    ilp.time_limit_seconds = std::max(1.0, remaining());
    IlpResult sol = program.Solve(ilp);
    ++r.solves;
    if (sol.status == IlpStatus::kInfeasible && solve == 0) {
      // Report the plan of least estimated memory instead.
      IlpOptions least = ilp;
      least.time_limit_seconds = std::max(1.0, remaining());
      least.memory_limit_bytes = 0;
      least.minimize_memory = true;
      r.ilp = program.Solve(least);
      ++r.solves;
      r.infeasible = true;
      if (r.ilp.choice.empty())
        return Status::Error("ILP: " + std::string(IlpStatusName(r.ilp.status)));
      Lower(g, r.ilp.choice, options.constraints, &r);
      return r;
    }
    if (sol.choice.empty()) {
      if (solve == 0)
        return Status::Error(std::string("ILP: ") + IlpStatusName(sol.status) + " (" +
                             std::to_string(r.strategies) + " strategies)" +
                             (sol.status == IlpStatus::kNoSolution
                                  ? "; a longer --time-limit, or --solver search, may find one"
                                  : ""));
      break;  // keep the last plan
    }
    const double estimated_bytes = sol.cost.memory_bytes;
    ExactResult trial = r;
    const Evaluation whole = Lower(g, sol.choice, options.constraints, &trial);
    trial.ilp = std::move(sol);
    if (solve == 0 || Better(trial.eval, r.eval)) r = std::move(trial);
    if (max_solves == 1 || !whole.ok || whole.feasible) break;
    // The next plan's estimate must be below this one's by the overshoot.
    const int64_t over = whole.peak_memory_bytes - machine.memory_limit_bytes;
    ilp.memory_limit_bytes = static_cast<int64_t>(estimated_bytes) - over;
    if (ilp.memory_limit_bytes <= 0) break;
  }
  return r;
}

}  // namespace meshsplit::autoshard
