// `meshsplit report`'s data and JSON document (docs/report.md), shared by
// the command (cli/cmd_report.cc, which adds the text and HTML renderings)
// and the public API (ms.report returns exactly this JSON).
#include "report/report.h"

#include <algorithm>

#include <set>

#include "compiler/compile.h"
#include "ir/attribute_text.h"
#include "report/report_view.h"

namespace meshsplit {
namespace {

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

}  // namespace

nlohmann::ordered_json PipelineJson(const PipelineReport& r) {
  nlohmann::ordered_json j;
  const PipelineSchedule& first = r.loops.front();
  int64_t ticks = 0, peak = 0;
  double idle = 0, slots = 0;
  nlohmann::ordered_json loops = nlohmann::ordered_json::array();
  for (const PipelineSchedule& p : r.loops) {
    ticks += p.ticks;
    peak = std::max(peak, p.peak_activation_bytes_per_stage);
    idle += p.bubble_fraction * static_cast<double>(p.stages * p.ticks);
    slots += static_cast<double>(p.stages * p.ticks);
    nlohmann::ordered_json l;
    l["loop"] = p.loop;
    if (p.interleaved) l["backward_loop"] = p.backward_loop;
    l["direction"] = p.interleaved ? "forward and backward" : p.backward ? "backward" : "forward";
    l["layers"] = p.layers;
    l["layers_per_stage"] = p.layers_per_stage;
    l["layers_per_chunk"] = p.layers_per_chunk;
    l["ticks"] = p.ticks;
    l["bubble_fraction"] = p.bubble_fraction;
    l["peak_activation_bytes_per_stage"] = p.peak_activation_bytes_per_stage;
    l["live_microbatches_per_stage"] = p.live_microbatches;
    l["table"] = p.table;
    loops.push_back(std::move(l));
  }
  j["stages"] = first.stages;
  j["microbatches"] = first.microbatches;
  j["schedule"] = first.schedule;
  j["repeats"] = first.repeats;
  j["ticks"] = ticks;
  // Idle stage-ticks over all stage-ticks of every pipelined loop (each
  // tick of a loop costs the same).
  j["bubble_fraction"] = slots > 0 ? idle / slots : 0.0;
  j["peak_activation_bytes_per_stage"] = peak;
  j["loops"] = std::move(loops);
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
  // Added with the grouped views (report_view.h); the keys above keep their
  // names and meaning.
  auto memory = [](const MemoryByKind& m) {
    return nlohmann::ordered_json{
        {"parameters", m.parameters}, {"activations", m.activations}, {"outputs", m.outputs}};
  };
  j["memory_at_peak"] = {
      {"per_device", memory(MemoryAtPeak(d.per_device))},
      {"unpartitioned", d.input_partitioned ? nlohmann::ordered_json(nullptr)
                                            : memory(MemoryAtPeak(d.unpartitioned))}};
  nlohmann::ordered_json axis_kind = nlohmann::ordered_json::object();
  for (const auto& [axis, kinds] : WireBytesByAxisAndKind(d.per_device)) {
    if (axis.empty()) continue;  // as wire_bytes_by_axis: whole mesh axes only
    for (const auto& [kind, bytes] : kinds) axis_kind[axis][kind] = bytes;
  }
  j["wire_bytes_by_axis_and_kind"] = std::move(axis_kind);
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const CollectiveGroup& g : GroupCollectives(d)) {
    nlohmann::ordered_json e;
    e["kind"] = g.kind;
    e["cause"] = g.cause;
    e["mesh_axes"] = g.mesh_axes;
    e["collectives"] = g.members.size();
    e["executions"] = g.executions;
    e["wire_bytes"] = g.wire_bytes;
    std::vector<std::string> names;
    for (size_t k : g.members) names.push_back(d.per_device.collectives[k].instruction);
    e["instructions"] = names;
    groups.push_back(std::move(e));
  }
  j["collective_groups"] = std::move(groups);
  auto arrays = [](const std::vector<ArrayView>& views) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const ArrayView& v : views)
      a.push_back({{"name", v.name},
                   {"shape", v.shape.ToString(false)},
                   {"sharding", v.sharding ? v.sharding->ToString(false) : "{replicated}"},
                   {"mesh_split", v.mesh_split ? nlohmann::ordered_json(v.label)
                                               : nlohmann::ordered_json(nullptr)}});
    return a;
  };
  j["parameters"] = arrays(EntryParameterViews(d));
  j["outputs"] = arrays(EntryOutputViews(d));
  if (!d.pipeline.loops.empty()) j["pipeline"] = PipelineJson(d.pipeline);
  if (d.profile) {
    auto step = [&](const ModuleCost& c) {
      const StepTime t = EstimateStepTime(c, *d.profile);
      return nlohmann::ordered_json{{"time_seconds", t.total_seconds()},
                                    {"compute_seconds", t.compute_seconds},
                                    {"memory_seconds", t.memory_seconds},
                                    {"comm_seconds", t.comm_seconds()},
                                    {"comm_latency_seconds", t.comm_latency_seconds},
                                    {"comm_wire_seconds", t.comm_wire_seconds}};
    };
    nlohmann::ordered_json st;
    st["profile"] = d.profile->Describe();
    st["per_device"] = step(d.per_device);
    if (!d.input_partitioned) st["unpartitioned"] = step(d.unpartitioned);
    j["step_time"] = std::move(st);
  }
  j["notes"] = d.per_device.notes;
  return j;
}

Status BuildReport(std::unique_ptr<Module> loaded, const ReportOptions& options, ReportData* out) {
  ReportData& d = *out;
  d.file = options.file;
  d.original = std::move(loaded);
  Module& module = *d.original;
  d.input_partitioned = options.partitioned || IsPartitionerOutput(module);
  const int64_t declared =
      options.declared_partitions > 0 ? options.declared_partitions : module.num_partitions();
  if (d.input_partitioned && options.num_partitions > 0 && options.num_partitions != declared)
    return Status::Error(
        "--num-partitions " + std::to_string(options.num_partitions) +
        " differs from the partitioned input's num_partitions=" + std::to_string(declared));
  if (options.num_partitions > 0) module.set_num_partitions(options.num_partitions);
  d.num_partitions = module.num_partitions();
  // The mesh: the one given, else the module header's (named
  // shardings), else one axis over every partition.
  std::string mesh_text = options.mesh;
  if (mesh_text.empty())
    mesh_text = ModuleFrontendAttribute(module, kModuleMeshAttribute).value_or("");
  if (!mesh_text.empty()) {
    auto mesh = Mesh::Parse(mesh_text);
    if (!mesh.ok()) return Status::Error("--mesh: " + mesh.status().message());
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
    rest.propagate = options.propagate;
    rest.partition = options.partition;
    rest.partition.num_partitions = options.num_partitions;
    if (options.pipeline) {
      rest.pipeline = options.pipeline->spec;
      rest.pipeline_mesh = options.pipeline->mesh;
    }
    auto compiled = Compile(module, rest);
    if (!compiled.ok()) return compiled.status();
    preport = std::move(compiled->propagation);
    d.pipeline = std::move(compiled->pipeline);
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
  return Status::Ok();
}

}  // namespace meshsplit
