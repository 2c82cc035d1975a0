// A machine profile: the rates that turn the cost model's counts (FLOPs,
// bytes moved, wire bytes per collective) into seconds. `meshsplit calibrate`
// measures one on the machine and backend at hand and writes it as JSON;
// `autoshard --profile` and `report --profile` read it. Without a profile the
// defaults are a round accelerator (100 TFLOP/s, 1 TB/s, 50 GB/s links, 5 us
// per collective), the constants the planner has always used.
#pragma once

#include <map>
#include <string>

#include "cost/cost_model.h"
#include "support/status.h"

namespace meshsplit {

// time = latency + wire bytes / bandwidth, for one collective execution.
struct LinkRate {
  double latency_seconds = 5e-6;
  double bytes_per_second = 50e9;
};

struct MachineProfile {
  double flops_per_second = 100e12;
  double memory_bytes_per_second = 1e12;
  // Collectives the profile has no entry for.
  LinkRate link;
  // Measured rates by collective kind and mesh axes, keyed "kind@axes"
  // ("all-reduce@model", "all-gather@data,model"; CollectiveCost's kind and
  // mesh_axes).
  std::map<std::string, LinkRate> collectives;
  // Where the numbers come from: "defaults", or the file read; and what the
  // calibration ran on.
  std::string source = "defaults";
  std::string backend;      // "threads" | "mpi"
  std::string mesh;         // "data=2,model=4"
  std::string measured_at;  // ISO 8601 UTC
  double calibration_seconds = 0;

  // The rate for a collective of `kind` over `axes`: the exact entry, else
  // the slowest measured entry of that kind over any one of those axes, else
  // `link`.
  LinkRate RateFor(const std::string& kind, const std::string& axes) const;
  double CollectiveSeconds(const std::string& kind, const std::string& axes,
                           double wire_bytes) const {
    const LinkRate r = RateFor(kind, axes);
    return r.latency_seconds + wire_bytes / r.bytes_per_second;
  }
  // One line for reports: "defaults" or "FILE (threads, data=2,model=4, 2026-12-02T07:40Z)".
  std::string Describe() const;
};

// The estimated step time of a costed program under a profile: a roofline
// over the whole program plus the collectives, which do not overlap with it.
// The planner's objective and `report --profile` both use this.
struct StepTime {
  double compute_seconds = 0;       // flops / flops_per_second
  double memory_seconds = 0;        // (bytes read + written) / memory bandwidth
  double comm_latency_seconds = 0;  // sum of count * latency
  double comm_wire_seconds = 0;     // sum of count * wire / bandwidth
  double comm_seconds() const { return comm_latency_seconds + comm_wire_seconds; }
  double total_seconds() const {
    return (compute_seconds > memory_seconds ? compute_seconds : memory_seconds) + comm_seconds();
  }
};
StepTime EstimateStepTime(const ModuleCost& cost, const MachineProfile& profile);

// The profile's JSON document (docs/calibrate.md).
std::string MachineProfileToJson(const MachineProfile& profile);
// Parses a profile document; `name` is used in messages and becomes `source`.
StatusOr<MachineProfile> ParseMachineProfile(const std::string& text, const std::string& name);
StatusOr<MachineProfile> ReadMachineProfile(const std::string& path);

}  // namespace meshsplit
