// Calibration programs and their timing (calibrate.h).
#include "verify/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "cost/cost_model.h"
#include "text/parser.h"
#include "verify/mpi_runner.h"
#include "verify/run_spmd.h"

namespace meshsplit {
namespace {

using Clock = std::chrono::steady_clock;

// One timed program: a while loop whose body runs `op` (which reads the
// carried `x` and writes `y`) once per trip, on every device.
struct LoopProgram {
  std::string what;     // for progress lines
  std::string x_shape;  // per device, e.g. "f32[1024]"
  std::string y_shape;
  std::string op;       // the body's "y = <y_shape> ..." line, without "y = Y"
  int64_t trips = 8;
};

std::string ShardingOfRank(int64_t devices, int64_t rank) {
  std::string dims = std::to_string(devices);
  for (int64_t i = 1; i < rank; ++i) dims += ",1";
  return "{devices=[" + dims + "]<=[" + std::to_string(devices) + "]}";
}

int64_t RankOf(const std::string& shape) {
  return std::count(shape.begin(), shape.end(), ',') + 1;
}

std::string ModuleText(const LoopProgram& p, int64_t devices, int64_t trips) {
  const std::string tuple = "(s32[], " + p.x_shape + ", " + p.y_shape + ")";
  std::string t = "HloModule calibrate, num_partitions=" + std::to_string(devices) + "\n\n";
  t += "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n";
  t += "cond {\n  p = " + tuple + " parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n";
  t += "  k = s32[] constant(" + std::to_string(trips) + ")\n";
  t += "  ROOT lt = pred[] compare(i, k), direction=LT\n}\n\n";
  t += "body {\n  p = " + tuple + " parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n";
  t += "  x = " + p.x_shape + " get-tuple-element(p), index=1\n";
  t += "  one = s32[] constant(1)\n  next = s32[] add(i, one)\n";
  t += "  y = " + p.y_shape + " " + p.op + "\n";
  t += "  ROOT t = " + tuple + " tuple(next, x, y)\n}\n\n";
  t += "ENTRY main {\n  x = " + p.x_shape + " parameter(0), sharding=" +
       ShardingOfRank(devices, RankOf(p.x_shape)) + "\n";
  t += "  zero = s32[] constant(0)\n  f0 = f32[] constant(0)\n";
  t += "  y0 = " + p.y_shape + " broadcast(f0), dimensions={}\n";
  t += "  init = " + tuple + " tuple(zero, x, y0)\n";
  t += "  w = " + tuple + " while(init), condition=cond, body=body\n";
  t += "  ROOT out = " + p.y_shape + " get-tuple-element(w), index=2, sharding=" +
       ShardingOfRank(devices, RankOf(p.y_shape)) + "\n}\n";
  return t;
}

// Devices of each group spanning `axes` (indices): the devices that agree on
// every other axis, ordered row-major over `axes`.
std::vector<std::vector<int64_t>> GroupsAlong(const Mesh& mesh, const std::vector<int64_t>& axes) {
  std::vector<std::vector<int64_t>> groups;
  std::vector<int64_t> others;
  for (int64_t a = 0; a < mesh.num_axes(); ++a)
    if (std::find(axes.begin(), axes.end(), a) == axes.end()) others.push_back(a);
  auto count = [&](const std::vector<int64_t>& which) {
    int64_t n = 1;
    for (int64_t a : which) n *= mesh.axes()[a].size;
    return n;
  };
  // Fills coords[which] with the row-major position `flat` over `which`.
  auto place = [&](const std::vector<int64_t>& which, int64_t flat, std::vector<int64_t>& coords) {
    for (int64_t i = static_cast<int64_t>(which.size()) - 1; i >= 0; --i) {
      coords[which[i]] = flat % mesh.axes()[which[i]].size;
      flat /= mesh.axes()[which[i]].size;
    }
  };
  std::vector<int64_t> coords(mesh.num_axes(), 0);
  for (int64_t g = 0; g < count(others); ++g) {
    place(others, g, coords);
    std::vector<int64_t> group;
    for (int64_t m = 0; m < count(axes); ++m) {
      place(axes, m, coords);
      group.push_back(mesh.devices().DeviceAt(coords));
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string GroupsText(const std::vector<std::vector<int64_t>>& groups) {
  std::string t = "{";
  for (size_t g = 0; g < groups.size(); ++g) {
    t += g ? ",{" : "{";
    for (size_t i = 0; i < groups[g].size(); ++i)
      t += (i ? "," : "") + std::to_string(groups[g][i]);
    t += "}";
  }
  return t + "}";
}

// A ring shift inside every group: member j sends to member j+1.
std::string RingPairsText(const std::vector<std::vector<int64_t>>& groups) {
  std::string t = "{";
  bool first = true;
  for (const auto& g : groups)
    for (size_t j = 0; j < g.size(); ++j) {
      t += (first ? "{" : ",{") + std::to_string(g[j]) + "," +
           std::to_string(g[(j + 1) % g.size()]) + "}";
      first = false;
    }
  return t + "}";
}

std::string F32(int64_t n) { return "f32[" + std::to_string(n) + "]"; }

// The collective programs over one set of axes at one per-device size.
std::vector<LoopProgram> CollectivePrograms(const std::vector<std::vector<int64_t>>& groups,
                                            int64_t bytes, const std::string& where) {
  const int64_t g = static_cast<int64_t>(groups.front().size());
  // Elements: a multiple of the group size, so scatters divide evenly.
  const int64_t n = std::max<int64_t>(g, bytes / 4 / g * g);
  const std::string rg = "channel_id=1, replica_groups=" + GroupsText(groups) +
                         ", use_global_device_ids=true";
  // Loop length by size, the same on every rank (MPI ranks cannot agree on a
  // length measured by one of them): about 4 MiB of operand per loop.
  const int64_t trips = std::clamp<int64_t>((4 << 20) / (n * 4), 8, 512);
  const std::string at = " " + where + " " + std::to_string(n * 4) + " B";
  std::vector<LoopProgram> out;
  out.push_back({"all-reduce" + at, F32(n), F32(n),
                 "all-reduce(x), " + rg + ", to_apply=add", trips});
  out.push_back({"all-gather" + at, F32(n), F32(n * g),
                 "all-gather(x), " + rg + ", dimensions={0}", trips});
  out.push_back({"reduce-scatter" + at, F32(n), F32(n / g),
                 "reduce-scatter(x), " + rg + ", dimensions={0}, to_apply=add", trips});
  out.push_back({"all-to-all" + at, F32(n), F32(n),
                 "all-to-all(x), channel_id=1, replica_groups=" + GroupsText(groups) +
                     ", dimensions={0}",
                 trips});
  out.push_back({"collective-permute" + at, F32(n), F32(n),
                 "collective-permute(x), channel_id=1, source_target_pairs=" +
                     RingPairsText(groups),
                 trips});
  return out;
}

class Runner {
 public:
  Runner(const CalibrateOptions& options) : options_(options) {}

  // Seconds per loop trip of `p` (difference of a 1-trip and a
  // (1 + p.trips)-trip run, best of two each), and the program's cost.
  StatusOr<double> SecondsPerTrip(const LoopProgram& p, ModuleCost* cost) {
    const int64_t devices = options_.mesh.num_devices();
    int64_t trips = p.trips;
    for (int attempt = 0;; ++attempt) {
      double best[2] = {1e300, 1e300};
      for (int rep = 0; rep < 3; ++rep)
        for (int which = 0; which < 2; ++which) {
          MS_ASSIGN_OR_RETURN(std::unique_ptr<Module> module,
                              ParseModuleText(ModuleText(p, devices, which == 0 ? 1 : 1 + trips)));
          if (cost != nullptr && rep == 0 && which == 0) {
            CostOptions copts;
            copts.mesh = &options_.mesh;
            *cost = ComputeModuleCost(*module, copts);
          }
          MS_ASSIGN_OR_RETURN(double s, RunOnce(*module));
          best[which] = std::min(best[which], s);
        }
      const double diff = best[1] - best[0];
      // The loop must take clearly longer than the one-trip run, or the
      // difference is noise: lengthen it. On MPI every rank must run the
      // same programs, so rank 0's verdict (the clock that counts) is
      // shared: any rank's error status becomes every rank's.
      bool longer = !(diff > 0.5 * best[0] && diff > 0) && attempt < 3;
      if (options_.backend == "mpi")
        longer = !AgreeAcrossRanks(longer && MpiIsRoot() ? Status::Error("lengthen the loop")
                                                         : Status::Ok())
                      .ok();
      if (!longer) return std::max(diff, 1e-9) / static_cast<double>(trips);
      trips *= 4;
    }
  }

  bool is_root() const { return is_root_; }

 private:
  StatusOr<double> RunOnce(Module& module) {
    const Instruction* x = module.entry()->parameter(0);
    Shape global = x->shape();
    std::vector<int64_t> dims = global.dimensions();
    dims[0] *= options_.mesh.num_devices();
    std::vector<Literal> inputs;
    SpmdRunRequest request;
    request.num_partitions = options_.mesh.num_devices();
    request.already_partitioned = true;
    request.propagate = false;
    request.backend = options_.backend;
    const auto start = Clock::now();
    if (options_.backend == "mpi") {
      is_root_ = MpiIsRoot();
      if (is_root_) inputs.emplace_back(Shape(global.element_type(), dims));
      MS_ASSIGN_OR_RETURN(MpiRunOutcome out, RunModuleOnMpi(module, std::move(inputs), request));
      (void)out;
    } else {
      inputs.emplace_back(Shape(global.element_type(), dims));
      MS_ASSIGN_OR_RETURN(Literal out, RunModuleOnDevices(module, std::move(inputs), request));
      (void)out;
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  const CalibrateOptions& options_;
  bool is_root_ = true;
};

std::string NowIso8601() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%MZ", std::gmtime(&t));
  return buf;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

LinkRate FitLinkRate(const std::vector<double>& w, const std::vector<double>& t) {
  LinkRate r;
  const size_t n = std::min(w.size(), t.size());
  double best_bw = 0;
  for (size_t i = 0; i < n; ++i)
    if (t[i] > 0) best_bw = std::max(best_bw, w[i] / t[i]);
  if (n == 0) return r;
  double mw = 0, mt = 0;
  for (size_t i = 0; i < n; ++i) mw += w[i], mt += t[i];
  mw /= n, mt /= n;
  double sww = 0, swt = 0;
  for (size_t i = 0; i < n; ++i) sww += (w[i] - mw) * (w[i] - mw), swt += (w[i] - mw) * (t[i] - mt);
  double slope = sww > 0 ? swt / sww : 0;
  double latency = mt - slope * mw;
  if (latency < 0) {
    // Through the origin instead: no negative latency.
    double sw2 = 0, swt0 = 0;
    for (size_t i = 0; i < n; ++i) sw2 += w[i] * w[i], swt0 += w[i] * t[i];
    latency = 0;
    slope = sw2 > 0 ? swt0 / sw2 : 0;
  }
  if (slope <= 0) {
    // Time did not grow with size (noise, or all sizes latency-bound).
    r.latency_seconds = *std::min_element(t.begin(), t.begin() + n);
    r.bytes_per_second = best_bw > 0 ? best_bw : 1e12;
    return r;
  }
  r.latency_seconds = latency;
  r.bytes_per_second = 1 / slope;
  return r;
}

StatusOr<CalibrateResult> Calibrate(const CalibrateOptions& options) {
  const Mesh& mesh = options.mesh;
  if (mesh.num_devices() < 2) return Status::Error("calibrate needs a mesh of at least 2 devices");
  if (options.backend != "threads" && options.backend != "mpi")
    return Status::Error("unknown backend '" + options.backend + "' (threads or mpi)");
  const auto start = Clock::now();
  // Axis sets: each axis of size > 1 alone, then the whole mesh when it has
  // more than one such axis.
  std::vector<std::vector<int64_t>> axis_sets;
  std::vector<int64_t> all;
  for (int64_t a = 0; a < mesh.num_axes(); ++a)
    if (mesh.axes()[a].size > 1) axis_sets.push_back({a}), all.push_back(a);
  if (all.size() > 1) axis_sets.push_back(all);

  std::vector<std::pair<std::vector<int64_t>, std::vector<LoopProgram>>> series;
  int total = 2;  // compute and memory
  for (const auto& axes : axis_sets) {
    std::string where;
    for (int64_t a : axes) where += (where.empty() ? "" : ",") + mesh.axes()[a].name;
    const auto groups = GroupsAlong(mesh, axes);
    for (int64_t bytes : options.sizes) {
      series.emplace_back(axes, CollectivePrograms(groups, bytes, "over " + where));
      total += static_cast<int>(series.back().second.size());
    }
  }
  Runner runner(options);
  CalibrateResult result;
  int done = 0;
  auto tick = [&](const std::string& what) {
    if (options.progress) options.progress(++done, total, what);
  };

  // Compute: a 256^3 matmul per device per trip, all devices at once.
  {
    LoopProgram p{"matmul 256x256x256", "f32[256,256]", "f32[256,256]",
                  "dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}", 16};
    MS_ASSIGN_OR_RETURN(double s, runner.SecondsPerTrip(p, nullptr));
    result.profile.flops_per_second = 2.0 * 256 * 256 * 256 / s;
    tick(p.what);
  }
  // Memory: an elementwise pass over 16 MiB per device (read + write).
  {
    const int64_t n = 4 << 20;
    LoopProgram p{"negate 16 MiB", F32(n), F32(n), "negate(x)", 8};
    MS_ASSIGN_OR_RETURN(double s, runner.SecondsPerTrip(p, nullptr));
    result.profile.memory_bytes_per_second = 2.0 * n * 4 / s;
    tick(p.what);
  }
  // Collectives, grouped by (kind, axes) over the sizes.
  std::map<std::string, CollectiveSample> by_key;
  std::vector<std::string> order;
  for (const auto& [axes, programs] : series)
    for (const LoopProgram& p : programs) {
      ModuleCost cost;
      MS_ASSIGN_OR_RETURN(double s, runner.SecondsPerTrip(p, &cost));
      tick(p.what);
      // The loop's collective, as the cost model sees it (kind, axes, wire
      // bytes per execution): the profile is keyed as the objective looks
      // it up.
      const CollectiveCost* c = cost.collectives.empty() ? nullptr : &cost.collectives.front();
      if (c == nullptr) return Status::Error("calibrate: the cost model saw no collective in " + p.what);
      const std::string key = c->kind + "@" + c->mesh_axes;
      if (!by_key.count(key)) {
        order.push_back(key);
        by_key[key].kind = c->kind;
        by_key[key].axes = c->mesh_axes;
        by_key[key].group_size = c->group_size;
      }
      by_key[key].wire_bytes.push_back(c->wire_bytes);
      by_key[key].seconds.push_back(s);
    }
  std::vector<double> latencies, bandwidths;
  for (const std::string& key : order) {
    CollectiveSample& sample = by_key[key];
    sample.fitted = FitLinkRate(sample.wire_bytes, sample.seconds);
    result.profile.collectives[key] = sample.fitted;
    latencies.push_back(sample.fitted.latency_seconds);
    bandwidths.push_back(sample.fitted.bytes_per_second);
    result.samples.push_back(sample);
  }
  result.profile.link.latency_seconds = Median(latencies);
  result.profile.link.bytes_per_second = Median(bandwidths);
  result.profile.backend = options.backend;
  result.profile.mesh = mesh.ToString();
  result.profile.measured_at = NowIso8601();
  result.profile.source = "calibrated";
  result.profile.calibration_seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  result.is_root = runner.is_root();
  return result;
}

}  // namespace meshsplit
