// `meshsplit autoshard FILE [--mesh data=2,model=4] [--budget N] [--seed S]
// [--solver search|ilp|lp] [--bound] [--memory-limit BYTES] [-o SPEC.json]
// [--json]`: searches sharding decisions for the program's inputs and
// weights (src/autoshard/), or solves the exact planner's ILP over per-op
// strategies, prints the cheapest plan found with its cost, and writes it as
// a sharding spec that partition/run/verify/report take with --shard.
// docs/autoshard.md.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "autoshard/decision_space.h"
#include "autoshard/explain.h"
#include "autoshard/objective.h"
#include "autoshard/plan.h"
#include "autoshard/search.h"
#include "cli/command.h"
#include "cli/shard_flags.h"
#include "import/shard_spec.h"
#include "ir/attribute_text.h"
#include "ir/verifier.h"

namespace meshsplit::cli {
namespace {

using autoshard::DecisionSpace;
using autoshard::Evaluation;

struct AutoshardFlags {
  std::string file;
  std::string mesh;
  int64_t num_partitions = 0;
  int64_t budget = 300;
  double time_limit = 50;
  uint64_t seed = 0;
  int restarts = 3;
  std::string memory_limit;
  int64_t min_bytes = 1024;
  int64_t max_groups = 64;
  bool keep_existing = false;
  bool no_group = false;
  int max_axes_per_dim = 1;
  std::vector<std::string> existing_axes;
  std::vector<std::string> compare;
  autoshard::MachineModel machine;
  std::string profile;  // --profile: a calibrated machine profile
  std::string pipeline_axis;           // --pipeline-axis: also plan pipeline stages
  std::vector<int64_t> microbatches;   // --microbatches: the counts tried
  std::string output;
  std::string solver = "search";
  std::string ilp_constraints = "best";
  bool bound = false;
  bool json = false;
  bool quiet = false;
  bool keep_batch_norm = false;
  ParseOptions parse;  // --xla-strict
};

// "16GiB", "512MiB", "1e9", "4096" -> bytes.
StatusOr<int64_t> ParseBytes(const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    return Status::Error("--memory-limit: not a size: '" + text + "'");
  }
  std::string unit = text.substr(pos);
  double scale = 1;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KiB" || unit == "K") scale = 1024.0;
  else if (unit == "MiB" || unit == "M") scale = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  else return Status::Error("--memory-limit: unknown unit '" + unit + "' (B, KiB, MiB, GiB, KB, MB, GB)");
  if (v < 0) return Status::Error("--memory-limit: negative size");
  return static_cast<int64_t>(v * scale);
}

std::string Micros(double seconds) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.4g us", seconds * 1e6);
  return buf;
}

std::string Bytes(double b) {
  char buf[48];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.3g %s", b, units[u]);
  return buf;
}

// The evaluated peak over the ILP's memory estimate (0 without an estimate).
double MemoryRatio(const Evaluation& e, const autoshard::ModelCost& estimate) {
  return estimate.memory_bytes > 0
             ? static_cast<double>(e.peak_memory_bytes) / estimate.memory_bytes
             : 0.0;
}

std::string CollectiveSummary(const Evaluation& e) {
  if (e.collectives_by_kind.empty()) return "none";
  std::string s;
  for (const auto& [kind, n] : e.collectives_by_kind) {
    if (!s.empty()) s += ", ";
    s += kind + " x" + std::to_string(n);
  }
  return s;
}

std::string EvalLine(const Evaluation& e) {
  if (!e.ok) return "failed: " + e.error;
  std::string s = Micros(e.time_seconds) + " (compute " + Micros(e.compute_seconds) +
                  ", memory traffic " + Micros(e.memory_seconds) + ", communication " +
                  Micros(e.comm_seconds) + "), peak memory " +
                  Bytes(static_cast<double>(e.peak_memory_bytes)) + "/device" +
                  (e.feasible ? "" : " OVER THE LIMIT") + ", collectives: " +
                  CollectiveSummary(e) + ", wire " + Bytes(e.wire_bytes) + "/device";
  return s;
}

nlohmann::ordered_json EvalJson(const Evaluation& e) {
  nlohmann::ordered_json j;
  j["ok"] = e.ok;
  if (!e.ok) {
    j["error"] = e.error;
    return j;
  }
  j["feasible"] = e.feasible;
  j["time_seconds"] = e.time_seconds;
  j["compute_seconds"] = e.compute_seconds;
  j["memory_seconds"] = e.memory_seconds;
  j["comm_seconds"] = e.comm_seconds;
  j["flops"] = e.flops;
  j["bytes_accessed"] = e.bytes_accessed;
  j["wire_bytes"] = e.wire_bytes;
  j["peak_memory_bytes"] = e.peak_memory_bytes;
  j["num_collectives"] = e.num_collectives;
  nlohmann::ordered_json kinds = nlohmann::ordered_json::object();
  for (const auto& [k, n] : e.collectives_by_kind) kinds[k] = n;
  j["collectives_by_kind"] = std::move(kinds);
  nlohmann::ordered_json axes = nlohmann::ordered_json::object();
  for (const auto& [k, v] : e.wire_bytes_by_axis) axes[k] = v;
  j["wire_bytes_by_axis"] = std::move(axes);
  return j;
}

