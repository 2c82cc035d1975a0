// The report's derived views (report_view.h).
#include "report/report_view.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "import/load.h"
#include "report/mesh_notation.h"

namespace meshsplit {

MemoryByKind MemoryAtPeak(const ModuleCost& cost) {
  MemoryByKind m;
  for (const MemoryHolder& h : cost.live_at_peak) {
    if (h.is_parameter) m.parameters += h.bytes;
    else if (h.is_output) m.outputs += h.bytes;
    else m.activations += h.bytes;
  }
  return m;
}

std::string ReportShardingLabel(const ReportData& d, const Sharding& s, int64_t rank) {
  if (!d.has_named_mesh) {
    if (s.IsReplicated()) return "replicated";
    return s.ToString(false);
  }
  return ShardingLabel(s, d.mesh, rank);
}

std::string CauseClass(const CollectiveCause& c, const Mesh* mesh) {
  // A replicated side takes its rank from the other side, so that the
  // reshard reads "[_, model] -> [_, _]" rather than "-> replicated".
  int64_t rank = -1;
  for (const std::string* text : {&c.from_sharding, &c.to_sharding}) {
    auto s = Sharding::Parse(*text);
    if (rank < 0 && s.ok() && s->IsTiled()) rank = s->TiledDataRank();
  }
  auto label = [&](const std::string& text) {
    if (!mesh || text.empty() || text[0] != '{') return text;  // "partial", "?", ...
    auto s = Sharding::Parse(text);
    if (!s.ok()) return text;
    if (auto axes = DecodeMeshSplit(*s, *mesh, rank)) return MeshSplitAxesToString(*axes);
    if (auto axes = DecodeMeshSplit(*s, *mesh)) return MeshSplitAxesToString(*axes);
    return s->ToString(false);
  };
  std::string out;
  if (c.recorded) {
    out = c.rule;
    if (!c.from_sharding.empty() || !c.to_sharding.empty()) {
      if (out.empty()) out = c.instruction.empty() ? "root: " : c.op + ": ";
      else if (!out.empty()) out += "; ";
      out += "reshard " + label(c.from_sharding) + " -> " + label(c.to_sharding);
    }
    if (out.empty()) out = "emitted by the " + c.op + " handler";
    return out;
  }
  out = c.rule;
  if (!c.from_sharding.empty() || !c.to_sharding.empty())
    out += " " + label(c.from_sharding) + " -> " + label(c.to_sharding);
  return out + " (inferred)";
}

std::vector<CollectiveGroup> GroupCollectives(const ReportData& d) {
  const auto& cols = d.per_device.collectives;
  std::map<std::pair<std::string, std::string>, CollectiveGroup> by_key;
  std::map<std::pair<std::string, std::string>, std::set<std::string>> axes;
  for (size_t k = 0; k < cols.size(); ++k) {
    const CollectiveCost& c = cols[k];
    const std::string cause = CauseClass(d.causes[k], d.has_named_mesh ? &d.mesh : nullptr);
    CollectiveGroup& g = by_key[{c.kind, cause}];
    g.kind = c.kind;
    g.cause = cause;
    g.members.push_back(k);
    g.executions += c.count;
    g.wire_bytes += c.wire_bytes * static_cast<double>(c.count);
    axes[{c.kind, cause}].insert(c.mesh_axes);
  }
  std::vector<CollectiveGroup> out;
  for (auto& [key, g] : by_key) {
    for (const std::string& a : axes[key])
      g.mesh_axes += (g.mesh_axes.empty() ? "" : " | ") + (a.empty() ? "?" : a);
    if (g.mesh_axes == "?") g.mesh_axes.clear();
    out.push_back(std::move(g));
  }
  std::stable_sort(out.begin(), out.end(), [](const CollectiveGroup& a, const CollectiveGroup& b) {
    return a.wire_bytes > b.wire_bytes;
  });
  return out;
}

std::map<std::string, std::map<std::string, double>> WireBytesByAxisAndKind(const ModuleCost& c) {
  std::map<std::string, std::map<std::string, double>> out;
  for (const CollectiveCost& k : c.collectives)
    out[k.mesh_axes][k.kind] += k.wire_bytes * static_cast<double>(k.count);
  return out;
}

namespace {

const Module& SourceModule(const ReportData& d) {
  return d.original ? *d.original : *d.partitioned;
}

ArrayView View(const ReportData& d, std::string name, const Shape& shape,
               std::optional<Sharding> sharding) {
  ArrayView v;
  v.name = std::move(name);
  v.shape = shape;
  const Sharding s = sharding ? *sharding : Sharding::Replicate();
  v.label = ReportShardingLabel(d, s, shape.IsArray() ? shape.rank() : -1);
  if (d.has_named_mesh) {
    if (auto axes = DecodeMeshSplit(s, d.mesh, shape.rank())) {
      v.mesh_split = true;
      v.dim_axes = axes->dims;
    }
  }
  v.sharding = std::move(sharding);
  return v;
}

}  // namespace

std::vector<ArrayView> EntryParameterViews(const ReportData& d) {
  std::vector<ArrayView> out;
  const Computation* entry = SourceModule(d).entry();
  if (!entry) return out;
  for (const Instruction* p : entry->parameters())
    if (p->shape().IsArray()) out.push_back(View(d, p->name(), p->shape(), p->sharding()));
  return out;
}

std::vector<ArrayView> EntryOutputViews(const ReportData& d) {
  std::vector<ArrayView> out;
  const Module& module = SourceModule(d);
  const Computation* entry = module.entry();
  if (!entry || !entry->root()) return out;
  const Instruction* root = entry->root();
  if (!root->shape().IsTuple()) {
    if (root->shape().IsArray()) {
      std::vector<std::string> names = EntryOutputNames(module);
      out.push_back(View(d, names.size() == 1 ? names[0] : root->name(), root->shape(),
                         root->sharding()));
    }
    return out;
  }
  const std::vector<std::string> names = EntryOutputNames(module);
  const int64_t n = root->shape().tuple_size();
  const bool named = static_cast<int64_t>(names.size()) == n;
  const bool literal_tuple = root->opcode() == Opcode::kTuple && root->operand_count() == n;
  for (int64_t k = 0; k < n; ++k) {
    const Shape& s = root->shape().tuple_shapes(k);
    if (!s.IsArray()) continue;
    std::optional<Sharding> sh;
    if (root->has_sharding()) {
      const Sharding& r = *root->sharding();
      if (r.IsTuple() && k < static_cast<int64_t>(r.tuple_elements().size()))
        sh = r.tuple_elements()[k];
      else if (!r.IsTuple())
        sh = r;
    } else if (literal_tuple) {
      sh = root->operand(k)->sharding();
    }
    std::string name = named           ? names[k]
                       : literal_tuple ? root->operand(k)->name()
                                       : root->name() + "[" + std::to_string(k) + "]";
    out.push_back(View(d, std::move(name), s, sh));
  }
  return out;
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

std::string HumanFlops(double f) {
  const char* units[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
  int u = 0;
  while (f >= 1000 && u < 6) {
    f /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", f, units[u]);
  return buf;
}

}  // namespace meshsplit
