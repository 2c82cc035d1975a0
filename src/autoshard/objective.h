// The objective of the auto-sharding search: one candidate plan (a choice
// vector) is applied as a sharding spec, completed by propagation, partitioned
// and costed by the exact cost model (cost/cost_model.h); the cost becomes
// one scalar, an estimated step time, with per-device memory as a hard cap.
// Nothing is guessed: a candidate is scored only from its partitioned program.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "autoshard/decision_space.h"
#include "cost/machine_profile.h"
#include "ir/module.h"

namespace meshsplit::autoshard {

// Machine constants of the estimated step time. The defaults are a round
// accelerator: 100 TFLOP/s, 1 TB/s of memory bandwidth, 50 GB/s per link and
// 5 us of latency per collective.
struct MachineModel {
  double flops_per_second = 100e12;
  double memory_bytes_per_second = 1e12;
  double link_bytes_per_second = 50e9;
  double collective_latency_seconds = 5e-6;
  // Hard cap on peak live memory per device; 0 = no cap.
  int64_t memory_limit_bytes = 0;
  // A calibrated profile (`--profile`, cost/machine_profile.h): its rates
  // replace the four above, and collectives take the rate measured for
  // their kind and mesh axes.
  MachineProfile profile;
  bool has_profile = false;

  // The latency and bandwidth of a collective (kind and axes as the cost
  // model names them), and the seconds of one execution.
  LinkRate CollectiveRate(const std::string& kind, const std::string& axes) const;
  // The profile the objective prices with: the calibrated one, or the four
  // rates above as a profile with no per-collective entries.
  MachineProfile AsProfile() const;
  double CollectiveSeconds(const std::string& kind, const std::string& axes,
                           double wire_bytes) const {
    const LinkRate r = CollectiveRate(kind, axes);
    return r.latency_seconds + wire_bytes / r.bytes_per_second;
  }
  // Takes `p`'s rates (memory_limit_bytes is kept).
  void UseProfile(const MachineProfile& p);
};

// The scored cost of one candidate.
struct Evaluation {
  bool ok = false;        // propagated and partitioned
  std::string error;      // why not, when !ok
  bool feasible = false;  // ok and within the memory cap
  // time = max(compute, memory traffic) + communication: a roofline over the
  // whole program plus the collectives, which do not overlap with it.
  double time_seconds = 0;
  double compute_seconds = 0;   // flops / flops_per_second
  double memory_seconds = 0;    // (bytes read + written) / memory bandwidth
  double comm_seconds = 0;      // sum of count * (wire / link + latency)
  double comm_latency_seconds = 0;  // the latency part of comm_seconds
  double comm_wire_seconds = 0;     // the bandwidth part
  double flops = 0;
  double bytes_accessed = 0;
  double wire_bytes = 0;        // per device, loops counted
  int64_t peak_memory_bytes = 0;
  int64_t num_collectives = 0;  // executions, loops counted
  std::map<std::string, int64_t> collectives_by_kind;  // executions per kind
  std::map<std::string, double> wire_bytes_by_axis;
};

// True when `a` is strictly better than `b`: evaluable beats failed,
// feasible beats infeasible, then lower time (relative tolerance 1e-9), then
// lower peak memory; two infeasible candidates compare by peak memory.
bool Better(const Evaluation& a, const Evaluation& b);

// Applies, propagates, partitions and costs candidates of one module.
class Evaluator {
 public:
  // `module` is copied (cloned once, and again per candidate). When its
  // shardings were already lifted onto the mesh (ShardSpec::existing_axes),
  // `lifted_axes` names those axes so that a spec repeating them is not
  // lifted twice.
  Evaluator(const Module& module, const DecisionSpace& space, MachineModel machine,
            std::vector<std::string> lifted_axes = {});

  // Scores `choice`. Never fails: a candidate whose spec, propagation or
  // partitioning errors comes back with ok = false and the message.
  Evaluation Evaluate(const Choice& choice) const;

  // Scores an arbitrary spec on the same module (used to cost expert plans
  // with the same objective).
  Evaluation EvaluateSpec(const ShardSpec& spec) const;

  const MachineModel& machine() const { return machine_; }
  // Every candidate choice is pipelined so (EvaluateSpec takes the spec's own
  // "pipeline" key, or none).
  void set_pipeline(std::optional<PipelineSpec> pipeline) { pipeline_ = std::move(pipeline); }
  const std::optional<PipelineSpec>& pipeline() const { return pipeline_; }

 private:
  std::unique_ptr<Module> module_;
  const DecisionSpace& space_;
  MachineModel machine_;
  std::vector<std::string> lifted_axes_;
  std::optional<PipelineSpec> pipeline_;
};

}  // namespace meshsplit::autoshard
