// Sharding spec files: parsing (nlohmann::ordered_json, so mesh axes keep
// their written major-to-minor order), glob matching and application.
#include "import/shard_spec.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "import/load.h"

namespace meshsplit {

bool GlobMatch(const std::string& pattern, const std::string& name) {
  // Iterative matcher with one backtrack point for the last '*'.
  size_t p = 0, n = 0, star = std::string::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {

// Levenshtein distance, for "did you mean" hints.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the candidate nearest to `word`, when it is near
// enough to be a misspelling (at most a third of the word's letters apart).
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = word.size() / 3 + 1;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_distance) best = &c, best_distance = d;
  }
  return best == nullptr ? "" : " (did you mean '" + *best + "'?)";
}

}  // namespace

StatusOr<ShardSpec> ParseShardSpec(const std::string& text, const std::string& name) {
  using json = nlohmann::ordered_json;
  auto file = std::make_shared<SourceFile>(SourceFile{name, text});
  // The location of `length` characters at byte `offset` of the spec.
  auto loc_at = [&](size_t offset, size_t length) {
    SourceLoc loc;
    loc.file = file;
    loc.line = 1;
    size_t line_start = 0;
    for (size_t k = 0; k < offset && k < text.size(); ++k)
      if (text[k] == '\n') ++loc.line, line_start = k + 1;
    loc.column = static_cast<int>(std::min(offset, text.size()) - line_start) + 1;
    loc.length = static_cast<int>(length);
    return loc;
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    // nlohmann's byte offset is one past the character it stopped at.
    size_t byte = 0;
    if (const auto* pe = dynamic_cast<const json::parse_error*>(&e)) byte = pe->byte;
    std::string what = e.what();
    if (size_t colon = what.find("parse error"); colon != std::string::npos)
      what = what.substr(colon);
    return Status::Error("invalid JSON: " + what, loc_at(byte > 0 ? byte - 1 : 0, 1));
  }
  auto err = [&](const std::string& m) { return Status::Error(name + ": " + m); };
  // An error about key `key` (searched from `from` on), pointing at it.
  auto err_at_key = [&](const std::string& key, const std::string& m, size_t from = 0) {
    size_t at = text.find("\"" + key + "\"", from);
    if (at == std::string::npos) return err(m);
    return Status::Error(m, loc_at(at, key.size() + 2));
  };
  if (!j.is_object()) return err("the spec must be a JSON object");
  static const std::vector<std::string> kKeys = {"mesh", "rules", "existing_axes",
                                                 "outputs_follow_inputs", "pipeline", "comment"};
  for (const auto& [key, _] : j.items())
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end())
      return err_at_key(key, "unknown key '" + key + "'" + DidYouMean(key, kKeys) +
                                 " (expected mesh, rules, existing_axes, outputs_follow_inputs, "
                                 "pipeline, comment)");
  ShardSpec spec;
  if (j.contains("mesh")) {
    const json& m = j["mesh"];
    StatusOr<Mesh> mesh = Status::Error("");
    if (m.is_string()) {
      mesh = Mesh::Parse(m.get<std::string>());
    } else if (m.is_object()) {
      std::vector<MeshAxis> axes;
      for (const auto& [axis, size] : m.items()) {
        if (!size.is_number_integer() || size.get<int64_t>() < 1)
          return err("mesh axis '" + axis + "' needs a positive integer size");
        axes.push_back({axis, size.get<int64_t>()});
      }
      mesh = Mesh::Create(std::move(axes));
    } else {
      return err("\"mesh\" must be an object {\"axis\": size, ...} or a string \"a=2,b=4\"");
    }
    if (!mesh.ok()) return err("mesh: " + mesh.status().message());
    spec.mesh = std::move(*mesh);
    spec.has_mesh = true;
  }
  if (j.contains("outputs_follow_inputs")) {
    if (!j["outputs_follow_inputs"].is_boolean())
      return err("\"outputs_follow_inputs\" must be true or false");
    spec.outputs_follow_inputs = j["outputs_follow_inputs"].get<bool>();
  }
  if (j.contains("pipeline")) {
    StatusOr<PipelineSpec> p = PipelineSpecFromJson(j["pipeline"]);
    if (!p.ok()) return err_at_key("pipeline", p.status().message());
    if (spec.has_mesh && !spec.mesh.AxisIndex(p->axis))
      return err_at_key("pipeline", "pipeline: the stage axis '" + p->axis +
                                        "' is not an axis of the mesh " + spec.mesh.ToString());
    spec.pipeline = std::move(*p);
  }
  if (j.contains("existing_axes")) {
    const json& e = j["existing_axes"];
    if (!e.is_array()) return err("\"existing_axes\" must be a list of mesh axis names");
    for (const json& a : e) {
      if (!a.is_string()) return err("\"existing_axes\": axis names must be strings");
      spec.existing_axes.push_back(a.get<std::string>());
    }
  }
  if (j.contains("rules")) {
    if (!j["rules"].is_array()) return err("\"rules\" must be an array");
    int index = 0;
    for (const json& r : j["rules"]) {
      std::string where = "rule " + std::to_string(index++);
      if (!r.is_object() || r.contains("match") == r.contains("match_op"))
        return err(where + ": needs \"match\": \"<glob>\" (a tensor) or \"match_op\": " +
                   "\"<glob>\" (a computed value), not both");
      ShardRule rule;
      rule.on_op = r.contains("match_op");
      const json& glob = r[rule.on_op ? "match_op" : "match"];
      if (!glob.is_string())
        return err(where + ": \"" + (rule.on_op ? "match_op" : "match") + "\" must be a string");
      rule.match = glob.get<std::string>();
      static const std::vector<std::string> kRuleKeys = {"match", "match_op", "dims",
                                                         "replicated", "comment"};
      for (const auto& [key, _] : r.items())
        if (std::find(kRuleKeys.begin(), kRuleKeys.end(), key) == kRuleKeys.end())
          return err_at_key(key,
                            where + " ('" + rule.match + "'): unknown key '" + key + "'" +
                                DidYouMean(key, kRuleKeys) +
                                " (expected match, match_op, dims, replicated, comment)",
                            text.find("\"" + rule.match + "\""));
      bool has_dims = r.contains("dims");
      rule.replicated = r.contains("replicated") && r["replicated"] == true;
      if (has_dims == rule.replicated)
        return err(where + " ('" + rule.match +
                   "'): give exactly one of \"dims\": [...] or \"replicated\": true");
      if (has_dims) {
        if (!r["dims"].is_array()) return err(where + ": \"dims\" must be an array");
        for (const json& d : r["dims"]) {
          std::vector<std::string> axes;
          if (d.is_string()) {
            axes.push_back(d.get<std::string>());
          } else if (d.is_array()) {
            for (const json& a : d) {
              if (!a.is_string()) return err(where + ": axis names must be strings");
              axes.push_back(a.get<std::string>());
            }
          } else if (!d.is_null()) {
            return err(where + ": each dim is null, an axis name or a list of axis names");
          }
          rule.dims.push_back(std::move(axes));
        }
      }
      spec.rules.push_back(std::move(rule));
    }
  }
  return spec;
}

