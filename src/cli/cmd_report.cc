// `meshsplit report FILE [--num-partitions N | --mesh a=2,b=4] [--shard SPEC]
// [--no-propagate] [--json] [--html OUT]`: propagates, partitions and costs
// the program per device and unpartitioned, and explains each collective.
// Schema and rules: docs/report.md.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/report_data.h"
#include "cli/shard_flags.h"
#include "import/shard_spec.h"
#include "compiler/compile.h"

namespace meshsplit::cli {
namespace {

struct ReportCliOptions {
  std::string file;
  int64_t num_partitions = 0;
  bool no_propagate = false;
  bool partitioned = false;
  bool json = false;
  std::string html;
  ShardFlags shard;
};

// The annotated instruction the sharding of `name` was derived from,
// following the first source of each recorded propagation step.
std::string RootAnnotation(const Module& module, const PropagationReport& report,
                           const std::string& name) {
  std::set<std::string> seen;
  std::string cur = name;
  while (!cur.empty() && seen.insert(cur).second && seen.size() < 256) {
    auto it = report.history.find(cur);
    if (it == report.history.end() || it->second.empty()) {
      // Kept from the input: annotated by the user when it has a sharding.
      for (const auto& c : module.computations())
        if (const Instruction* i = c->Find(cur))
          return i->has_sharding() ? cur : "";
      return "";
    }
    const ShardingProvenance& last = it->second.back();
    if (last.how.rfind("annotation", 0) == 0) return cur;
    if (last.sources.empty()) return "";
    cur = last.sources.front();
  }
  return "";
}

// True for `meshsplit partition` output: some collective carries the cause
// the partitioner records (collective_cause.h).
bool IsPartitionerOutput(const Module& module) {
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions()) {
      const Opcode op = i->opcode();
      if (op != Opcode::kAllReduce && op != Opcode::kAllGather && op != Opcode::kAllToAll &&
          op != Opcode::kReduceScatter && op != Opcode::kCollectivePermute)
        continue;
      for (const auto& [k, v] : FrontendAttributes(*i))
        if (k == "ms_instr") return true;
    }
  return false;
}

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

nlohmann::ordered_json CostSummaryJson(const ModuleCost& c) {
  nlohmann::ordered_json j;
  j["flops"] = c.flops;
  j["peak_memory_bytes"] = c.peak_memory_bytes;
  j["parameter_bytes"] = c.parameter_bytes;
  j["output_bytes"] = c.output_bytes;
  j["bytes_read"] = c.bytes_read;
  j["bytes_written"] = c.bytes_written;
  return j;
}

nlohmann::ordered_json ReportJson(const ReportData& d) {
  nlohmann::ordered_json j;
  j["file"] = d.file;
  j["num_partitions"] = d.num_partitions;
  j["mesh"] = d.mesh.ToString();
  j["input_partitioned"] = d.input_partitioned;
  j["per_device"] = CostSummaryJson(d.per_device);
  j["unpartitioned"] = d.input_partitioned ? nlohmann::ordered_json(nullptr)
                                           : CostSummaryJson(d.unpartitioned);
  nlohmann::ordered_json cols = nlohmann::ordered_json::array();
  for (size_t k = 0; k < d.per_device.collectives.size(); ++k) {
    const CollectiveCost& c = d.per_device.collectives[k];
    const CollectiveCause& cause = d.causes[k];
    nlohmann::ordered_json e;
    e["kind"] = c.kind;
    e["instruction"] = c.instruction;
    e["computation"] = c.computation;
    e["operand_bytes"] = c.operand_bytes;
    e["result_bytes"] = c.result_bytes;
    e["wire_bytes"] = c.wire_bytes;
    e["group_size"] = c.group_size;
    e["count"] = c.count;
    e["mesh_axes"] = c.mesh_axes;
    e["cause"] = cause.ToString();
    e["cause_detail"] = {{"recorded", cause.recorded},
                         {"instruction", cause.instruction},
                         {"op", cause.op},
                         {"source", cause.source},
                         {"source_op", cause.source_op},
                         {"consumer", cause.consumer},
                         {"rule", cause.rule},
                         {"from_sharding", cause.from_sharding},
                         {"to_sharding", cause.to_sharding},
                         {"annotation", cause.annotation}};
    cols.push_back(std::move(e));
  }
  j["collectives"] = std::move(cols);
  nlohmann::ordered_json by_kind = nlohmann::ordered_json::object();
  for (const auto& [k, v] : d.per_device.wire_bytes_by_kind) by_kind[k] = v;
  j["wire_bytes_by_kind"] = std::move(by_kind);
  nlohmann::ordered_json by_axis = nlohmann::ordered_json::object();
  for (const auto& [k, v] : d.per_device.wire_bytes_by_axis) by_axis[k] = v;
  j["wire_bytes_by_axis"] = std::move(by_axis);
  nlohmann::ordered_json holders = nlohmann::ordered_json::array();
  for (size_t k = 0; k < d.per_device.live_at_peak.size() && k < 10; ++k) {
    const MemoryHolder& h = d.per_device.live_at_peak[k];
    holders.push_back({{"name", h.name}, {"shape", h.shape}, {"bytes", h.bytes},
                       {"parameter", h.is_parameter}});
  }
  j["largest_memory_holders"] = std::move(holders);
  j["notes"] = d.per_device.notes;
  return j;
}

void PrintText(const ReportData& d, std::ostream& os) {
  os << "report for " << d.file << ": " << d.num_partitions << " partitions, mesh "
     << d.mesh.ToString() << (d.input_partitioned ? " (input already partitioned)" : "")
     << "\n\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%-22s %18s %18s\n", "", "per device", "unpartitioned");
  os << line;
  auto row = [&](const char* name, double a, double b, bool bytes) {
    std::snprintf(line, sizeof(line), "%-22s %18s %18s\n", name,
                  (bytes ? HumanBytes(a) : Num(a)).c_str(),
                  d.input_partitioned ? "-" : (bytes ? HumanBytes(b) : Num(b)).c_str());
    os << line;
  };
  row("flops", d.per_device.flops, d.unpartitioned.flops, false);
  row("peak memory", d.per_device.peak_memory_bytes, d.unpartitioned.peak_memory_bytes, true);
  row("parameters", d.per_device.parameter_bytes, d.unpartitioned.parameter_bytes, true);
  row("outputs", d.per_device.output_bytes, d.unpartitioned.output_bytes, true);
  row("bytes read", d.per_device.bytes_read, d.unpartitioned.bytes_read, true);
  row("bytes written", d.per_device.bytes_written, d.unpartitioned.bytes_written, true);
  os << "\ncollectives (" << d.per_device.collectives.size() << "):\n";
  if (!d.per_device.collectives.empty()) {
    std::snprintf(line, sizeof(line), "  %-18s %-24s %6s %6s %12s %12s %14s %-10s %s\n",
                  "kind", "instruction", "count", "group", "operand", "result",
                  "wire/device", "axes", "cause");
    os << line;
  }
  for (size_t k = 0; k < d.per_device.collectives.size(); ++k) {
    const CollectiveCost& c = d.per_device.collectives[k];
    std::snprintf(line, sizeof(line), "  %-18s %-24s %6lld %6lld %12lld %12lld %14s %-10s ",
                  c.kind.c_str(), c.instruction.c_str(), static_cast<long long>(c.count),
                  static_cast<long long>(c.group_size),
                  static_cast<long long>(c.operand_bytes),
                  static_cast<long long>(c.result_bytes), Num(c.wire_bytes).c_str(),
                  c.mesh_axes.empty() ? "-" : c.mesh_axes.c_str());
    os << line << d.causes[k].ToString() << "\n";
  }
  if (!d.per_device.wire_bytes_by_kind.empty()) {
    os << "\nwire bytes per device by kind:";
    for (const auto& [k, v] : d.per_device.wire_bytes_by_kind)
      os << " " << k << "=" << Num(v);
    os << "\n";
  }
  if (!d.per_device.wire_bytes_by_axis.empty()) {
    os << "wire bytes per device by mesh axis:";
    for (const auto& [k, v] : d.per_device.wire_bytes_by_axis)
      os << " " << k << "=" << Num(v);
    os << "\n";
  }
  os << "\nlargest memory holders per device at peak:\n";
  for (size_t k = 0; k < d.per_device.live_at_peak.size() && k < 10; ++k) {
    const MemoryHolder& h = d.per_device.live_at_peak[k];
    os << "  " << h.name << " " << h.shape << " " << HumanBytes(h.bytes)
       << (h.is_parameter ? " (parameter)" : "") << "\n";
  }
  for (const std::string& n : d.per_device.notes) os << "note: " << n << "\n";
}

