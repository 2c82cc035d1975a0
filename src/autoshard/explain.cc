// Verdicts between two costed plans (explain.h).
#include "autoshard/explain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace meshsplit::autoshard {
namespace {

std::string Time(double s) {
  char buf[48];
  const double a = std::fabs(s);
  if (a >= 1)
    std::snprintf(buf, sizeof buf, "%.3g s", s);
  else if (a >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  return buf;
}

std::string Rate(double bytes_per_second) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g GB/s", bytes_per_second / 1e9);
  return buf;
}

double Roofline(const Evaluation& e) { return std::max(e.compute_seconds, e.memory_seconds); }

const char* RooflineTerm(const Evaluation& e) {
  return e.compute_seconds >= e.memory_seconds ? "compute" : "memory traffic";
}

}  // namespace

Verdict Explain(const Evaluation& chosen, const Evaluation& alt, const MachineModel& machine) {
  Verdict v;
  v.roofline_delta = Roofline(alt) - Roofline(chosen);
  v.latency_delta = alt.comm_latency_seconds - chosen.comm_latency_seconds;
  v.wire_delta = alt.comm_wire_seconds - chosen.comm_wire_seconds;
  v.collectives_delta = alt.num_collectives - chosen.num_collectives;
  const double comm_delta = v.latency_delta + v.wire_delta;
  std::string t;
  if (!alt.feasible && chosen.feasible) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g MiB", alt.peak_memory_bytes / 1048576.0);
    t = "needs " + std::string(buf) + " per device, over the memory cap; ";
  }
  if (v.roofline_delta < 0) {
    t += "saves " + Time(-v.roofline_delta) + " of " + RooflineTerm(alt) + " (" +
         Time(Roofline(chosen)) + " -> " + Time(Roofline(alt)) + ")";
  } else if (v.roofline_delta > 0) {
    t += "costs " + Time(v.roofline_delta) + " more " + RooflineTerm(alt) + " (" +
         Time(Roofline(chosen)) + " -> " + Time(Roofline(alt)) + ")";
  } else {
    t += "keeps the same " + std::string(RooflineTerm(alt));
  }
  if (comm_delta > 0) {
    t += (v.roofline_delta < 0 ? " but " : " and ");
    t += "communicates " + Time(comm_delta) + " more";
    if (v.collectives_delta > 0)
      t += " (" + std::to_string(v.collectives_delta) + " more collective" +
           (v.collectives_delta == 1 ? "" : "s");
    else t += " (";
    t += std::string(v.collectives_delta > 0 ? ": " : "") + "latency " + Time(v.latency_delta) +
         ", bandwidth " + Time(v.wire_delta) + ")";
  } else if (comm_delta < 0) {
    t += " and communicates " + Time(-comm_delta) + " less";
  }
  if (v.roofline_delta < 0 && comm_delta > 0) {
    // Collectives k times cheaper: roofline_alt + comm_alt / k beats
    // roofline_chosen + comm_chosen / k when k > comm_delta / saving.
    v.comm_factor_to_win = comm_delta / -v.roofline_delta;
    if (v.comm_factor_to_win > 1) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.3g", v.comm_factor_to_win);
      t += "; it would win if collectives were " + std::string(buf) + "x cheaper";
    }
    if (!machine.has_profile) {
      // Latency only: saving > wire_delta + n_delta * latency.
      const double room = -v.roofline_delta - v.wire_delta;
      if (v.collectives_delta > 0 && room > 0)
        v.latency_to_win = room / static_cast<double>(v.collectives_delta);
      // Bandwidth only: saving > latency_delta + wire_delta * (L / L').
      const double room_bw = -v.roofline_delta - v.latency_delta;
      if (v.wire_delta > 0 && room_bw > 0)
        v.bandwidth_to_win = machine.link_bytes_per_second * v.wire_delta / room_bw;
      std::string how;
      if (v.latency_to_win > 0)
        how = "--collective-latency below " + Time(v.latency_to_win);
      if (v.bandwidth_to_win > 0)
        how += (how.empty() ? "" : " or ") + std::string("--link-bandwidth above ") +
               Rate(v.bandwidth_to_win);
      if (!how.empty() && v.comm_factor_to_win > 1) t += " (" + how + ")";
    }
  }
  v.text = t;
  return v;
}

}  // namespace meshsplit::autoshard