StatusOr<Mesh> ResolveMesh(const AutoshardFlags& flags, const Module& module) {
  std::string text = flags.mesh;
  if (text.empty() && flags.num_partitions > 0) text = "all=" + std::to_string(flags.num_partitions);
  if (text.empty()) text = ModuleFrontendAttribute(module, kModuleMeshAttribute).value_or("");
  if (text.empty() && module.num_partitions() > 1)
    text = "all=" + std::to_string(module.num_partitions());
  if (text.empty())
    return Status::Error("no mesh: give --mesh data=2,model=4 or --num-partitions N");
  auto mesh = Mesh::Parse(text);
  if (!mesh.ok()) return Status::Error("--mesh: " + mesh.status().message());
  if (flags.num_partitions > 0 && mesh->num_devices() != flags.num_partitions)
    return Status::Error("--num-partitions " + std::to_string(flags.num_partitions) +
                         " differs from the mesh's " + std::to_string(mesh->num_devices()) +
                         " devices");
  return *mesh;
}

// When the plan splits nothing: why, against the fastest split alternative
// the search costed ("" when something is split or nothing was costed).
std::string ReplicationHeadline(const autoshard::SearchResult& r, const DecisionSpace& space,
                                const Mesh& mesh, const autoshard::MachineModel& machine) {
  if (!r.best_eval.ok) return "";
  for (size_t g = 0; g < space.groups.size(); ++g)
    if (r.best[g] != 0) return "";
  const autoshard::Alternative* best = nullptr;
  for (const auto& a : r.why)
    if (a.eval.ok && a.option != 0 && (best == nullptr || Better(a.eval, best->eval))) best = &a;
  if (best == nullptr) return "";
  const auto& grp = space.groups[best->group];
  return "the best split seen, " + grp.label + " " +
         autoshard::OptionToString(grp.options[best->option], mesh) + ", " +
         autoshard::Explain(r.best_eval, best->eval, machine).text;
}

const char* LoweringName(autoshard::ExactConstraints c) {
  switch (c) {
    case autoshard::ExactConstraints::kParameters: return "params";
    case autoshard::ExactConstraints::kDots: return "dots";
    case autoshard::ExactConstraints::kAll: return "all";
    case autoshard::ExactConstraints::kBest: return "best";
  }
  return "?";
}

nlohmann::ordered_json IlpJson(const autoshard::IlpResult& ilp) {
  return {{"status", autoshard::IlpStatusName(ilp.status)},
          {"objective_seconds", ilp.objective_seconds},
          {"bound_seconds", ilp.bound_seconds},
          {"gap", ilp.gap},
          {"estimate", {{"time_seconds", ilp.cost.time_seconds},
                        {"compute_seconds", ilp.cost.compute_seconds},
                        {"memory_seconds", ilp.cost.memory_seconds},
                        {"comm_seconds", ilp.cost.comm_seconds},
                        {"reshard_seconds", ilp.cost.reshard_seconds},
                        {"memory_bytes", ilp.cost.memory_bytes}}},
          {"seconds", ilp.seconds},
          {"strategy_variables", ilp.strategy_variables},
          {"edge_variables", ilp.edge_variables},
          {"edge_groups", ilp.edge_groups},
          {"constraints", ilp.constraints},
          {"lp_integral", ilp.lp_integral},
          {"warm_start_seconds", ilp.warm_start_seconds},
          {"from_warm_start", ilp.from_warm_start}};
}

nlohmann::ordered_json SolverJson(const std::string& name, const autoshard::ExactResult& x,
                                  const std::optional<autoshard::IlpResult>& lp_bound) {
  nlohmann::ordered_json j;
  j["name"] = name;
  if (name == "search") {
    if (lp_bound) j["lp"] = IlpJson(*lp_bound);
    return j;
  }
  j["graph"] = {{"instructions", x.instructions}, {"nodes", x.nodes},
                {"followers_merged", x.followers}, {"free_sources", x.free_sources},
                {"opaque", x.opaque}, {"classes", x.classes},
                {"strategies", x.strategies}, {"edges", x.edges},
                {"build_seconds", x.build_seconds},
                {"ilp_prepare_seconds", x.prepare_seconds}};
  j["ilp"] = IlpJson(x.ilp);
  j["initial_estimate_seconds"] = x.initial_estimate.time_seconds;
  j["solves"] = x.solves;
  j["op_rules"] = x.op_rules;
  j["constraints"] = LoweringName(x.lowering);
  j["lowerings_evaluated"] = x.lowerings_evaluated;
  j["memory_cap_infeasible"] = x.infeasible;
  return j;
}