namespace {

// (output tuple index, parameter number) pairs of the module header's
// `input_output_alias={ {0}: (0, {}, may-alias), ... }`; only top-level
// outputs aliasing whole parameters are listed.
std::vector<std::pair<int64_t, int64_t>> TopLevelAliases(const Module& module) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [key, value] : module.header_attrs()) {
    if (key != "input_output_alias") continue;
    static const std::regex kEntry(R"(\{\s*(\d+)\s*\}\s*:\s*\(\s*(\d+)\s*,\s*\{\s*\})");
    for (auto it = std::sregex_iterator(value.begin(), value.end(), kEntry);
         it != std::sregex_iterator(); ++it) {
      // A number too large for int64 names no output or parameter: skip it
      // (std::stoll would throw on the header text).
      int64_t output = 0, parameter = 0;
      const std::string o = (*it)[1], p = (*it)[2];
      if (std::from_chars(o.data(), o.data() + o.size(), output).ec != std::errc() ||
          std::from_chars(p.data(), p.data() + p.size(), parameter).ec != std::errc())
        continue;
      out.emplace_back(output, parameter);
    }
  }
  return out;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> UpdatedCopies(const Module& module) {
  std::vector<std::pair<int64_t, int64_t>> out = TopLevelAliases(module);
  if (!out.empty()) return out;
  const Computation* entry = module.entry();
  const Shape& result = entry->root()->shape();
  const std::vector<std::string> names = EntryOutputNames(module);
  if (!result.IsTuple() || static_cast<int64_t>(names.size()) != result.tuple_size()) return out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].rfind("new.", 0) != 0) continue;
    const std::string input = names[i].substr(4);
    for (const Instruction* p : entry->parameters())
      if (p != nullptr && p->name() == input &&
          p->shape().Compatible(result.tuple_shapes(static_cast<int>(i))))
        out.emplace_back(static_cast<int64_t>(i), p->attrs().parameter_number);
  }
  return out;
}

