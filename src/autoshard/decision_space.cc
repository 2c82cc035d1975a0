// Decision space of the auto-sharding search: targets, grouping, options and
// the lowering of a choice to a sharding spec.
#include "autoshard/decision_space.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ir/computation.h"
#include "ir/instruction.h"

namespace meshsplit::autoshard {
namespace {


// Extends `cur[d]` (currently splitting dim d `ways` ways) by more axes,
// then moves on to dim d + 1.
void Enumerate(const std::vector<int64_t>& dims, const Mesh& mesh, int max_axes, size_t d,
               int64_t ways, std::vector<bool>& used, DimsMapping& cur,
               std::vector<DimsMapping>& out) {
  if (d == dims.size()) {
    out.push_back(cur);
    return;
  }
  Enumerate(dims, mesh, max_axes, d + 1, 1, used, cur, out);
  if (static_cast<int>(cur[d].size()) >= max_axes) return;
  for (int64_t a = 0; a < mesh.num_axes(); ++a) {
    const int64_t size = mesh.axes()[a].size;
    // Axes of size 1 split nothing; uneven splits would be padded, which
    // costs masking everywhere and is never what a plan wants.
    if (used[a] || size <= 1 || dims[d] % (ways * size) != 0) continue;
    used[a] = true;
    cur[d].push_back(a);
    Enumerate(dims, mesh, max_axes, d, ways * size, used, cur, out);
    cur[d].pop_back();
    used[a] = false;
  }
}

std::vector<std::vector<std::string>> AxisNames(const DimsMapping& option, const Mesh& mesh) {
  std::vector<std::vector<std::string>> names;
  for (const auto& axes : option) {
    names.emplace_back();
    for (int64_t a : axes) names.back().push_back(mesh.axes()[a].name);
  }
  return names;
}


}  // namespace

// "h.11.mlp.c_fc.weight" -> "h.*.mlp.c_fc.weight".
std::string DigitFreePattern(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
      out += '*';
    } else {
      out += name[i++];
    }
  }
  return out;
}

std::vector<DimsMapping> EnumerateOptions(const std::vector<int64_t>& dims, const Mesh& mesh,
                                          int max_axes_per_dim,
                                          const std::vector<int64_t>& excluded_axes) {
  std::vector<DimsMapping> out;
  std::vector<bool> used(mesh.num_axes(), false);
  for (int64_t a : excluded_axes) used[a] = true;  // never offered
  DimsMapping cur(dims.size());
  // The recursion yields the all-unsplit mapping first.
  Enumerate(dims, mesh, max_axes_per_dim, 0, 1, used, cur, out);
  return out;
}

StatusOr<DecisionSpace> BuildDecisionSpace(const Module& module, const Mesh& mesh,
                                           const DecisionSpaceOptions& options) {
  const Computation* entry = module.entry();
  if (entry == nullptr) return Status::Error("module has no entry computation");
  DecisionSpace space;
  space.mesh = mesh;
  std::vector<int64_t> excluded;
  for (const std::string& name : options.excluded_axes) {
    auto a = mesh.AxisIndex(name);
    if (!a) return Status::Error("no mesh axis '" + name + "' in " + mesh.ToString());
    excluded.push_back(*a);
  }
  std::vector<std::string> all_names;
  // Grouping key: digit-free name, shape text, parameter or constant, the
  // decoded starting option and whether it was annotated.
  using Key = std::tuple<std::string, std::string, bool, int, bool>;
  std::map<Key, size_t> group_of;
  std::vector<std::pair<DecisionGroup, std::vector<const Instruction*>>> groups;
  for (const auto& up : entry->instructions()) {
    const Instruction* instr = up.get();
    const bool is_param = instr->opcode() == Opcode::kParameter;
    if (!is_param && instr->opcode() != Opcode::kConstant) continue;
    all_names.push_back(instr->name());
    const Shape& shape = instr->shape();
    if (!shape.IsArray()) {
      space.not_decided.push_back(instr->name() + ": not an array");
      continue;
    }
    if (shape.rank() == 0) continue;  // scalars: nothing to split
    const int64_t bytes = shape.ByteSize();
    if (bytes < options.min_bytes) {
      space.not_decided.push_back(instr->name() + ": small (" + std::to_string(bytes) +
                                  " bytes)");
      continue;
    }
    std::vector<DimsMapping> opts =
        EnumerateOptions(shape.dimensions(), mesh, options.max_axes_per_dim, excluded);
    if (opts.size() <= 1) {
      space.not_decided.push_back(instr->name() + ": no dim divides over a mesh axis");
      continue;
    }
    int decoded = 0;
    const bool had = instr->has_sharding();
    if (had) {
      if (options.keep_existing) {
        space.not_decided.push_back(instr->name() + ": kept (annotated)");
        continue;
      }
      decoded = -1;
      for (size_t o = 0; o < opts.size() && decoded < 0; ++o) {
        auto s = MeshSplit(mesh, AxisNames(opts[o], mesh), shape.rank());
        if (s.ok() && *s == *instr->sharding()) decoded = static_cast<int>(o);
      }
      if (decoded < 0) {
        space.not_decided.push_back(instr->name() + ": kept (its sharding " +
                                    instr->sharding()->ToString(false) +
                                    " is not a mesh_split of the mesh)");
        continue;
      }
    }
    const std::string shape_text = shape.ToString(false);
    const std::string pattern =
        options.group_layers ? DigitFreePattern(instr->name()) : instr->name();
    Key key{options.group_layers ? pattern : instr->name(), shape_text, is_param, decoded, had};
    auto [it, inserted] = group_of.emplace(key, groups.size());
    if (inserted) {
      DecisionGroup g;
      g.label = pattern;
      g.shape = shape_text;
      g.dims = shape.dimensions();
      g.options = std::move(opts);
      g.initial = decoded;
      g.had_sharding = had;
      groups.push_back({std::move(g), {}});
    }
    DecisionGroup& g = groups[it->second].first;
    g.members.push_back(instr->name());
    g.bytes += bytes;
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.first.bytes > b.first.bytes; });
  for (auto& [g, unused] : groups) {
    if (static_cast<int64_t>(space.groups.size()) >= options.max_groups) {
      for (const auto& m : g.members)
        space.not_decided.push_back(m + ": beyond --max-groups");
      continue;
    }
    // A group of one uses its own name; otherwise the pattern must match
    // exactly the members for the spec to say it with one rule.
    if (g.members.size() == 1) g.label = g.members.front();
    std::set<std::string> members(g.members.begin(), g.members.end());
    bool exact = true;
    for (const auto& n : all_names)
      if (GlobMatch(g.label, n) != (members.count(n) > 0)) exact = false;
    g.label_is_exact_glob = exact;
    space.decided_tensors += static_cast<int64_t>(g.members.size());
    space.groups.push_back(std::move(g));
  }
  return space;
}

