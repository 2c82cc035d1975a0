// `meshsplit report FILE [--num-partitions N | --mesh a=2,b=4] [--shard SPEC]
// [--no-propagate] [--json] [--html OUT]`: propagates, partitions and costs
// the program per device and unpartitioned, and explains each collective.
// Schema and rules: docs/report.md.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/report_data.h"
#include "cli/shard_flags.h"
#include "compiler/compile.h"
#include "report/report_view.h"

namespace meshsplit::cli {
namespace {

struct ReportCliOptions {
  std::string file;
  bool no_propagate = false;
  bool partitioned = false;
  bool json = false;
  std::string html;
  std::string profile;  // --profile: estimate the step time with these rates
  ShardFlags shard;
};

// "37.5%": a share of a whole, "-" when the whole is zero.
std::string Percent(double part, double whole) {
  if (whole <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * part / whole);
  return buf;
}

void PrintSummary(const ReportData& d, std::ostream& os) {
  char line[256];
  std::snprintf(line, sizeof(line), "%-22s %18s %18s\n", "", "per device", "unpartitioned");
  os << line;
  auto row = [&](const char* name, double a, double b, bool bytes) {
    std::snprintf(line, sizeof(line), "%-22s %18s %18s\n", name,
                  (bytes ? HumanBytes(a) : HumanFlops(a)).c_str(),
                  d.input_partitioned ? "-" : (bytes ? HumanBytes(b) : HumanFlops(b)).c_str());
    os << line;
  };
  row("flops", d.per_device.flops, d.unpartitioned.flops, false);
  row("peak memory", d.per_device.peak_memory_bytes, d.unpartitioned.peak_memory_bytes, true);
  row("parameters", d.per_device.parameter_bytes, d.unpartitioned.parameter_bytes, true);
  row("outputs", d.per_device.output_bytes, d.unpartitioned.output_bytes, true);
  row("bytes read", d.per_device.bytes_read, d.unpartitioned.bytes_read, true);
  row("bytes written", d.per_device.bytes_written, d.unpartitioned.bytes_written, true);
}

// The peak split by what is live there, unpartitioned beside per device.
void PrintMemoryByKind(const ReportData& d, std::ostream& os) {
  const MemoryByKind dev = MemoryAtPeak(d.per_device);
  const MemoryByKind un = MemoryAtPeak(d.unpartitioned);
  char line[256];
  os << "\nmemory at peak by kind:\n";
  std::snprintf(line, sizeof(line), "  %-20s %16s %16s %12s\n", "", "unpartitioned",
                "per device", "of unpart.");
  os << line;
  auto row = [&](const char* name, int64_t u, int64_t p) {
    std::snprintf(line, sizeof(line), "  %-20s %16s %16s %12s\n", name,
                  d.input_partitioned ? "-" : HumanBytes(u).c_str(), HumanBytes(p).c_str(),
                  d.input_partitioned ? "-" : Percent(p, u).c_str());
    os << line;
  };
  row("parameters", un.parameters, dev.parameters);
  row("activations", un.activations, dev.activations);
  row("outputs", un.outputs, dev.outputs);
  row("total (peak)", un.total(), dev.total());
  if (!d.input_partitioned)
    os << "  (an even split over " << d.num_partitions << " devices would be "
       << Percent(1, static_cast<double>(d.num_partitions)) << ")\n";
}

void PrintCollectiveGroups(const ReportData& d, std::ostream& os) {
  const std::vector<CollectiveGroup> groups = GroupCollectives(d);
  if (groups.empty()) return;
  double total = 0;
  for (const CollectiveGroup& g : groups) total += g.wire_bytes;
  os << "\ncollective groups (kind x cause), largest wire bytes first: "
     << d.per_device.collectives.size() << " collectives in " << groups.size() << " groups, "
     << HumanBytes(total) << " per device\n";
  char line[256];
  std::snprintf(line, sizeof(line), "  %-18s %5s %10s %12s %7s %-12s %s\n", "kind", "count",
                "executions", "wire/device", "share", "axes", "cause");
  os << line;
  for (const CollectiveGroup& g : groups) {
    std::snprintf(line, sizeof(line), "  %-18s %5zu %10lld %12s %7s %-12s ", g.kind.c_str(),
                  g.members.size(), static_cast<long long>(g.executions),
                  HumanBytes(g.wire_bytes).c_str(), Percent(g.wire_bytes, total).c_str(),
                  g.mesh_axes.empty() ? "-" : g.mesh_axes.c_str());
    os << line << g.cause << "\n";
  }
}

// Rows: mesh axes; columns: collective kinds; per device.
void PrintWireByAxisAndKind(const ReportData& d, std::ostream& os) {
  const auto table = WireBytesByAxisAndKind(d.per_device);
  if (table.empty()) return;
  std::vector<std::string> kinds;
  for (const auto& [k, v] : d.per_device.wire_bytes_by_kind) kinds.push_back(k);
  os << "\nwire bytes per device by mesh axis x kind:\n";
  char cell[64];
  std::snprintf(cell, sizeof(cell), "  %-14s", "axis");
  os << cell;
  for (const std::string& k : kinds) {
    std::snprintf(cell, sizeof(cell), " %19s", k.c_str());
    os << cell;
  }
  std::snprintf(cell, sizeof(cell), " %12s\n", "total");
  os << cell;
  std::map<std::string, double> column;
  double all = 0;
  for (const auto& [axis, by_kind] : table) {
    std::snprintf(cell, sizeof(cell), "  %-14s", axis.empty() ? "(no mesh axis)" : axis.c_str());
    os << cell;
    double sum = 0;
    for (const std::string& k : kinds) {
      auto it = by_kind.find(k);
      const double v = it == by_kind.end() ? 0 : it->second;
      sum += v;
      column[k] += v;
      std::snprintf(cell, sizeof(cell), " %19s", v > 0 ? HumanBytes(v).c_str() : "-");
      os << cell;
    }
    all += sum;
    std::snprintf(cell, sizeof(cell), " %12s\n", HumanBytes(sum).c_str());
    os << cell;
  }
  std::snprintf(cell, sizeof(cell), "  %-14s", "total");
  os << cell;
  for (const std::string& k : kinds) {
    std::snprintf(cell, sizeof(cell), " %19s", HumanBytes(column[k]).c_str());
    os << cell;
  }
  std::snprintf(cell, sizeof(cell), " %12s\n", HumanBytes(all).c_str());
  os << cell;
}

// With --profile: the estimated step time, as the planner's objective
// computes it, per device against one device running everything.
void PrintStepTime(const ReportData& d, std::ostream& os) {
  if (!d.profile) return;
  auto line = [&](const char* what, const StepTime& t) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "  %-12s %10.4g us = max(compute %.4g us, memory %.4g us) + communication "
                  "%.4g us (latency %.4g us, bandwidth %.4g us)\n",
                  what, t.total_seconds() * 1e6, t.compute_seconds * 1e6,
                  t.memory_seconds * 1e6, t.comm_seconds() * 1e6,
                  t.comm_latency_seconds * 1e6, t.comm_wire_seconds * 1e6);
    os << buf;
  };
  os << "\nestimated step time (machine profile " << d.profile->Describe() << "):\n";
  const StepTime per_device = EstimateStepTime(d.per_device, *d.profile);
  line("per device", per_device);
  if (!d.input_partitioned) {
    const StepTime one = EstimateStepTime(d.unpartitioned, *d.profile);
    line("one device", one);
    if (per_device.total_seconds() > 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "  speedup      %.3gx over one device\n",
                    one.total_seconds() / per_device.total_seconds());
      os << buf;
    }
  }
}

