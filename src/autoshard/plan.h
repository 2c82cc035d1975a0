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

class Planner {
 public:
  // Lifts `module`'s shardings onto `mesh` (in place), then builds the
  // decision space and the evaluator (which keeps its own copy).
  static StatusOr<std::unique_ptr<Planner>> Create(Module& module, const Mesh& mesh,
                                                   PlanOptions options);

  const DecisionSpace& space() const { return space_; }
  const Evaluator& evaluator() const { return *evaluator_; }
  SearchResult Search() const { return autoshard::Search(*evaluator_, space_, options_.search); }
  // The spec of `choice` (with the lift's existing_axes).
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
};

}  // namespace meshsplit::autoshard