Choice InitialChoice(const DecisionSpace& space) {
  Choice c;
  for (const auto& g : space.groups) c.push_back(g.initial);
  return c;
}

std::string OptionToString(const DimsMapping& option, const Mesh& mesh) {
  std::string out = "[";
  for (size_t d = 0; d < option.size(); ++d) {
    if (d) out += ", ";
    if (option[d].empty()) {
      out += "_";
    } else if (option[d].size() == 1) {
      out += mesh.axes()[option[d][0]].name;
    } else {
      out += "(";
      for (size_t k = 0; k < option[d].size(); ++k)
        out += (k ? "," : "") + mesh.axes()[option[d][k]].name;
      out += ")";
    }
  }
  return out + "]";
}

ShardSpec ChoiceToSpec(const DecisionSpace& space, const Choice& choice,
                       const std::vector<std::string>& existing_axes) {
  ShardSpec spec;
  spec.mesh = space.mesh;
  spec.has_mesh = true;
  spec.existing_axes = existing_axes;
  for (size_t gi = 0; gi < space.groups.size(); ++gi) {
    const DecisionGroup& g = space.groups[gi];
    const int o = choice[gi];
    // Nothing to say when the tensor keeps what the input gave it.
    if (g.had_sharding ? o == g.initial : o == 0) continue;
    ShardRule rule;
    if (o == 0) {
      rule.replicated = true;
    } else {
      rule.dims = AxisNames(g.options[o], space.mesh);
    }
    if (g.label_is_exact_glob) {
      rule.match = g.label;
      spec.rules.push_back(rule);
    } else {
      for (const auto& m : g.members) {
        rule.match = m;
        spec.rules.push_back(rule);
      }
    }
  }
  return spec;
}

std::string SpecToJson(const ShardSpec& spec, const std::string& comment) {
  // One rule per line: the file is meant to be read and edited by people.
  std::string out = "{\n  \"comment\": " + nlohmann::json(comment).dump() + ",\n";
  out += "  \"mesh\": " + nlohmann::json(spec.mesh.ToString()).dump() + ",\n";
  if (!spec.existing_axes.empty())
    out += "  \"existing_axes\": " + nlohmann::json(spec.existing_axes).dump() + ",\n";
  if (spec.pipeline) {
    nlohmann::ordered_json p;
    p["axis"] = spec.pipeline->axis;
    p["microbatches"] = spec.pipeline->microbatches;
    p["schedule"] = spec.pipeline->schedule;
    if (spec.pipeline->repeats != 1) p["repeats"] = spec.pipeline->repeats;
    if (!spec.pipeline->loops.empty()) p["loops"] = spec.pipeline->loops;
    if (spec.pipeline->batch_dim != 0) p["batch_dim"] = spec.pipeline->batch_dim;
    out += "  \"pipeline\": " + p.dump() + ",\n";
  }
  out += "  \"rules\": [";
  for (size_t r = 0; r < spec.rules.size(); ++r) {
    const ShardRule& rule = spec.rules[r];
    nlohmann::ordered_json e;
    e[rule.on_op ? "match_op" : "match"] = rule.match;
    if (rule.replicated) {
      e["replicated"] = true;
    } else {
      nlohmann::ordered_json dims = nlohmann::ordered_json::array();
      for (const auto& axes : rule.dims) {
        if (axes.empty())
          dims.push_back(nullptr);
        else if (axes.size() == 1)
          dims.push_back(axes.front());
        else
          dims.push_back(axes);
      }
      e["dims"] = std::move(dims);
    }
    out += (r ? ",\n    " : "\n    ") + e.dump();
  }
  out += spec.rules.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

}  // namespace meshsplit::autoshard