void PrintText(const ReportData& d, std::ostream& os) {
  os << "report for " << d.file << ": " << d.num_partitions << " partitions, mesh "
     << d.mesh.ToString() << (d.input_partitioned ? " (input already partitioned)" : "")
     << "\n\n";
  PrintSummary(d, os);
  PrintStepTime(d, os);
  PrintMemoryByKind(d, os);
  PrintCollectiveGroups(d, os);
  PrintWireByAxisAndKind(d, os);
  char line[512];
  os << "\ncollectives (" << d.per_device.collectives.size() << "):\n";
  if (!d.per_device.collectives.empty()) {
    std::snprintf(line, sizeof(line), "  %-18s %-24s %6s %6s %12s %12s %12s %-10s %s\n",
                  "kind", "instruction", "count", "group", "operand", "result",
                  "wire/device", "axes", "cause");
    os << line;
  }
  for (size_t k = 0; k < d.per_device.collectives.size(); ++k) {
    const CollectiveCost& c = d.per_device.collectives[k];
    std::snprintf(line, sizeof(line), "  %-18s %-24s %6lld %6lld %12s %12s %12s %-10s ",
                  c.kind.c_str(), c.instruction.c_str(), static_cast<long long>(c.count),
                  static_cast<long long>(c.group_size), HumanBytes(c.operand_bytes).c_str(),
                  HumanBytes(c.result_bytes).c_str(), HumanBytes(c.wire_bytes).c_str(),
                  c.mesh_axes.empty() ? "-" : c.mesh_axes.c_str());
    os << line << d.causes[k].ToString() << "\n";
  }
  if (!d.per_device.wire_bytes_by_kind.empty()) {
    os << "\nwire bytes per device by kind:";
    for (const auto& [k, v] : d.per_device.wire_bytes_by_kind)
      os << " " << k << "=" << HumanBytes(v);
    os << "\n";
  }
  if (!d.per_device.wire_bytes_by_axis.empty()) {
    os << "wire bytes per device by mesh axis:";
    for (const auto& [k, v] : d.per_device.wire_bytes_by_axis)
      os << " " << k << "=" << HumanBytes(v);
    os << "\n";
  }
  os << "\nlargest memory holders per device at peak:\n";
  for (size_t k = 0; k < d.per_device.live_at_peak.size() && k < 10; ++k) {
    const MemoryHolder& h = d.per_device.live_at_peak[k];
    os << "  " << h.name << " " << h.shape << " " << HumanBytes(h.bytes)
       << (h.is_parameter ? " (parameter)" : h.is_output ? " (output)" : "") << "\n";
  }
  for (const PipelineSchedule& p : d.pipeline.loops) {
    os << "\npipeline: loop %" << p.loop
       << (p.interleaved ? " with backward loop %" + p.backward_loop : std::string()) << ", "
       << p.layers << " layers on " << p.stages
       << " stages (" << p.layers_per_stage << " each"
       << (p.repeats > 1 ? ", as " + std::to_string(p.repeats) + " chunks of " +
                               std::to_string(p.layers_per_chunk)
                         : std::string())
       << "), " << p.microbatches << " microbatches, "
       << p.schedule
       << (!p.paired ? ""
           : p.schedule == "zb-h1" ? " (paired: a forward, a B and a W slot per tick)"
                                   : " (paired: a forward and a backward slot per tick)")
       << " schedule, " << p.ticks << " ticks, bubble "
       << static_cast<int>(p.bubble_fraction * 1000 + 0.5) / 10.0 << "%\n";
    for (size_t s = 0; s < p.table.size(); ++s) {
      os << "  stage " << s << " |";
      for (const std::string& a : p.table[s]) os << " " << (a.empty() ? std::string("..") : a);
      os << "\n";
    }
  }
  for (const std::string& n : d.per_device.notes) os << "note: " << n << "\n";
}