void PrintExact(std::ostream& os, const std::string& name, const autoshard::ExactResult& x) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "graph: %lld nodes of %lld instructions (%lld followers merged, %lld free "
                "sources, %lld opaque), %lld classes, %lld strategies, %lld edges, built in "
                "%.2f s, ILP coefficients in %.2f s\n",
                (long long)x.nodes, (long long)x.instructions, (long long)x.followers,
                (long long)x.free_sources, (long long)x.opaque, (long long)x.classes,
                (long long)x.strategies, (long long)x.edges, x.build_seconds,
                x.prepare_seconds);
  os << buf;
  // Under an infeasible cap the ILP reported minimised the memory estimate:
  // its objective and bound are bytes.
  auto objective = [&](double v) { return x.infeasible ? Bytes(v) : Micros(v); };
  std::snprintf(buf, sizeof(buf),
                "%s: %s%s, objective %s, bound %s, gap %.2f%%; %lld strategy + %lld edge "
                "variables (%lld edge groups), %lld constraints, %d solve%s, %.2f s\n",
                name == "lp" ? "lp (CLP relaxation)" : "ilp (CBC)",
                autoshard::IlpStatusName(x.ilp.status),
                name != "ilp"           ? ""
                : x.infeasible          ? " (no plan fits the cap: the memory estimate minimised)"
                : x.ilp.lp_integral     ? " (the LP optimum is integral)"
                : x.ilp.from_warm_start ? " (the warm start: the LP optimum rounded, improved)"
                                        : "",
                objective(x.ilp.objective_seconds).c_str(),
                objective(x.ilp.bound_seconds).c_str(), x.ilp.gap * 100,
                (long long)x.ilp.strategy_variables, (long long)x.ilp.edge_variables,
                (long long)x.ilp.edge_groups, (long long)x.ilp.constraints, x.solves,
                x.solves == 1 ? "" : "s", x.ilp.seconds);
  os << buf;
  os << "spec: the parameters' shardings";
  if (x.op_rules > 0) os << " and " << x.op_rules << " match_op constraints on computed values";
  os << " (--ilp-constraints " << LoweringName(x.lowering);
  if (x.lowerings_evaluated > 1)
    os << ", the cheapest of " << x.lowerings_evaluated << " evaluated";
  os << ")\n";
}

// An infeasible memory cap: the error names the cap and the smallest plan.
int ReportInfeasible(const AutoshardFlags& flags, const autoshard::ExactResult& x) {
  std::cout << std::flush;  // the plan first, then the error
  std::string msg = "no plan fits in " +
                    Bytes(static_cast<double>(flags.machine.memory_limit_bytes)) +
                    " per device; the smallest the ILP finds needs " +
                    Bytes(x.ilp.cost.memory_bytes) + " (its estimate: parameters and the "
                    "values live at once in program order)";
  if (x.eval.ok) msg += ", " + Bytes(static_cast<double>(x.eval.peak_memory_bytes)) +
                        " peak when partitioned";
  return ReportError(Status::Error(msg));
}

