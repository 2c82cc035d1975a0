// `meshsplit calibrate`: measures the rates of a machine profile
// (cost/machine_profile.h) by running small SPMD programs on the executor
// that real runs use, on the threads or MPI backend: per mesh axis (and the
// whole mesh) and collective kind, the time of one collective at a few sizes,
// fitted to latency + wire bytes / bandwidth with the cost model's own wire
// bytes; a matmul for the compute rate and an elementwise pass for the memory
// rate, run on every device at once (what one device gets while all run).
// Each measurement is the difference of two loop lengths, so start-up and
// input distribution cancel out.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cost/machine_profile.h"
#include "sharding/mesh.h"
#include "support/status.h"

namespace meshsplit {

struct CalibrateOptions {
  Mesh mesh;
  std::string backend = "threads";  // "threads" | "mpi" (under mpirun, one rank per device)
  // Per-device operand bytes of the collective measurements.
  std::vector<int64_t> sizes = {4 << 10, 64 << 10, 1 << 20};
  // Target wall time of one timed loop; the loop length adapts to it.
  double loop_seconds = 0.05;
  // Called after each measurement with (done, total, what) for progress.
  std::function<void(int, int, const std::string&)> progress;
};

// One fitted series: time per execution at each size.
struct CollectiveSample {
  std::string kind;
  std::string axes;
  int64_t group_size = 0;
  std::vector<double> wire_bytes;  // per execution, the cost model's
  std::vector<double> seconds;     // per execution, measured
  LinkRate fitted;
};

struct CalibrateResult {
  MachineProfile profile;  // on MPI: complete on rank 0 only
  std::vector<CollectiveSample> samples;
  bool is_root = true;
};

StatusOr<CalibrateResult> Calibrate(const CalibrateOptions& options);

// Least-squares fit of seconds = latency + wire / bandwidth (latency >= 0;
// a non-increasing series gets the best observed bandwidth).
LinkRate FitLinkRate(const std::vector<double>& wire_bytes, const std::vector<double>& seconds);

}  // namespace meshsplit