int RunReport(const ReportCliOptions& opts) {
  ReportData d;
  d.file = opts.file;
  // Costs read declared shapes: refuse a module whose shapes are wrong.
  CompileOptions load = CompileOptionsFor(opts.shard);
  load.until = CompileStage::kPrepared;
  load.verify_input = true;
  if (auto loaded = CompileFile(opts.file, load, &d.original); !loaded.ok())
    return ReportError(loaded.status());
  Module& module = *d.original;
  d.input_partitioned = opts.partitioned || IsPartitionerOutput(module);
  if (d.input_partitioned && opts.num_partitions > 0 &&
      opts.num_partitions != module.num_partitions())
    return ReportError(Status::Error(
        "--num-partitions " + std::to_string(opts.num_partitions) +
        " differs from the partitioned input's num_partitions=" +
        std::to_string(module.num_partitions())));
  if (opts.num_partitions > 0) module.set_num_partitions(opts.num_partitions);
  d.num_partitions = module.num_partitions();
  // The mesh: --mesh, else the spec's, else the module header's, else one axis.
  std::string mesh_text = opts.shard.mesh;
  if (mesh_text.empty() && !opts.shard.spec.empty()) {
    std::ifstream in(opts.shard.spec);
    std::stringstream ss;
    ss << in.rdbuf();
    auto spec = ParseShardSpec(ss.str(), opts.shard.spec);
    if (spec.ok() && spec->has_mesh) mesh_text = spec->mesh.ToString();
  }
  // Then the module's own `mesh={...}` header (named shardings).
  if (mesh_text.empty())
    for (const auto& [key, value] : module.header_attrs())
      if (key == "mesh") mesh_text = value;
  if (!mesh_text.empty()) {
    auto mesh = Mesh::Parse(mesh_text);
    if (!mesh.ok()) return ReportError(Status::Error("--mesh: " + mesh.status().message()));
    d.mesh = *mesh;
    d.has_named_mesh = true;
  }
  if (!d.has_named_mesh || d.mesh.num_devices() != d.num_partitions) {
    auto mesh = Mesh::Parse("all=" + std::to_string(d.num_partitions));
    if (mesh.ok()) d.mesh = *mesh;
    d.has_named_mesh = false;
  }
  PropagationReport preport;
  if (d.input_partitioned) {
    // Already partitioned: cost it as is; the recorded causes name the
    // instructions of the program it came from, which is not at hand.
    d.partitioned = std::move(d.original);
  } else {
    CompileOptions rest;
    rest.propagate = !opts.no_propagate;
    rest.partition = CompileOptionsFor(opts.shard).partition;
    rest.partition.num_partitions = opts.num_partitions;
    auto compiled = Compile(module, rest);
    if (!compiled.ok()) return ReportError(compiled.status());
    preport = std::move(compiled->propagation);
    d.partitioned = std::move(compiled->partitioned);
  }

  CostOptions copts;
  copts.mesh = &d.mesh;
  d.per_device = ComputeModuleCost(*d.partitioned, copts);
  d.per_device.num_partitions = d.num_partitions;
  if (!d.input_partitioned) {
    d.unpartitioned = ComputeModuleCost(*d.original, CostOptions{});
    d.unpartitioned.num_partitions = 1;
  }
  const Module* orig = d.original ? d.original.get() : d.partitioned.get();
  const PropagationReport* rep = &preport;
  const bool annotations = !d.input_partitioned;
  CollectiveCauseFinder finder(*orig, [orig, rep, annotations](const std::string& name) {
    return annotations ? RootAnnotation(*orig, *rep, name) : std::string();
  });
  for (const CollectiveCost& c : d.per_device.collectives)
    d.causes.push_back(finder.Find(*c.instr));

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
      app->add_option("--num-partitions", opts->num_partitions,
                      "number of partitions (default: the module header's)");
      app->add_flag("--no-propagate", opts->no_propagate,
                    "partition with the annotations as given");
      app->add_flag("--partitioned", opts->partitioned,
                    "the input is a partitioned program: cost it as is (detected "
                    "automatically for meshsplit partition output)");
      app->add_flag("--json", opts->json, "print one JSON object (docs/report.md)");
      app->add_option("--html", opts->html, "also write a self-contained HTML report");
      AddShardFlags(app, &opts->shard);
      return [opts]() { return RunReport(*opts); };
    });

}  // namespace
}  // namespace meshsplit::cli