int RunAutoshard(AutoshardFlags flags) {
  if (!flags.memory_limit.empty()) {
    auto bytes = ParseBytes(flags.memory_limit);
    if (!bytes.ok()) return ReportError(bytes.status());
    flags.machine.memory_limit_bytes = *bytes;
  }
  if (!flags.profile.empty()) {
    StatusOr<MachineProfile> profile = ReadMachineProfile(flags.profile);
    if (!profile.ok()) return ReportError(profile.status());
    flags.machine.UseProfile(*profile);
  }
  if (flags.budget < 1) return ReportError(Status::Error("--budget must be at least 1"));
  if (flags.solver != "search" && flags.solver != "ilp" && flags.solver != "lp")
    return ReportError(Status::Error("--solver: unknown solver '" + flags.solver +
                                     "' (search, ilp or lp)"));
  const bool exact = flags.solver != "search";
  autoshard::ExactConstraints constraints = autoshard::ExactConstraints::kBest;
  if (flags.ilp_constraints == "params") constraints = autoshard::ExactConstraints::kParameters;
  else if (flags.ilp_constraints == "dots") constraints = autoshard::ExactConstraints::kDots;
  else if (flags.ilp_constraints == "all") constraints = autoshard::ExactConstraints::kAll;
  else if (flags.ilp_constraints != "best")
    return ReportError(Status::Error("--ilp-constraints: '" + flags.ilp_constraints +
                                     "' is not params, dots, all or best"));
  CompileOptions load;
  load.until = CompileStage::kPrepared;
  load.verify_input = true;
  load.expand_batch_norm = !flags.keep_batch_norm;
  load.parse = flags.parse;
  std::unique_ptr<Module> loaded;
  if (auto prepared = CompileFile(flags.file, load, &loaded); !prepared.ok())
    return ReportError(prepared.status());
  Module& module = *loaded;
  auto mesh = ResolveMesh(flags, module);
  if (!mesh.ok()) return ReportError(mesh.status());
  autoshard::PlanOptions plan;
  plan.existing_axes = flags.existing_axes;
  plan.space.min_bytes = flags.min_bytes;
  plan.space.max_groups = flags.max_groups;
  plan.space.keep_existing = flags.keep_existing;
  plan.space.group_layers = !flags.no_group;
  plan.space.max_axes_per_dim = flags.max_axes_per_dim;
  plan.machine = flags.machine;
  plan.search.max_evaluations = flags.budget;
  plan.search.max_seconds = flags.time_limit;
  plan.search.seed = flags.seed;
  plan.search.restarts = flags.restarts;
  // On a terminal one line redrawn in place five times a second; otherwise
  // (logs, CI) a line every two seconds.
  const bool tty = isatty(STDERR_FILENO) != 0;
  bool drew = false;
  if (!flags.quiet) {
    plan.search.progress_seconds = tty ? 0.2 : 2.0;
    plan.search.progress = [tty, &drew](const std::string& line) {
      if (tty) {
        std::cerr << "\r" << line << "\033[K" << std::flush;
        drew = true;
      } else {
        std::cerr << line << std::endl;
      }
    };
  }
  // With a stage axis, one search per microbatch count (the budget split
  // between them; the stage axis is the pipeline's, not a decision's), and
  // the best plan over all of them; 0 stands for "not pipelined".
  std::vector<int64_t> micro_counts = {0};
  if (exact && !flags.pipeline_axis.empty())
    return ReportError(Status::Error("--solver " + flags.solver +
                                     " does not plan pipelines (--pipeline-axis): use the "
                                     "search (--solver search)"));
  if (!flags.pipeline_axis.empty()) {
    if (!mesh->AxisIndex(flags.pipeline_axis))
      return ReportError(Status::Error("--pipeline-axis: '" + flags.pipeline_axis +
                                       "' is not an axis of the mesh " + mesh->ToString()));
    micro_counts = flags.microbatches.empty() ? std::vector<int64_t>{0, 1, 2, 4, 8}
                                              : flags.microbatches;
    for (int64_t m : micro_counts)
      if (m < 0)
        return ReportError(
            Status::Error("--microbatches: each count must be >= 0 (0: not pipelined)"));
    plan.search.max_evaluations =
        std::max<int64_t>(1, flags.budget / static_cast<int64_t>(micro_counts.size()));
    if (flags.time_limit > 0)
      plan.search.max_seconds = flags.time_limit / static_cast<double>(micro_counts.size());
  }
  struct PipelineTry {
    int64_t microbatches = 0;
    std::unique_ptr<autoshard::Planner> planner;
    autoshard::SearchResult result;
  };
  std::vector<PipelineTry> tries;
  for (int64_t m : micro_counts) {
    autoshard::PlanOptions options = plan;
    if (m > 0) {
      PipelineSpec p;
      p.axis = flags.pipeline_axis;
      p.microbatches = m;
      options.pipeline = p;
    }
    std::unique_ptr<Module> copy = module.Clone();
    auto planner = autoshard::Planner::Create(*copy, *mesh, std::move(options));
    if (!planner.ok()) return ReportError(planner.status());
    tries.push_back({m, std::move(*planner), {}});
  }
  const DecisionSpace& space = tries.front().planner->space();

  // Expert plans to compare with, checked before the search runs.
  std::vector<std::pair<std::string, ShardSpec>> compare_specs;
  for (const std::string& path : flags.compare) {
    std::ifstream in(path);
    if (!in) return ReportError(Status::Error(path + ": cannot open sharding spec"));
    std::stringstream ss;
    ss << in.rdbuf();
    auto spec = ParseShardSpec(ss.str(), path);
    if (!spec.ok()) return ReportError(spec.status());
    if (!spec->has_mesh || spec->mesh.num_devices() != mesh->num_devices())
      return ReportError(Status::Error("--compare " + path + ": its mesh must have the " +
                                       std::to_string(mesh->num_devices()) +
                                       " devices of the search mesh"));
    compare_specs.emplace_back(path, std::move(*spec));
  }

  if (!flags.quiet)
    std::cerr << "autoshard: " << space.groups.size() << " decision groups ("
              << space.decided_tensors << " tensors), mesh " << mesh->ToString() << std::endl;
  size_t chosen = 0;
  autoshard::SearchResult r;
  autoshard::ExactResult x;                      // --solver ilp|lp
  std::optional<autoshard::IlpResult> lp_bound;  // --bound
  if (exact) {
    // One try: --pipeline-axis is refused with the exact planner.
    const autoshard::Planner* p = tries.front().planner.get();
    autoshard::ExactOptions eo;
    eo.relax = flags.solver == "lp";
    eo.constraints = constraints;
    eo.time_limit_seconds = flags.time_limit > 0 ? flags.time_limit : 1e9;
    const auto t0 = std::chrono::steady_clock::now();
    auto solved = p->SolveExact(eo);
    if (!solved.ok()) return ReportError(solved.status());
    x = std::move(*solved);
    r.initial = autoshard::InitialChoice(space);
    r.initial_eval = p->evaluator().Evaluate(r.initial);
    r.best = x.choice;
    r.best_eval = x.eval;
    r.evaluations = x.solves * x.lowerings_evaluated + 1;
    r.stop_reason = autoshard::IlpStatusName(x.ilp.status);
    r.converged = x.ilp.status == autoshard::IlpStatus::kOptimal;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } else {
    for (size_t k = 0; k < tries.size(); ++k) {
      if (!flags.quiet && tries[k].microbatches > 0)
        std::cerr << "autoshard: pipelined over " << flags.pipeline_axis << " with "
                  << tries[k].microbatches << " microbatches" << std::endl;
      else if (!flags.quiet && !flags.pipeline_axis.empty())
        std::cerr << "autoshard: not pipelined" << std::endl;
      tries[k].result = tries[k].planner->Search();
      if (Better(tries[k].result.best_eval, tries[chosen].result.best_eval)) chosen = k;
    }
    if (drew) std::cerr << "\n";
    r = tries[chosen].result;
    for (const PipelineTry& t : tries)
      if (&t != &tries[chosen]) {
        r.evaluations += t.result.evaluations;
        r.failed += t.result.failed;
        r.why_evaluations += t.result.why_evaluations;
        r.cache_hits += t.result.cache_hits;
        r.seconds += t.result.seconds;
      }
  }
  const autoshard::Planner* planner = tries[chosen].planner.get();
  const autoshard::Evaluator& evaluator = planner->evaluator();
  if (!exact && flags.bound) {
    autoshard::ExactOptions eo;
    eo.relax = true;
    eo.time_limit_seconds = flags.time_limit > 0 ? flags.time_limit : 1e9;
    auto solved = planner->SolveExact(eo);
    if (!solved.ok()) return ReportError(solved.status());
    lp_bound = solved->ilp;
  }
  // The lower bound and the gap of the plan to it (ILP: CBC's best bound;
  // lp and --bound: the relaxation's optimum). The bound holds for the ILP's
  // cost model; the plan's cost is the evaluated one.
  std::optional<double> bound, gap;
  if (exact && !x.infeasible) bound = x.ilp.bound_seconds;
  else if (lp_bound && lp_bound->status == autoshard::IlpStatus::kOptimal)
    bound = lp_bound->bound_seconds;
  if (bound && r.best_eval.ok && r.best_eval.time_seconds > 0)
    gap = (r.best_eval.time_seconds - *bound) / r.best_eval.time_seconds;

  std::vector<std::pair<std::string, Evaluation>> compared;
  for (const auto& [path, spec] : compare_specs)
    compared.emplace_back(path, evaluator.EvaluateSpec(spec));

  const ShardSpec best_spec = exact ? x.spec : planner->SpecOf(r.best);
  const std::string spec_text = autoshard::SpecToJson(
      best_spec, "found by meshsplit autoshard " + flags.file + " (mesh " + mesh->ToString() +
                     ", " + std::to_string(r.evaluations) + " candidates, estimated " +
                     Micros(r.best_eval.time_seconds) + " per step, machine profile " +
                     (flags.machine.has_profile ? flags.machine.profile.Describe()
                                                : std::string("defaults")) +
                     ")");
  if (!flags.output.empty() && !x.infeasible) {
    std::ofstream out(flags.output);
    if (!out) return ReportError(Status::Error("-o: cannot write " + flags.output));
    out << spec_text;
  }

  if (flags.json) {
    nlohmann::ordered_json j;
    j["file"] = flags.file;
    j["mesh"] = mesh->ToString();
    j["machine"] = {{"flops_per_second", flags.machine.flops_per_second},
                    {"memory_bytes_per_second", flags.machine.memory_bytes_per_second},
                    {"link_bytes_per_second", flags.machine.link_bytes_per_second},
                    {"collective_latency_seconds", flags.machine.collective_latency_seconds},
                    {"memory_limit_bytes", flags.machine.memory_limit_bytes},
                    {"profile", flags.machine.has_profile ? flags.machine.profile.Describe()
                                                          : std::string("defaults")}};
    j["search"] = {{"groups", space.groups.size()},
                   {"tensors", space.decided_tensors},
                   {"evaluations", r.evaluations},
                   {"failed", r.failed},
                   {"why_evaluations", r.why_evaluations},
                   {"cache_hits", r.cache_hits},
                   {"descent_passes", r.descent_passes},
                   {"restarts", r.restarts_done},
                   {"seeds", r.seeds_tried},
                   {"converged", r.converged},
                   {"stop_reason", r.stop_reason},
                   {"seconds", r.seconds}};
    j["solver"] = SolverJson(flags.solver, x, lp_bound);
    j["bound"] = bound ? nlohmann::ordered_json(*bound) : nlohmann::ordered_json(nullptr);
    j["gap"] = gap ? nlohmann::ordered_json(*gap) : nlohmann::ordered_json(nullptr);
    j["initial"] = EvalJson(r.initial_eval);
    j["best"] = EvalJson(r.best_eval);
    nlohmann::ordered_json plan = nlohmann::ordered_json::array();
    for (size_t g = 0; g < space.groups.size(); ++g) {
      const auto& grp = space.groups[g];
      plan.push_back({{"label", grp.label},
                      {"members", grp.members},
                      {"shape", grp.shape},
                      {"bytes", grp.bytes},
                      {"dims", autoshard::OptionToString(grp.options[r.best[g]], *mesh)},
                      {"initial_dims", autoshard::OptionToString(grp.options[grp.initial], *mesh)}});
    }
    j["plan"] = std::move(plan);
    nlohmann::ordered_json why = nlohmann::ordered_json::array();
    for (const auto& a : r.why) {
      const auto& grp = space.groups[a.group];
      why.push_back({{"label", grp.label},
                     {"chosen", autoshard::OptionToString(grp.options[r.best[a.group]], *mesh)},
                     {"alternative", autoshard::OptionToString(grp.options[a.option], *mesh)},
                     {"alternatives_costed", a.costed},
                     {"alternatives", a.options},
                     {"cost", EvalJson(a.eval)}});
      if (a.eval.ok && r.best_eval.ok)
        why.back()["verdict"] = autoshard::Explain(r.best_eval, a.eval, flags.machine).text;
    }
    j["why"] = std::move(why);
    if (!flags.pipeline_axis.empty()) {
      nlohmann::ordered_json pj;
      pj["axis"] = flags.pipeline_axis;
      pj["microbatches"] = tries[chosen].microbatches;
      nlohmann::ordered_json tried = nlohmann::ordered_json::array();
      for (const PipelineTry& t : tries)
        tried.push_back({{"microbatches", t.microbatches},
                         {"evaluations", t.result.evaluations},
                         {"best", EvalJson(t.result.best_eval)}});
      pj["tried"] = std::move(tried);
      j["pipeline"] = std::move(pj);
    }
    if (const std::string headline = ReplicationHeadline(r, space, *mesh, flags.machine);
        !headline.empty())
      j["replication_wins"] = headline;
    nlohmann::ordered_json cmp = nlohmann::ordered_json::array();
    for (const auto& [path, e] : compared) cmp.push_back({{"spec", path}, {"cost", EvalJson(e)}});
    j["compare"] = std::move(cmp);
    j["spec"] = nlohmann::ordered_json::parse(spec_text);
    std::cout << j.dump(2) << "\n";
    return x.infeasible ? ReportInfeasible(flags, x) : 0;
  }

  std::ostream& os = std::cout;
  os << "autoshard " << flags.file << ": mesh " << mesh->ToString() << ", "
     << space.groups.size() << " decision groups (" << space.decided_tensors << " tensors)\n";
  if (exact) {
    PrintExact(os, flags.solver, x);
  } else {
    os << "search: " << r.evaluations << " candidates partitioned and costed (" << r.failed
       << " failed)";
    if (r.why_evaluations > 0) os << " + " << r.why_evaluations << " for the why";
    os << ", " << r.cache_hits << " cache hits, " << r.descent_passes
       << " descent passes from the best of " << r.seeds_tried + 1 << " starts, "
       << r.restarts_done << " restarts, stopped: " << r.stop_reason;
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.2f", r.seconds);
    os << ", " << secs << " s\n";
  }
  os << "objective: estimated step time = max(flops / " << flags.machine.flops_per_second
     << ", bytes / " << flags.machine.memory_bytes_per_second << ") + sum over collectives of ";
  if (flags.machine.has_profile)
    os << "(latency + wire / bandwidth of its kind and mesh axes, profile "
       << flags.machine.profile.Describe() << ")";
  else
    os << "(wire / " << flags.machine.link_bytes_per_second << " + "
       << flags.machine.collective_latency_seconds << " s)";
  if (flags.machine.memory_limit_bytes > 0)
    os << ", peak memory <= " << Bytes(static_cast<double>(flags.machine.memory_limit_bytes));
  os << "\n\n";
  os << "initial: " << EvalLine(r.initial_eval) << "\n";
  if (exact && r.initial_eval.ok && x.initial_estimate.time_seconds > 0) {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "         ILP estimate %s: evaluated / estimate = %.3f; memory %s: %.3f\n",
                  Micros(x.initial_estimate.time_seconds).c_str(),
                  r.initial_eval.time_seconds / x.initial_estimate.time_seconds,
                  Bytes(x.initial_estimate.memory_bytes).c_str(),
                  MemoryRatio(r.initial_eval, x.initial_estimate));
    os << buf;
  }
  os << "best:    " << EvalLine(r.best_eval) << "\n";
  if (exact && r.best_eval.ok && x.ilp.objective_seconds > 0 && !x.infeasible) {
    char buf[240];
    std::snprintf(buf, sizeof(buf),
                  "ILP estimate %s, evaluated %s: evaluated / estimate = %.3f; memory %s, "
                  "evaluated %s: %.3f\n",
                  Micros(x.ilp.objective_seconds).c_str(), Micros(r.best_eval.time_seconds).c_str(),
                  r.best_eval.time_seconds / x.ilp.objective_seconds,
                  Bytes(x.ilp.cost.memory_bytes).c_str(),
                  Bytes(static_cast<double>(r.best_eval.peak_memory_bytes)).c_str(),
                  MemoryRatio(r.best_eval, x.ilp.cost));
    os << buf;
  }
  if (bound) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "bound: %s (%s), gap of best to it %.2f%%\n",
                  Micros(*bound).c_str(),
                  flags.solver == "ilp" ? "CBC's best bound" : "LP relaxation",
                  gap ? *gap * 100 : 0.0);
    os << buf;
    // The bound holds for the ILP's cost model, not for the partitioner: a
    // plan the partitioner does better than the model thinks can beat it.
    if (gap && *gap < 0)
      os << "         (below the bound: the ILP's model overestimates this plan's partitioned "
            "program)\n";
  }
  for (const auto& [path, e] : compared) os << "compare " << path << ": " << EvalLine(e) << "\n";
  if (!flags.pipeline_axis.empty()) {
    os << "\npipeline over " << flags.pipeline_axis << " (gpipe), best plan per microbatch count:\n";
    for (const PipelineTry& t : tries)
      os << "  " << (&t == &tries[chosen] ? "* " : "  ")
         << (t.microbatches == 0 ? std::string("not pipelined (") + flags.pipeline_axis +
                                       " as a decision axis)"
                                 : std::to_string(t.microbatches) + " microbatches")
         << ": " << EvalLine(t.result.best_eval) << "\n";
  }
  os << "\nplan:\n";
  for (size_t g = 0; g < space.groups.size(); ++g) {
    const auto& grp = space.groups[g];
    os << "  " << grp.label;
    if (grp.members.size() > 1) os << " (" << grp.members.size() << " tensors)";
    os << " " << grp.shape << " " << autoshard::OptionToString(grp.options[r.best[g]], *mesh);
    if (r.best[g] != grp.initial)
      os << "   (was " << autoshard::OptionToString(grp.options[grp.initial], *mesh) << ")";
    os << "\n";
    // A pattern that does not name its members alone: list them.
    if (grp.members.size() > 1 && !grp.label_is_exact_glob) {
      os << "     ";
      for (size_t k = 0; k < grp.members.size(); ++k) os << (k ? ", " : " ") << grp.members[k];
      os << "\n";
    }
  }
  if (!r.why.empty()) {
    os << "\nwhy (the best other choice for the largest tensors, all else as planned):\n";
    for (const auto& a : r.why) {
      const auto& grp = space.groups[a.group];
      os << "  " << grp.label << " " << autoshard::OptionToString(grp.options[a.option], *mesh)
         << " instead of " << autoshard::OptionToString(grp.options[r.best[a.group]], *mesh) << ": ";
      if (!a.eval.ok) {
        os << a.eval.error << "\n";
        continue;
      }
      os << Micros(a.eval.time_seconds);
      if (r.best_eval.ok && r.best_eval.time_seconds > 0) {
        char buf[48];
        std::snprintf(buf, sizeof(buf), " (%.3gx)", a.eval.time_seconds / r.best_eval.time_seconds);
        os << buf;
      }
      os << ", " << CollectiveSummary(a.eval) << ", peak "
         << Bytes(static_cast<double>(a.eval.peak_memory_bytes))
         << (a.eval.feasible ? "" : " OVER THE LIMIT");
      if (a.costed < a.options)
        os << " (best of " << a.costed << " of " << a.options << " alternatives costed)";
      os << "\n";
      if (r.best_eval.ok)
        os << "      it " << autoshard::Explain(r.best_eval, a.eval, flags.machine).text << "\n";
    }
  }
  if (const std::string headline = ReplicationHeadline(r, space, *mesh, flags.machine);
      !headline.empty())
    os << "\nreplication wins: " << headline << "\n";
  if (!flags.output.empty() && !x.infeasible) os << "\nwrote " << flags.output << "\n";
  return x.infeasible ? ReportInfeasible(flags, x) : 0;
}