namespace {

// An output that aliases a parameter shares its buffer, so it must have the
// parameter's layout, and an output that is the updated copy of a parameter
// goes back in as that parameter next step: copy the parameters' new
// shardings onto those elements of a tuple root's sharding (an unannotated
// root counts as replicated, which its other elements stay).
void ShardAliasedOutputs(Module& module, const std::vector<Instruction*>& annotated_params) {
  Instruction* root = module.entry()->root();
  if (!root->shape().IsTuple()) return;
  if (root->has_sharding() && !root->sharding()->IsTuple()) return;
  if (!root->has_sharding())
    for (const Shape& s : root->shape().tuple_shapes())
      if (s.IsTuple()) return;  // nested: no flat tuple sharding to start from
  Sharding sharding = root->has_sharding()
                          ? *root->sharding()
                          : Sharding::Tuple(std::vector<Sharding>(root->shape().tuple_size(),
                                                                  Sharding::Replicate()));
  auto& elements = sharding.mutable_tuple_elements();
  bool changed = false;
  for (auto [output, param] : UpdatedCopies(module)) {
    if (output >= static_cast<int64_t>(elements.size()) ||
        root->shape().tuple_shapes(output).IsTuple())
      continue;
    for (Instruction* p : annotated_params)
      if (p->attrs().parameter_number == param && p->has_sharding()) {
        elements[output] = *p->sharding();
        changed = true;
        // Frameworks state the output layout on the op producing the output
        // as well (JAX's out_shardings become a sharding on the last op).
        if (root->opcode() == Opcode::kTuple) {
          Instruction* producer = root->operand(static_cast<int>(output));
          if (producer->has_sharding() && producer->opcode() != Opcode::kParameter)
            producer->set_sharding(*p->sharding());
        }
      }
  }
  if (changed) root->set_sharding(std::move(sharding));
}

// The op_name of an instruction's metadata={... op_name="..." ...}, or "".
std::string MetadataOpName(const Instruction& instr) {
  const std::string* m = instr.attrs().FindExtra("metadata");
  if (m == nullptr) return "";
  const std::string key = "op_name=\"";
  size_t at = m->find(key);
  if (at == std::string::npos) return "";
  std::string name;
  for (size_t i = at + key.size(); i < m->size() && (*m)[i] != '"'; ++i) {
    if ((*m)[i] == '\\' && i + 1 < m->size()) ++i;
    name += (*m)[i];
  }
  return name;
}

// Whether `instr` is where op `op_name` hands its result on: the root, or a
// user that belongs to another op.
bool LeavesOp(const Instruction& instr, const std::string& op_name, const Computation& entry) {
  if (entry.root() == &instr) return true;
  for (const Instruction* u : instr.users())
    if (MetadataOpName(*u) != op_name) return true;
  return false;
}

// Whether a "match_op" rule's glob names `instr`.
bool MatchesOp(const ShardRule& rule, const Instruction& instr, const Computation& entry) {
  if (GlobMatch(rule.match, instr.name())) return true;
  const std::string op_name = MetadataOpName(instr);
  return !op_name.empty() && GlobMatch(rule.match, op_name) && LeavesOp(instr, op_name, entry);
}

// The sharding `rule` gives `instr` (which it matches) on `mesh`.
StatusOr<Sharding> RuleSharding(const ShardRule& rule, const Mesh& mesh,
                                const Instruction& instr) {
  const std::string what = rule.on_op ? "rule (match_op) '" : "rule '";
  if (!instr.shape().IsArray())
    return Status::Error(what + rule.match + "' matches '" + instr.name() +
                         "', which is not an array");
  if (rule.replicated) return Sharding::Replicate();
  if (static_cast<int64_t>(rule.dims.size()) != instr.shape().rank())
    return Status::Error(what + rule.match + "' has " + std::to_string(rule.dims.size()) +
                         " dims but '" + instr.name() + "' is " + instr.shape().ToString(false));
  for (int64_t d = 0; d < instr.shape().rank(); ++d) {
    int64_t ways = 1;
    for (const auto& axis : rule.dims[d]) ways *= mesh.axes()[*mesh.AxisIndex(axis)].size;
    if (instr.shape().dimensions(d) % ways != 0)
      std::cerr << "warning: '" << instr.name() << "' dim " << d << " (size "
                << instr.shape().dimensions(d) << ") does not divide evenly over " << ways
                << " devices; it will be padded\n";
  }
  auto sharding = MeshSplit(mesh, rule.dims, instr.shape().rank());
  if (!sharding.ok())
    return Status::Error(what + rule.match + "' on '" + instr.name() +
                         "': " + sharding.status().message());
  return std::move(*sharding);
}

// Puts a `custom-call(Sharding)` of `sharding` between `instr` and its users
// (and the root), the annotation JAX's sharding constraints lower to.
void ConstrainValue(Module& module, Computation& entry, Instruction* instr, Sharding sharding) {
  std::vector<Instruction*> users = instr->users();
  auto ann = std::make_unique<Instruction>(
      Opcode::kCustomCall, module.UniqueInstructionName(instr->name() + ".sharding"),
      instr->shape());
  ann->AppendOperand(instr);
  ann->mutable_attrs().custom_call_target = "Sharding";
  ann->set_sharding(std::move(sharding));
  Instruction* a = entry.AddInstruction(std::move(ann));
  for (Instruction* u : users)
    for (int i = 0; i < u->operand_count(); ++i)
      if (u->operand(i) == instr) u->ReplaceOperand(i, a);
  if (entry.root() == instr) entry.set_root(a);
}

}  // namespace