int RunReport(const ReportCliOptions& opts) {
  // Costs read declared shapes: refuse a module whose shapes are wrong.
  CompileOptions load = CompileOptionsFor(opts.shard);
  load.until = CompileStage::kPrepared;
  load.verify_input = true;
  std::unique_ptr<Module> module;
  auto loaded = CompileFile(opts.file, load, &module);
  if (!loaded.ok()) return ReportError(loaded.status());
  ReportOptions ropts;
  ropts.file = opts.file;
  ropts.num_partitions = opts.shard.num_partitions;
  ropts.declared_partitions = loaded->declared_partitions;
  ropts.propagate = !opts.no_propagate;
  ropts.partitioned = opts.partitioned;
  ropts.partition = load.partition;
  // The mesh given (--mesh, else the spec's), checked against
  // --num-partitions by the load.
  ropts.mesh = loaded->mesh;
  StatusOr<std::optional<PipelineRequest>> pipeline = RequestedPipeline(load);
  if (!pipeline.ok()) return ReportError(pipeline.status());
  ropts.pipeline = *pipeline;
  ReportData d;
  if (!opts.profile.empty()) {
    StatusOr<MachineProfile> profile = ReadMachineProfile(opts.profile);
    if (!profile.ok()) return ReportError(profile.status());
    d.profile = std::move(*profile);
  }
  if (Status st = BuildReport(std::move(module), ropts, &d); !st.ok()) return ReportError(st);

  if (!opts.html.empty()) {
    std::ofstream out(opts.html);
    if (!out) return ReportError(Status::Error("--html: cannot write " + opts.html));
    out << RenderReportHtml(d);
  }
  if (opts.json)
    std::cout << ReportJson(d).dump(2) << "\n";
  else
    PrintText(d, std::cout);
  return 0;
}

const bool registered = RegisterCommand(
    "report", "cost model: per-device FLOPs, memory and collectives with their causes",
    [](CLI::App* app) {
      auto opts = std::make_shared<ReportCliOptions>();
      app->add_option("file", opts->file, "HLO file ('-' for stdin)")->required();
      AddNumPartitionsFlag(app, &opts->shard.num_partitions,
                           "number of partitions (default: the mesh's, else the module "
                           "header's, else the devices its shardings name)");
      app->add_flag("--no-propagate", opts->no_propagate,
                    "partition with the annotations as given");
      app->add_flag("--partitioned", opts->partitioned,
                    "the input is a partitioned program: cost it as is (detected "
                    "automatically for meshsplit partition output)");
      app->add_flag("--json", opts->json, "print one JSON object (docs/report.md)");
      app->add_option("--html", opts->html, "also write a self-contained HTML report");
      app->add_option("--profile", opts->profile,
                      "estimate the step time with a machine profile written by "
                      "'meshsplit calibrate' (docs/calibrate.md)");
      AddShardFlags(app, &opts->shard);
      return [opts]() { return RunReport(*opts); };
    });

}  // namespace
}  // namespace meshsplit::cli
