// The integer program of the exact planner over a strategy graph
// (strategy_graph.h), solved with COIN-OR CBC (Debian coinor-libcbc-dev), or
// its LP relaxation with CLP as a lower bound.
//
//   x[c][s] in {0,1}, sum_s x[c][s] = 1          one strategy per class
//   e[a][b] >= 0 per merged edge, with marginals   sum_b e[a][b] = sum_{s: a(s)=a} x_p[s]
//                                                  sum_a e[a][b] = sum_{s: b(s)=b} x_q[s]
//   T >= sum compute x,  T >= sum memory x         the objective's roofline
//   minimise T + sum comm x + sum reshard e        = objective.cc's step time
//   memory: params + M <= cap, M >= the bytes of each live set
//           (the other values live at one point of the program order)
//
// Edge variables are indexed by the distinct result sharding of the producer
// (a) and read sharding of the consumer (b), not by strategy pairs; with the
// marginal equalities they are integral whenever x is, so they stay
// continuous, and the relaxation is the tight (local-polytope) one. Edges
// whose producer or consumer has one sharding become linear costs; edges
// inside one linked class are costs on its diagonal; edges between the same
// two classes with the same index maps are summed into one.
//
// Solving: CLP's dual simplex first; an integral LP optimum is the answer.
// Otherwise a warm start (the LP optimum rounded, brought under the cap and
// improved by single-class moves) is CBC's first incumbent, and CBC's branch
// and bound starts from the solved LP.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autoshard/objective.h"
#include "autoshard/strategy_graph.h"

namespace meshsplit::autoshard {

struct IlpOptions {
  bool relax = false;               // LP relaxation (CLP), a lower bound
  double time_limit_seconds = 60;   // CBC's; on the limit the gap is reported
  int64_t memory_limit_bytes = 0;   // 0 = none
  bool minimize_memory = false;     // objective: the memory estimate
  // Round the LP optimum and improve it by single-class moves under the cap:
  // CBC's first incumbent, and the plan when CBC finds none better in time.
  bool warm_start = true;
};

enum class IlpStatus { kOptimal, kTimeLimit, kInfeasible, kNoSolution, kError };
const char* IlpStatusName(IlpStatus s);

// The estimate of one class choice under the ILP's cost model.
struct ModelCost {
  double time_seconds = 0;  // max(compute, memory) + comm + reshard
  double compute_seconds = 0;
  double memory_seconds = 0;
  double comm_seconds = 0;     // partial-sum all-reduces
  double reshard_seconds = 0;  // edges
  double memory_bytes = 0;     // params + the largest live set's values
};

struct IlpResult {
  IlpStatus status = IlpStatus::kError;
  std::string message;
  std::vector<int> choice;          // per class (LP: the largest x, rounded)
  double objective_seconds = 0;     // of `choice` (ILP) / the LP optimum
  double bound_seconds = 0;         // CBC's best bound / the LP optimum
  double gap = 0;                   // (objective - bound) / objective
  ModelCost cost;                   // of `choice`
  double seconds = 0;               // building the model and solving
  int64_t strategy_variables = 0;
  int64_t edge_variables = 0;
  int64_t edge_groups = 0;          // merged edges with variables
  int64_t constraints = 0;
  // The LP optimum was integral: it is the ILP's (CBC was not run).
  bool lp_integral = false;
  // The warm start's objective (0: none was made or it broke the cap), and
  // whether it is the answer (it met the bound, or CBC found nothing better).
  double warm_start_seconds = 0;
  bool from_warm_start = false;
};

struct IlpCoefficients;

// The ILP of one strategy graph with its coefficients (edge reshard prices,
// live-set bytes) computed once: the planner prices a choice and solves
// several times (each re-solve under a tighter cap) on one graph. `graph`
// must outlive it.
class StrategyIlp {
 public:
  StrategyIlp(const StrategyGraph& graph, const MachineModel& machine);
  ~StrategyIlp();
  StrategyIlp(const StrategyIlp&) = delete;
  StrategyIlp& operator=(const StrategyIlp&) = delete;

  // The ILP's cost of `choice` (one strategy per class), computed directly.
  ModelCost Cost(const std::vector<int>& choice) const;
  // IlpResult::seconds counts building this solve's model and solving it.
  IlpResult Solve(const IlpOptions& options) const;
  // Computing the coefficients, in the constructor.
  double prepare_seconds() const { return prepare_seconds_; }

 private:
  const StrategyGraph& graph_;
  std::unique_ptr<const IlpCoefficients> coefficients_;
  double prepare_seconds_ = 0;
};

// One solve on a graph prepared for it (its seconds count the preparing).
IlpResult SolveStrategyGraph(const StrategyGraph& graph, const MachineModel& machine,
                             const IlpOptions& options);

}  // namespace meshsplit::autoshard