StatusOr<Sharding> LiftSharding(const Sharding& s, const Mesh& mesh,
                                const std::vector<std::string>& existing_axes) {
  if (s.IsTuple()) {
    std::vector<Sharding> elements;
    for (const Sharding& e : s.tuple_elements()) {
      MS_ASSIGN_OR_RETURN(Sharding lifted, LiftSharding(e, mesh, existing_axes));
      elements.push_back(std::move(lifted));
    }
    Sharding out = Sharding::Tuple(std::move(elements));
    out.set_shard_group(s.shard_group());
    return out;
  }
  if (!s.IsTiled() && !s.IsMaximal()) return s;  // replicated, manual, ...
  std::vector<int64_t> existing, others;  // axis indices
  for (const std::string& name : existing_axes) {
    auto a = mesh.AxisIndex(name);
    if (!a) return Status::Error("existing_axes: unknown mesh axis '" + name + "'");
    existing.push_back(*a);
  }
  for (int64_t a = 0; a < mesh.num_axes(); ++a)
    if (std::find(existing.begin(), existing.end(), a) == existing.end()) others.push_back(a);
  int64_t old_devices = 1, copies = 1;
  for (int64_t a : existing) old_devices *= mesh.axes()[a].size;
  for (int64_t a : others) copies *= mesh.axes()[a].size;
  // The new devices of old device `d`, one per combination of the other axes.
  auto new_devices = [&](int64_t d, std::vector<int64_t>* out) -> Status {
    if (d < 0 || d >= old_devices)
      return Status::Error("sharding " + s.ToString(false) + " names device " +
                           std::to_string(d) + ", but the existing axes hold only " +
                           std::to_string(old_devices) + " devices");
    std::vector<int64_t> coords(mesh.num_axes(), 0);
    for (int64_t i = static_cast<int64_t>(existing.size()) - 1; i >= 0; --i) {
      coords[existing[i]] = d % mesh.axes()[existing[i]].size;
      d /= mesh.axes()[existing[i]].size;
    }
    for (int64_t r = 0; r < copies; ++r) {
      int64_t rest = r;
      for (int64_t i = static_cast<int64_t>(others.size()) - 1; i >= 0; --i) {
        coords[others[i]] = rest % mesh.axes()[others[i]].size;
        rest /= mesh.axes()[others[i]].size;
      }
      out->push_back(mesh.devices().DeviceAt(coords));
    }
    return Status::Ok();
  };
  std::vector<int64_t> devices;
  if (s.IsMaximal()) {
    MS_RETURN_IF_ERROR(new_devices(s.device(), &devices));
    Sharding out = Sharding::Maximal(devices.front());
    out.set_shard_group(s.shard_group());
    return out;
  }
  if (copies == 1 && s.tile_assignment().num_devices() == mesh.num_devices()) return s;
  // One O(devices) pass: a spec is applied once per command.
  for (int64_t d : s.tile_assignment().Devices()) MS_RETURN_IF_ERROR(new_devices(d, &devices));
  std::vector<int64_t> dims = s.tile_assignment().dims();
  dims.push_back(copies);
  std::vector<SubgroupType> types = s.subgroup_types();
  types.push_back(SubgroupType::kReplicated);
  Sharding out = Sharding::Subgroup(TileAssignment::FromDevices(dims, std::move(devices)),
                                    std::move(types));
  out.set_shard_group(s.shard_group());
  return out;
}

