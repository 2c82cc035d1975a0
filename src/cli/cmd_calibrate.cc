// `meshsplit calibrate --mesh data=2,model=4 [--backend threads|mpi]
// [-o PROFILE.json] [--json] [--quiet]`: measures this machine's compute and
// memory rates and, per mesh axis and collective kind, collective latency and
// bandwidth on the executor real runs use, and writes them as a machine
// profile that `autoshard --profile` and `report --profile` read
// (docs/calibrate.md).
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "cost/machine_profile.h"
#include "verify/calibrate.h"

namespace meshsplit::cli {
namespace {

std::string Rate(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int p = 0;
  while (v >= 1000 && p < 5) v /= 1000, ++p;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g %s%s", v, prefixes[p], unit);
  return buf;
}

std::string Seconds(double s) {
  char buf[48];
  if (s < 1e-3)
    std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  else if (s < 1)
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

std::string Text(const CalibrateResult& r) {
  const MachineProfile& p = r.profile;
  std::string t = "machine profile: " + p.backend + " backend, mesh " + p.mesh + ", measured " +
                  p.measured_at + " in " + Seconds(p.calibration_seconds) + "\n";
  t += "  compute " + Rate(p.flops_per_second, "FLOP/s") + " per device (all devices busy)\n";
  t += "  memory  " + Rate(p.memory_bytes_per_second, "B/s") + " per device (read + written)\n";
  t += "  collectives (latency + wire bytes / bandwidth; wire bytes as the cost model counts them):\n";
  char line[256];
  std::snprintf(line, sizeof line, "    %-20s %-14s %6s %12s %14s   %s\n", "kind", "axes", "group",
                "latency", "bandwidth", "measured (wire bytes: time)");
  t += line;
  for (const CollectiveSample& s : r.samples) {
    std::string measured;
    for (size_t i = 0; i < s.seconds.size(); ++i)
      measured += (i ? ", " : "") + Rate(s.wire_bytes[i], "B") + ": " + Seconds(s.seconds[i]);
    std::snprintf(line, sizeof line, "    %-20s %-14s %6lld %12s %14s   ", s.kind.c_str(),
                  s.axes.c_str(), static_cast<long long>(s.group_size),
                  Seconds(s.fitted.latency_seconds).c_str(),
                  Rate(s.fitted.bytes_per_second, "B/s").c_str());
    t += line + measured + "\n";
  }
  t += "  other collectives: " + Seconds(p.link.latency_seconds) + " + wire / " +
       Rate(p.link.bytes_per_second, "B/s") + " (medians)\n";
  return t;
}

const bool kRegistered = RegisterCommand(
    "calibrate",
    "Measure compute, memory and per-axis collective rates into a machine profile "
    "(autoshard/report --profile)",
    [](CLI::App* app) -> std::function<int()> {
      auto mesh_text = std::make_shared<std::string>();
      auto backend = std::make_shared<std::string>("threads");
      auto output = std::make_shared<std::string>();
      auto json = std::make_shared<bool>(false);
      auto quiet = std::make_shared<bool>(false);
      auto sizes = std::make_shared<std::vector<int64_t>>();
      app->add_option("--mesh", *mesh_text,
                      "Device mesh to measure, e.g. data=2,model=4 (one virtual device per "
                      "mesh device)")
          ->required();
      app->add_option("--backend", *backend,
                      "Collectives backend: threads, or mpi (under mpirun, one rank per device)")
          ->check(CLI::IsMember({"threads", "mpi"}));
      app->add_option("--sizes", *sizes,
                      "Per-device operand bytes of the collective measurements (default 4096 "
                      "65536 1048576)");
      AddOutputFlag(app, output.get());
      app->add_flag("--json", *json, "Print the profile document instead of the table");
      app->add_flag("--quiet", *quiet, "No progress on stderr");
      return [=]() {
        StatusOr<Mesh> mesh = Mesh::Parse(*mesh_text);
        if (!mesh.ok()) return ReportError(Status::Error("--mesh: " + mesh.status().message()));
        CalibrateOptions options;
        options.mesh = *mesh;
        options.backend = *backend;
        if (!sizes->empty()) {
          for (int64_t s : *sizes)
            if (s < 4 || s > (int64_t{1} << 30))
              return ReportError(Status::Error("--sizes: each size must be 4 B .. 1 GiB"));
          options.sizes = *sizes;
        }
        const bool tty = isatty(2);
        if (!*quiet)
          options.progress = [tty](int done, int total, const std::string& what) {
            if (tty)
              std::fprintf(stderr, "\r\033[Kcalibrate: %d / %d %s", done, total, what.c_str());
            else if (done == total || done % 10 == 0)
              std::fprintf(stderr, "calibrate: %d / %d measurements\n", done, total);
            if (tty && done == total) std::fprintf(stderr, "\r\033[K");
          };
        StatusOr<CalibrateResult> result = Calibrate(options);
        if (!result.ok()) return ReportError(result.status());
        if (!result->is_root) return 0;  // MPI: rank 0 reports
        const std::string doc = MachineProfileToJson(result->profile);
        if (!output->empty()) {
          if (int rc = WriteOutput(*output, doc); rc != 0) return rc;
          if (!*json) std::cout << Text(*result) << "wrote " << *output << "\n";
          else std::cout << doc;
          return 0;
        }
        std::cout << (*json ? doc : Text(*result));
        return 0;
      };
    });

}  // namespace
}  // namespace meshsplit::cli
