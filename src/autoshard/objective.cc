// Scoring of one candidate: spec -> propagation -> partitioner -> cost model
// -> estimated step time.
#include "autoshard/objective.h"

#include <algorithm>
#include <cmath>

#include "compiler/compile.h"
#include "cost/cost_model.h"

namespace meshsplit::autoshard {
namespace {

bool LessWithTolerance(double a, double b) { return a < b - 1e-9 * std::max(a, b); }

Evaluation Failed(const std::string& stage, const Status& st) {
  Evaluation e;
  e.error = stage + ": " + st.message();
  return e;
}

}  // namespace

LinkRate MachineModel::CollectiveRate(const std::string& kind, const std::string& axes) const {
  if (has_profile) return profile.RateFor(kind, axes);
  return {collective_latency_seconds, link_bytes_per_second};
}

MachineProfile MachineModel::AsProfile() const {
  if (has_profile) return profile;
  MachineProfile p;
  p.flops_per_second = flops_per_second;
  p.memory_bytes_per_second = memory_bytes_per_second;
  p.link = {collective_latency_seconds, link_bytes_per_second};
  return p;
}

void MachineModel::UseProfile(const MachineProfile& p) {
  profile = p;
  has_profile = true;
  flops_per_second = p.flops_per_second;
  memory_bytes_per_second = p.memory_bytes_per_second;
  link_bytes_per_second = p.link.bytes_per_second;
  collective_latency_seconds = p.link.latency_seconds;
}

bool Better(const Evaluation& a, const Evaluation& b) {
  if (a.ok != b.ok) return a.ok;
  if (!a.ok) return false;
  if (a.feasible != b.feasible) return a.feasible;
  if (!a.feasible) return a.peak_memory_bytes < b.peak_memory_bytes;
  if (LessWithTolerance(a.time_seconds, b.time_seconds)) return true;
  if (LessWithTolerance(b.time_seconds, a.time_seconds)) return false;
  return a.peak_memory_bytes < b.peak_memory_bytes;
}

Evaluator::Evaluator(const Module& module, const DecisionSpace& space, MachineModel machine,
                     std::vector<std::string> lifted_axes)
    : module_(module.Clone()),
      space_(space),
      machine_(machine),
      lifted_axes_(std::move(lifted_axes)) {}

Evaluation Evaluator::Evaluate(const Choice& choice) const {
  ShardSpec spec = ChoiceToSpec(space_, choice);
  spec.pipeline = pipeline_;
  return EvaluateSpec(spec);
}

Evaluation Evaluator::EvaluateSpec(const ShardSpec& spec_in) const {
  ShardSpec spec = spec_in;
  if (!spec.existing_axes.empty()) {
    if (spec.existing_axes != lifted_axes_) {
      std::string axes;
      for (const auto& a : spec.existing_axes) axes += (axes.empty() ? "" : ",") + a;
      return Failed("spec", Status::Error("it lifts the module's shardings with existing_axes " +
                                          axes + ", the search did not (give --existing-axes " +
                                          axes + ")"));
    }
    spec.existing_axes.clear();  // already applied to the module text
  }
  // A fresh copy per candidate: propagation and the spec edit it in place.
  std::unique_ptr<Module> module = module_->Clone();
  CompileOptions options;
  options.spec = std::make_shared<const ShardSpec>(std::move(spec));
  options.partition.num_partitions = space_.mesh.num_devices();
  options.partition.warn_on_fallback = false;
  CompileResult compiled;
  if (Status st = Compile(*module, options, &compiled); !st.ok()) {
    // The stage names the evaluation has always reported.
    const std::string& pass = compiled.failed_pass;
    return Failed(pass == "apply-spec" ? "spec" : pass == "propagate" ? "propagation" : pass, st);
  }
  CostOptions copts;
  copts.mesh = &space_.mesh;
  const ModuleCost cost = ComputeModuleCost(*compiled.partitioned, copts);

  Evaluation e;
  e.ok = true;
  e.flops = cost.flops;
  e.bytes_accessed = cost.bytes_read + cost.bytes_written;
  e.peak_memory_bytes = cost.peak_memory_bytes;
  const StepTime t = EstimateStepTime(cost, machine_.AsProfile());
  e.compute_seconds = t.compute_seconds;
  e.memory_seconds = t.memory_seconds;
  e.comm_latency_seconds = t.comm_latency_seconds;
  e.comm_wire_seconds = t.comm_wire_seconds;
  e.comm_seconds = t.comm_seconds();
  e.time_seconds = t.total_seconds();
  for (const CollectiveCost& c : cost.collectives) {
    e.wire_bytes += c.wire_bytes * static_cast<double>(c.count);
    e.num_collectives += c.count;
    e.collectives_by_kind[c.kind] += c.count;
  }
  e.wire_bytes_by_axis = cost.wire_bytes_by_axis;
  e.feasible = machine_.memory_limit_bytes <= 0 ||
               e.peak_memory_bytes <= machine_.memory_limit_bytes;
  return e;
}

}  // namespace meshsplit::autoshard