StatusOr<ShardSpecReport> ApplyShardSpec(Module& module, const ShardSpec& spec) {
  if (!spec.has_mesh) return Status::Error("the sharding spec has no mesh (give --mesh)");
  Computation* entry = module.entry();
  if (!entry) return Status::Error("module has no entry computation");
  // Check every rule's axes up front so a typo fails even if nothing matches.
  for (const ShardRule& rule : spec.rules)
    for (const auto& axes : rule.dims)
      for (const auto& axis : axes)
        if (!spec.mesh.AxisIndex(axis))
          return Status::Error("rule '" + rule.match + "': unknown mesh axis '" + axis +
                               "' (mesh is " + spec.mesh.ToString() + ")");
  if (!spec.existing_axes.empty()) {
    // Lifting walks every device of the new mesh, and a module repeats a
    // few shardings over many instructions: each distinct one (as printed,
    // metadata included) is lifted once.
    std::unordered_map<std::string, Sharding> lifted_by_text;
    for (const auto& comp : module.computations())
      for (const auto& instr : comp->instructions()) {
        if (!instr->has_sharding()) continue;
        const std::string text = instr->sharding()->ToString();
        auto known = lifted_by_text.find(text);
        if (known == lifted_by_text.end()) {
          auto lifted = LiftSharding(*instr->sharding(), spec.mesh, spec.existing_axes);
          if (!lifted.ok())
            return Status::Error("%" + instr->name() + ": " + lifted.status().message());
          known = lifted_by_text.emplace(text, std::move(*lifted)).first;
        }
        instr->set_sharding(known->second);
      }
  }
  ShardSpecReport report;
  std::vector<bool> used(spec.rules.size(), false);
  std::vector<Instruction*> targets, annotated_params;
  for (const auto& instr : entry->instructions())
    if (instr->opcode() == Opcode::kParameter || instr->opcode() == Opcode::kConstant)
      targets.push_back(instr.get());
  for (Instruction* instr : targets) {
    for (size_t r = 0; r < spec.rules.size(); ++r) {
      const ShardRule& rule = spec.rules[r];
      if (rule.on_op || !GlobMatch(rule.match, instr->name())) continue;
      used[r] = true;
      MS_ASSIGN_OR_RETURN(Sharding sharding, RuleSharding(rule, spec.mesh, *instr));
      if (instr->opcode() == Opcode::kParameter) {
        instr->set_sharding(std::move(sharding));
        annotated_params.push_back(instr);
      } else {
        // Constants are often folded or shared; annotate the value where it
        // is used rather than the constant itself.
        ConstrainValue(module, *entry, instr, std::move(sharding));
      }
      ++report.annotated;
      break;  // the first matching rule wins
    }
  }
  // Computed values, matched before any annotation is added so a constraint
  // never matches the Sharding custom-call of another.
  std::vector<std::pair<Instruction*, size_t>> constrained;
  for (const auto& instr : entry->instructions()) {
    if (instr->opcode() == Opcode::kParameter || instr->opcode() == Opcode::kConstant ||
        !instr->shape().IsArray() ||
        (instr->opcode() == Opcode::kCustomCall &&
         instr->attrs().custom_call_target == "Sharding"))
      continue;
    for (size_t r = 0; r < spec.rules.size(); ++r)
      if (spec.rules[r].on_op && MatchesOp(spec.rules[r], *instr, *entry)) {
        used[r] = true;
        constrained.emplace_back(instr.get(), r);
        break;  // the first matching rule wins
      }
  }
  for (auto [instr, r] : constrained) {
    MS_ASSIGN_OR_RETURN(Sharding sharding, RuleSharding(spec.rules[r], spec.mesh, *instr));
    ConstrainValue(module, *entry, instr, std::move(sharding));
    ++report.annotated;
  }
  for (size_t r = 0; r < spec.rules.size(); ++r)
    if (!used[r]) {
      report.unmatched.push_back(spec.rules[r].match);
      report.unmatched_on_op.push_back(spec.rules[r].on_op);
    }
  if (spec.outputs_follow_inputs) ShardAliasedOutputs(module, annotated_params);
  entry->SortTopologically();
  module.set_num_partitions(spec.mesh.num_devices());
  return report;
}

