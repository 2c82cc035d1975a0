// The exact planner's integer program (ilp.h): coefficients from the strategy
// graph, the model in column form, CBC for the ILP and CLP for its
// relaxation.
#include "autoshard/ilp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>

#include <coin/Cbc_C_Interface.h>
#include <coin/Clp_C_Interface.h>

namespace meshsplit::autoshard {
namespace {

// Objective in microseconds and memory in MiB keep CBC's tolerances sane.
constexpr double kTimeScale = 1e6;
constexpr double kByteScale = 1.0 / (1024.0 * 1024.0);

// Edges between two classes whose producer result (a) and consumer read (b)
// shardings vary: cost[a][b], summed over the edges merged into the group.
struct EdgeGroup {
  int from_cls = 0, to_cls = 0;
  std::vector<int> a_of;  // per producer strategy
  std::vector<int> b_of;  // per consumer strategy
  int na = 0, nb = 0;
  std::vector<double> cost;  // na * nb
};

struct Coefficients {
  std::vector<std::vector<double>> compute, memory, comm;  // per class, strategy
  std::vector<std::vector<double>> reshard_linear;          // edges folded into x
  std::vector<EdgeGroup> groups;
  // Memory estimate: fixed per strategy (params, outputs) and the largest
  // other value per strategy of each class.
  std::vector<std::vector<double>> fixed_bytes, max_bytes;
};

// Distinct mappings of `maps` in first-seen order: index per entry.
std::vector<int> IndexDistinct(const std::vector<DimsMapping>& maps,
                               std::vector<DimsMapping>* distinct) {
  std::vector<int> idx;
  for (const auto& m : maps) {
    auto it = std::find(distinct->begin(), distinct->end(), m);
    idx.push_back(static_cast<int>(it - distinct->begin()));
    if (it == distinct->end()) distinct->push_back(m);
  }
  return idx;
}

Coefficients Prepare(const StrategyGraph& g, const MachineModel& machine) {
  Coefficients c;
  const size_t nc = g.classes.size();
  auto zeros = [&] {
    std::vector<std::vector<double>> v(nc);
    for (size_t k = 0; k < nc; ++k) v[k].assign(g.classes[k].num_strategies, 0.0);
    return v;
  };
  c.compute = zeros();
  c.memory = zeros();
  c.comm = zeros();
  c.reshard_linear = zeros();
  c.fixed_bytes = zeros();
  c.max_bytes = zeros();
  std::vector<bool> is_output(g.nodes.size(), false);
  for (int n : g.outputs) is_output[n] = true;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const GraphNode& node = g.nodes[n];
    const bool param = node.decision_group >= 0 || node.instr->opcode() == Opcode::kParameter ||
                       node.instr->opcode() == Opcode::kConstant;
    for (size_t s = 0; s < node.strategies.size(); ++s) {
      const NodeStrategy& st = node.strategies[s];
      c.compute[node.cls][s] += st.compute_seconds;
      c.memory[node.cls][s] += st.memory_seconds;
      c.comm[node.cls][s] += st.comm_seconds;
      const double b = static_cast<double>(st.result_bytes);
      if (param || is_output[n])
        c.fixed_bytes[node.cls][s] += b;
      else
        c.max_bytes[node.cls][s] = std::max(c.max_bytes[node.cls][s], b);
    }
  }
  std::map<std::tuple<int, int, std::vector<int>, std::vector<int>>, size_t> group_of;
  for (const GraphEdge& e : g.edges) {
    const GraphNode& p = g.nodes[e.from];
    const GraphNode& q = g.nodes[e.to];
    const Shape& shape = p.instr->shape();
    std::vector<DimsMapping> from_maps, to_maps;
    for (const auto& s : p.strategies) from_maps.push_back(s.result);
    for (const auto& s : q.strategies) {
      DimsMapping m = s.operands[e.operand];
      if (static_cast<int64_t>(m.size()) != shape.rank()) m.assign(shape.rank(), {});
      to_maps.push_back(std::move(m));
    }
    std::vector<DimsMapping> A, B;
    std::vector<int> a_of = IndexDistinct(from_maps, &A);
    std::vector<int> b_of = IndexDistinct(to_maps, &B);
    std::vector<double> cost(A.size() * B.size());
    bool any = false;
    for (size_t a = 0; a < A.size(); ++a)
      for (size_t b = 0; b < B.size(); ++b) {
        const double v = EstimateReshardSeconds(shape, A[a], B[b], *g.mesh, machine);
        cost[a * B.size() + b] = v;
        any = any || v > 0;
      }
    if (!any) continue;
    if (p.cls == q.cls) {
      for (size_t s = 0; s < p.strategies.size(); ++s)
        c.reshard_linear[p.cls][s] += cost[a_of[s] * B.size() + b_of[s]];
    } else if (A.size() == 1) {
      for (size_t s = 0; s < q.strategies.size(); ++s)
        c.reshard_linear[q.cls][s] += cost[b_of[s]];
    } else if (B.size() == 1) {
      for (size_t s = 0; s < p.strategies.size(); ++s)
        c.reshard_linear[p.cls][s] += cost[a_of[s] * B.size()];
    } else {
      auto key = std::make_tuple(p.cls, q.cls, a_of, b_of);
      auto [it, inserted] = group_of.emplace(key, c.groups.size());
      if (inserted) {
        EdgeGroup eg;
        eg.from_cls = p.cls;
        eg.to_cls = q.cls;
        eg.a_of = a_of;
        eg.b_of = b_of;
        eg.na = static_cast<int>(A.size());
        eg.nb = static_cast<int>(B.size());
        eg.cost.assign(cost.size(), 0.0);
        c.groups.push_back(std::move(eg));
      }
      EdgeGroup& eg = c.groups[it->second];
      for (size_t k = 0; k < cost.size(); ++k) eg.cost[k] += cost[k];
    }
  }
  return c;
}

// A sparse row: lower <= sum coef * col <= upper.
struct Row {
  std::vector<int> cols;
  std::vector<double> coefs;
  double lower = 0, upper = 0;
};

struct Model {
  std::vector<double> lb, ub, obj;
  std::vector<bool> integer;
  std::vector<Row> rows;
  int AddCol(double l, double u, double o, bool is_int) {
    lb.push_back(l);
    ub.push_back(u);
    obj.push_back(o);
    integer.push_back(is_int);
    return static_cast<int>(lb.size()) - 1;
  }
};

ModelCost Evaluate(const StrategyGraph& g, const Coefficients& c, const std::vector<int>& choice) {
  ModelCost m;
  double max_other = 0;
  for (size_t k = 0; k < g.classes.size(); ++k) {
    const int s = choice[k];
    m.compute_seconds += c.compute[k][s];
    m.memory_seconds += c.memory[k][s];
    m.comm_seconds += c.comm[k][s];
    m.reshard_seconds += c.reshard_linear[k][s];
    m.memory_bytes += c.fixed_bytes[k][s];
    max_other = std::max(max_other, c.max_bytes[k][s]);
  }
  for (const EdgeGroup& eg : c.groups) {
    const int a = eg.a_of[choice[eg.from_cls]], b = eg.b_of[choice[eg.to_cls]];
    m.reshard_seconds += eg.cost[a * eg.nb + b];
  }
  m.memory_bytes += max_other;
  m.time_seconds =
      std::max(m.compute_seconds, m.memory_seconds) + m.comm_seconds + m.reshard_seconds;
  return m;
}

}  // namespace

