// The steps around the search of `meshsplit autoshard`, shared by the command
// and the public API (ms.autoshard): lift a loaded module's own shardings
// onto the search mesh, build the decision space and its evaluator, search,
// and turn a choice into a sharding spec.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoshard/decision_space.h"
#include "autoshard/ilp.h"
#include "autoshard/objective.h"
#include "autoshard/search.h"
#include "import/shard_spec.h"
#include "ir/module.h"
#include "sharding/mesh.h"
#include "support/status.h"

namespace meshsplit::autoshard {

struct PlanOptions {
  // The mesh axes the module's own shardings were written for
  // (ShardSpec::existing_axes); empty: they are kept as written.
  std::vector<std::string> existing_axes;
  DecisionSpaceOptions space;
  MachineModel machine;
  SearchOptions search;
  // Pipeline the model's layer loops in every candidate (the stage axis is
  // then excluded from the decisions).
  std::optional<PipelineSpec> pipeline;
};

// The exact planner (`--solver ilp|lp`): the strategy graph of the module,
// its ILP (or LP relaxation), the solution as a choice of the decision space
// and that choice evaluated like any candidate (full compile + cost).
// Which of the ILP's decisions the written spec states: the parameters'
// alone (propagation completes the rest), also every dot's result (a
// `match_op` constraint: propagation would not always reproduce the ILP's
// choice there), or every op node's result; kBest evaluates the three and
// keeps the cheapest (the partitioner sometimes compiles the parameters-only
// plan better than the ILP's own choices for the rest).
enum class ExactConstraints { kParameters, kDots, kAll, kBest };

struct ExactOptions {
  bool relax = false;
  double time_limit_seconds = 50;
  StrategyGraphOptions graph;
  ExactConstraints constraints = ExactConstraints::kBest;
};

struct ExactResult {
  // Graph sizes.
  int64_t instructions = 0, nodes = 0, followers = 0, free_sources = 0, opaque = 0;
  int64_t classes = 0, strategies = 0, edges = 0;
  IlpResult ilp;         // the solve the plan comes from
  int solves = 0;        // ILP solves (the cap is tightened when the evaluated
                         // peak memory exceeds it)
  Choice choice;         // the plan's parameters, over the decision space
  ShardSpec spec;        // the plan: SpecOf(choice) and its match_op rules
  int64_t op_rules = 0;  // of which constraints on computed values
  ExactConstraints lowering = ExactConstraints::kAll;  // the one `spec` is
  int lowerings_evaluated = 0;
  Evaluation eval;       // the plan partitioned and costed
  // The memory cap admits no plan (ILP): `choice`/`eval`/`ilp` are then the
  // plan of least estimated memory.
  bool infeasible = false;
  double build_seconds = 0;  // graph construction
  // The ILP's coefficients (reshard prices, live-set bytes), once for every
  // solve.
  double prepare_seconds = 0;
  // The ILP's estimate of the initial plan (decided tensors as the input has
  // them, every op replicated), to set beside its evaluated cost.
  ModelCost initial_estimate;
};

class Planner {
 public:
  // Lifts `module`'s shardings onto `mesh` (in place), then builds the
  // decision space and the evaluator (which keeps its own copy).
  static StatusOr<std::unique_ptr<Planner>> Create(Module& module, const Mesh& mesh,
                                                   PlanOptions options);

  const DecisionSpace& space() const { return space_; }
  const Evaluator& evaluator() const { return *evaluator_; }
  // The module after the lift, as candidates are applied to it.
  const Module& module() const { return *module_; }
  SearchResult Search() const { return autoshard::Search(*evaluator_, space_, options_.search); }
  // The spec of `choice` (with the lift's existing_axes).
  // Solves the exact planner's ILP (or LP) and evaluates its plan.
  StatusOr<ExactResult> SolveExact(const ExactOptions& options) const;
  // The plan of one ILP solution (`cls`, per class) as a spec, evaluated
  // (the best of the lowerings `which` allows). Returns the evaluation of
  // the first lowering tried, the one `which` names (kAll for kBest).
  Evaluation Lower(const StrategyGraph& g, const std::vector<int>& cls, ExactConstraints which,
                   ExactResult* r) const;
  ShardSpec SpecOf(const Choice& choice) const {
    ShardSpec spec = ChoiceToSpec(space_, choice, options_.existing_axes);
    spec.pipeline = options_.pipeline;
    return spec;
  }

 private:
  Planner(PlanOptions options, DecisionSpace space)
      : options_(std::move(options)), space_(std::move(space)) {}
  PlanOptions options_;
  DecisionSpace space_;
  std::unique_ptr<Evaluator> evaluator_;  // refers to space_
  std::unique_ptr<Module> module_;        // for the exact planner's graph
};

}  // namespace meshsplit::autoshard