StatusOr<ShardSpec> ReadShardSpec(const std::string& path, const std::string& mesh_override) {
  std::ifstream in(path);
  if (!in) return Status::Error(path + ": cannot open sharding spec");
  std::stringstream ss;
  ss << in.rdbuf();
  MS_ASSIGN_OR_RETURN(ShardSpec spec, ParseShardSpec(ss.str(), path));
  if (!mesh_override.empty()) {
    auto mesh = Mesh::Parse(mesh_override);
    if (!mesh.ok()) return Status::Error("--mesh: " + mesh.status().message());
    spec.mesh = std::move(*mesh);
    spec.has_mesh = true;
  }
  return spec;
}

StatusOr<Mesh> ApplyShardSpec(Module& module, const std::string& path,
                              const std::string& mesh_override) {
  MS_ASSIGN_OR_RETURN(ShardSpec spec, ReadShardSpec(path, mesh_override));
  auto report = ApplyShardSpec(module, spec);
  if (!report.ok()) return Status::Error(path + ": " + report.status().message());
  if (!report->unmatched.empty()) {
    // Name a tensor the glob may have meant to match.
    std::vector<std::string> tensors, values;
    for (const auto& i : module.entry()->instructions()) {
      const bool tensor = i->opcode() == Opcode::kParameter || i->opcode() == Opcode::kConstant;
      (tensor ? tensors : values).push_back(i->name());
      if (!tensor && !MetadataOpName(*i).empty()) values.push_back(MetadataOpName(*i));
    }
    for (size_t u = 0; u < report->unmatched.size(); ++u) {
      const std::string& m = report->unmatched[u];
      if (report->unmatched_on_op[u])
        std::cerr << "warning: " << path << ": rule (match_op) '" << m
                  << "' matches no computed value" << DidYouMean(m, values) << "\n";
      else
        std::cerr << "warning: " << path << ": rule '" << m << "' matches no tensor"
                  << DidYouMean(m, tensors) << "\n";
    }
  }
  return spec.mesh;
}

}  // namespace meshsplit