const char* IlpStatusName(IlpStatus s) {
  switch (s) {
    case IlpStatus::kOptimal: return "optimal";
    case IlpStatus::kTimeLimit: return "time limit";
    case IlpStatus::kInfeasible: return "infeasible";
    case IlpStatus::kNoSolution: return "no solution within the time limit";
    case IlpStatus::kError: return "error";
  }
  return "?";
}

ModelCost CostOfChoice(const StrategyGraph& graph, const MachineModel& machine,
                       const std::vector<int>& choice) {
  return Evaluate(graph, Prepare(graph, machine), choice);
}

std::function<ModelCost(const std::vector<int>&)> ChoiceCoster(const StrategyGraph& graph,
                                                               const MachineModel& machine) {
  auto c = std::make_shared<const Coefficients>(Prepare(graph, machine));
  return [&graph, c](const std::vector<int>& choice) { return Evaluate(graph, *c, choice); };
}

IlpResult SolveStrategyGraph(const StrategyGraph& g, const MachineModel& machine,
                             const IlpOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  IlpResult r;
  const Coefficients c = Prepare(g, machine);
  const size_t nc = g.classes.size();
  const bool memory = options.memory_limit_bytes > 0 || options.minimize_memory;
  const double time_weight = options.minimize_memory ? 0.0 : kTimeScale;
  Model m;
  // Columns: x per class and strategy, T, then M, then edge variables.
  std::vector<std::vector<int>> x(nc);
  for (size_t k = 0; k < nc; ++k)
    for (int s = 0; s < g.classes[k].num_strategies; ++s)
      x[k].push_back(m.AddCol(0, 1, time_weight * (c.comm[k][s] + c.reshard_linear[k][s]),
                              !options.relax));
  r.strategy_variables = static_cast<int64_t>(m.lb.size());
  // T is in microseconds already (its rows scale the terms).
  const int t_col = m.AddCol(0, 1e30, options.minimize_memory ? 0.0 : 1.0, false);
  const int mem_col = memory ? m.AddCol(0, 1e30, options.minimize_memory ? 1.0 : 0.0, false) : -1;
  for (size_t k = 0; k < nc; ++k) {
    Row one;
    for (int s = 0; s < g.classes[k].num_strategies; ++s) {
      one.cols.push_back(x[k][s]);
      one.coefs.push_back(1.0);
    }
    one.lower = one.upper = 1;
    m.rows.push_back(std::move(one));
  }
  for (const auto* terms : {&c.compute, &c.memory}) {
    Row row;  // T - sum term x >= 0
    row.cols.push_back(t_col);
    row.coefs.push_back(1.0);
    for (size_t k = 0; k < nc; ++k)
      for (int s = 0; s < g.classes[k].num_strategies; ++s)
        if ((*terms)[k][s] != 0) {
          row.cols.push_back(x[k][s]);
          row.coefs.push_back(-(*terms)[k][s] * kTimeScale);
        }
    row.lower = 0;
    row.upper = 1e30;
    m.rows.push_back(std::move(row));
  }
  for (const EdgeGroup& eg : c.groups) {
    std::vector<int> e(eg.na * eg.nb);
    for (int k = 0; k < eg.na * eg.nb; ++k) e[k] = m.AddCol(0, 1, time_weight * eg.cost[k], false);
    r.edge_variables += eg.na * eg.nb;
    for (int a = 0; a < eg.na; ++a) {  // sum_b e[a][b] = sum_{s: a(s)=a} x_p[s]
      Row row;
      for (int b = 0; b < eg.nb; ++b) row.cols.push_back(e[a * eg.nb + b]), row.coefs.push_back(1);
      for (size_t s = 0; s < eg.a_of.size(); ++s)
        if (eg.a_of[s] == a) row.cols.push_back(x[eg.from_cls][s]), row.coefs.push_back(-1);
      m.rows.push_back(std::move(row));
    }
    for (int b = 0; b < eg.nb; ++b) {
      Row row;
      for (int a = 0; a < eg.na; ++a) row.cols.push_back(e[a * eg.nb + b]), row.coefs.push_back(1);
      for (size_t s = 0; s < eg.b_of.size(); ++s)
        if (eg.b_of[s] == b) row.cols.push_back(x[eg.to_cls][s]), row.coefs.push_back(-1);
      m.rows.push_back(std::move(row));
    }
  }
  r.edge_groups = static_cast<int64_t>(c.groups.size());
  if (memory) {
    Row total;  // total = M + sum fixed x
    total.cols.push_back(mem_col);
    total.coefs.push_back(1.0);
    for (size_t k = 0; k < nc; ++k)
      for (int s = 0; s < g.classes[k].num_strategies; ++s)
        if (c.fixed_bytes[k][s] != 0) {
          total.cols.push_back(x[k][s]);
          total.coefs.push_back(c.fixed_bytes[k][s] * kByteScale);
        }
    // M is the largest other value; the total is fixed + M.
    const int total_col = m.AddCol(0, 1e30, 0, false);
    total.cols.push_back(total_col);
    total.coefs.push_back(-1.0);
    total.lower = total.upper = 0;  // total_col = M + fixed
    m.rows.push_back(std::move(total));
    for (size_t k = 0; k < nc; ++k) {
      Row largest;  // M - max_bytes x >= 0
      largest.cols.push_back(mem_col);
      largest.coefs.push_back(1.0);
      bool any = false;
      for (int s = 0; s < g.classes[k].num_strategies; ++s)
        if (c.max_bytes[k][s] != 0) {
          largest.cols.push_back(x[k][s]);
          largest.coefs.push_back(-c.max_bytes[k][s] * kByteScale);
          any = true;
        }
      largest.lower = 0;
      largest.upper = 1e30;
      if (any) m.rows.push_back(std::move(largest));
    }
    if (options.minimize_memory) {
      m.obj[mem_col] = 0;
      m.obj[total_col] = 1.0;
    }
    if (options.memory_limit_bytes > 0)
      m.ub[total_col] = static_cast<double>(options.memory_limit_bytes) * kByteScale;
  }
  r.constraints = static_cast<int64_t>(m.rows.size());

  // Column-major matrix.
  const int ncols = static_cast<int>(m.lb.size()), nrows = static_cast<int>(m.rows.size());
  std::vector<std::vector<std::pair<int, double>>> by_col(ncols);
  std::vector<double> rlb(nrows), rub(nrows);
  for (int i = 0; i < nrows; ++i) {
    const Row& row = m.rows[i];
    for (size_t k = 0; k < row.cols.size(); ++k) by_col[row.cols[k]].push_back({i, row.coefs[k]});
    rlb[i] = row.lower;
    rub[i] = row.upper;
  }
  std::vector<CoinBigIndex> start(ncols + 1, 0);
  std::vector<int> index;
  std::vector<double> value;
  for (int j = 0; j < ncols; ++j) {
    for (const auto& [i, v] : by_col[j]) index.push_back(i), value.push_back(v);
    start[j + 1] = static_cast<CoinBigIndex>(index.size());
  }

  std::vector<double> sol;
  double objective = 0, bound = 0;
  const double deadline = std::max(1.0, options.time_limit_seconds);
  // The relaxation first, with CLP: the bound for --solver lp, and for the
  // ILP its answer when the LP optimum is already integral (the marginal
  // edge formulation often is), which spares CBC's search.
  {
    Clp_Simplex* lp = Clp_newModel();
    Clp_setLogLevel(lp, 0);
    Clp_loadProblem(lp, ncols, nrows, start.data(), index.data(), value.data(), m.lb.data(),
                    m.ub.data(), m.obj.data(), rlb.data(), rub.data());
    Clp_setMaximumSeconds(lp, deadline);
    // Dual simplex: the automatic choice (Clp_initialSolve) took over 30 s
    // on examples/gpt2 at data=2,model=4 with a 9MiB cap, where dual takes
    // 0.6 s, and is 1.1-1.5x slower on the uncapped plans measured
    // (examples/gpt2, ../shared's gpt2 and MobileNet).
    Clp_initialDualSolve(lp);
    if (Clp_isProvenOptimal(lp)) {
      r.status = IlpStatus::kOptimal;
      const double* col = Clp_getColSolution(lp);
      sol.assign(col, col + ncols);
      objective = bound = Clp_objectiveValue(lp);
    } else if (Clp_isProvenPrimalInfeasible(lp)) {
      r.status = IlpStatus::kInfeasible;
    } else {
      r.status = IlpStatus::kNoSolution;
    }
    Clp_deleteModel(lp);
  }
  bool integral = !sol.empty();
  for (int j = 0; j < ncols && integral; ++j)
    if (m.integer[j] && std::abs(sol[j] - std::round(sol[j])) > 1e-7) integral = false;
  r.lp_integral = integral;
  const double lp_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // CBC starts by solving the root relaxation again from scratch and does
  // not look at its clock until that is done, so with less time left than
  // the relaxation took it would overrun the limit by about that much:
  // give up now instead (no integer solution within the time limit).
  const bool time_for_cbc = deadline - lp_seconds >= lp_seconds;
  if (!options.relax && !integral && r.status != IlpStatus::kInfeasible && !time_for_cbc) {
    r.status = IlpStatus::kNoSolution;
    sol.clear();
  }
  if (!options.relax && !integral && r.status != IlpStatus::kInfeasible && time_for_cbc) {
    Cbc_Model* mip = Cbc_newModel();
    Cbc_loadProblem(mip, ncols, nrows, start.data(), index.data(), value.data(), m.lb.data(),
                    m.ub.data(), m.obj.data(), rlb.data(), rub.data());
    for (int j = 0; j < ncols; ++j)
      if (m.integer[j]) Cbc_setInteger(mip, j);
    Cbc_setLogLevel(mip, 0);
    // CBC counts CPU seconds by default; the limit is the user's wall clock,
    // which on a busy machine runs several times faster.
    Cbc_setParameter(mip, "timeMode", "elapsed");
    Cbc_setMaximumSeconds(mip, std::max(1.0, deadline - lp_seconds));
    Cbc_setAllowableFractionGap(mip, 1e-6);
    Cbc_solve(mip);
    const double* best = Cbc_bestSolution(mip);
    sol.clear();
    if (Cbc_isProvenInfeasible(mip)) {
      r.status = IlpStatus::kInfeasible;
    } else if (best == nullptr) {
      r.status = IlpStatus::kNoSolution;
    } else {
      r.status = Cbc_isProvenOptimal(mip) ? IlpStatus::kOptimal : IlpStatus::kTimeLimit;
      sol.assign(best, best + ncols);
      objective = Cbc_getObjValue(mip);
      bound = std::min(objective, std::max(bound, Cbc_getBestPossibleObjValue(mip)));
    }
    Cbc_deleteModel(mip);
  }
  if (!sol.empty()) {
    r.choice.assign(nc, 0);
    for (size_t k = 0; k < nc; ++k) {
      int best = 0;
      for (int s = 1; s < g.classes[k].num_strategies; ++s)
        if (sol[x[k][s]] > sol[x[k][best]] + 1e-9) best = s;
      r.choice[k] = best;
    }
    r.cost = Evaluate(g, c, r.choice);
    const double scale = options.minimize_memory ? 1.0 / kByteScale : 1.0 / kTimeScale;
    if (options.relax) {
      r.objective_seconds = objective * scale;
    } else {
      r.objective_seconds = options.minimize_memory ? r.cost.memory_bytes : r.cost.time_seconds;
    }
    r.bound_seconds = bound * scale;
    r.gap = r.objective_seconds > 0
                ? std::max(0.0, (r.objective_seconds - r.bound_seconds) / r.objective_seconds)
                : 0.0;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace meshsplit::autoshard