const bool registered = RegisterCommand(
    "autoshard", "search shardings for inputs and weights (Automap-style) and write a spec",
    [](CLI::App* app) {
      auto f = std::make_shared<AutoshardFlags>();
      app->add_option("file", f->file, "HLO or ONNX file ('-' for stdin)")->required();
      app->add_option("--mesh", f->mesh, "device mesh 'data=2,model=4'");
      AddXlaStrictFlag(app, &f->parse);
      AddNumPartitionsFlag(app, &f->num_partitions,
                           "number of devices (a one-axis mesh 'all=N' when --mesh is not "
                           "given; default: the module header's, else the devices its "
                           "shardings name)");
      app->add_option("--budget", f->budget,
                      "at most N candidates partitioned and costed (default 300)");
      app->add_option("--time-limit", f->time_limit,
                      "stop the search after S seconds (default 50; 0 = no limit)");
      app->add_option("--seed", f->seed, "seed of the restart perturbations (default 0)");
      app->add_option("--restarts", f->restarts,
                      "perturbation restarts after the first descent (default 3)");
      app->add_option("--memory-limit", f->memory_limit,
                      "peak memory per device must stay below this (bytes, or 16GiB, 512MiB...)");
      app->add_option("--min-bytes", f->min_bytes,
                      "tensors smaller than this are not decided (default 1024)");
      app->add_option("--max-groups", f->max_groups,
                      "decide only the N largest groups of tensors (default 64)");
      app->add_flag("--keep-existing", f->keep_existing,
                    "tensors that carry a sharding keep it (else it is only the start)");
      app->add_flag("--no-group", f->no_group,
                    "decide every tensor alone (default: layers of the same shape and name "
                    "pattern decide together)");
      app->add_option("--max-axes-per-dim", f->max_axes_per_dim,
                      "split one tensor dim over up to N mesh axes (default 1)");
      app->add_option("--existing-axes", f->existing_axes,
                      "mesh axes the module's own shardings were written for (lifted first, "
                      "as the spec key existing_axes)")
          ->delimiter(',');
      app->add_option("--compare", f->compare,
                      "also cost this spec (an expert plan) with the same objective")
          ->allow_extra_args(false);
      CLI::Option* rates[] = {
          app->add_option("--flops-per-second", f->machine.flops_per_second,
                          "objective: device compute rate (default 1e14)"),
          app->add_option("--memory-bandwidth", f->machine.memory_bytes_per_second,
                          "objective: device memory bytes per second (default 1e12)"),
          app->add_option("--link-bandwidth", f->machine.link_bytes_per_second,
                          "objective: collective wire bytes per second (default 5e10)"),
          app->add_option("--collective-latency", f->machine.collective_latency_seconds,
                          "objective: seconds per collective execution (default 5e-6)")};
      app->add_option("--pipeline-axis", f->pipeline_axis,
                      "also plan pipeline parallelism over this mesh axis (the model's layer "
                      "loops, gpipe; docs/pipeline.md): one search per microbatch count");
      app->add_option("--microbatches", f->microbatches,
                      "with --pipeline-axis: the microbatch counts tried, 0 = not pipelined "
                      "(default 0,1,2,4,8)")
          ->delimiter(',');
      CLI::Option* profile = app->add_option(
          "--profile", f->profile,
          "objective: rates from a machine profile written by 'meshsplit calibrate' "
          "(per collective kind and mesh axes) instead of the four rate flags");
      for (CLI::Option* rate : rates) profile->excludes(rate);
      app->add_option("--solver", f->solver,
                      "search (default: coordinate descent over candidates), ilp (exact: "
                      "per-op strategies solved with CBC; --time-limit bounds it) or lp "
                      "(its relaxation: a lower bound, the plan rounded)");
      app->add_option("--ilp-constraints", f->ilp_constraints,
                      "ilp/lp: what the written spec states of the solution: params (the "
                      "parameters only), dots (also every dot's result, as match_op rules), "
                      "all (every op's result) or best (the cheapest of the three, "
                      "evaluated; default)");
      app->add_flag("--bound", f->bound,
                    "search: also solve the LP relaxation and report the gap to it");
      app->add_option("-o,--output", f->output, "write the best plan as a sharding spec JSON");
      app->add_flag("--json", f->json, "print one JSON document");
      app->add_flag("--quiet", f->quiet, "no progress lines on stderr");
      app->add_flag("--keep-batch-norm", f->keep_batch_norm,
                    "keep batch-norm ops fused (as partition --keep-batch-norm)");
      return [f]() { return RunAutoshard(*f); };
    });

}  // namespace
}  // namespace meshsplit::cli
