// The Shardy reader (see shardy_input.h). In order: take the xla.sdy.*
// frontend attributes off every instruction and the header (unknown keys and
// targets are errors), find the shard_map regions (their manual axes),
// lower each value's sharding, rewrite the custom-calls into the GSPMD
// pattern, inline the shard_map bodies, then set the partition count and
// the named mesh. The sharding arithmetic is import/shardy_lower.cc.
#include "import/shardy_input.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "import/shardy_attr.h"
#include "import/shardy_lower.h"
#include "ir/attribute_text.h"
#include "ir/computation.h"
#include "sharding/mesh.h"

namespace meshsplit {
namespace {

using sdy::Lowered;
using sdy::LowerRequest;
using sdy::TensorSharding;

constexpr char kPrefix[] = "xla.sdy.";
constexpr char kShardingKey[] = "xla.sdy.sharding";
constexpr char kMeshesKey[] = "xla.sdy.meshes";
constexpr char kInShardingsKey[] = "xla.sdy.in_shardings";
constexpr char kOutShardingsKey[] = "xla.sdy.out_shardings";
constexpr char kManualAxesKey[] = "xla.sdy.manual_axes";
constexpr char kFuncResultTarget[] = "xla.sdy.FuncResultSharding";
constexpr char kGlobalToLocalTarget[] = "xla.sdy.GlobalToLocalShape";
constexpr char kLocalToGlobalTarget[] = "xla.sdy.LocalToGlobalShape";
constexpr char kShardingTarget[] = "Sharding";

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string_view SourceLine(const SourceLoc& loc) {
  std::string_view all = loc.file->text;
  size_t begin = 0;
  for (int line = 1; line < loc.line; ++line) {
    begin = all.find('\n', begin);
    if (begin == std::string_view::npos) return {};
    ++begin;
  }
  size_t end = all.find('\n', begin);
  return all.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
}

// `loc` (an instruction's) moved onto `key` when its source line spells it.
SourceLoc AtKey(const SourceLoc& loc, const std::string& key) {
  if (!loc.known() || key.empty()) return loc;
  std::string_view line = SourceLine(loc);
  size_t at = line.find(key, loc.column > 0 ? loc.column - 1 : 0);
  if (at == std::string_view::npos) at = line.find(key);
  if (at == std::string_view::npos) return loc;
  SourceLoc out = loc;
  out.column = static_cast<int>(at) + 1;
  out.length = static_cast<int>(key.size());
  return out;
}

// The `HloModule` line of the file the module came from.
SourceLoc HeaderLoc(const Module& module) {
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions()) {
      if (!i->loc().known()) continue;
      SourceLoc loc = i->loc();
      std::string_view all = loc.file->text;
      // The header line, not a comment mentioning it.
      size_t at = all.rfind("HloModule", 0) == 0 ? 0 : all.find("\nHloModule");
      if (at == std::string_view::npos) return {};
      if (at > 0) ++at;
      loc.line = 1 + static_cast<int>(std::count(all.begin(), all.begin() + at, '\n'));
      loc.column = static_cast<int>(at - (all.rfind('\n', at) == std::string_view::npos
                                              ? 0
                                              : all.rfind('\n', at) + 1)) + 1;
      loc.length = 9;
      return loc;
    }
  return {};
}

std::vector<const Shape*> ArrayLeaves(const Shape& shape) {
  std::vector<const Shape*> out;
  if (!shape.IsTuple()) {
    out.push_back(&shape);
    return out;
  }
  for (const Shape& e : shape.tuple_shapes())
    for (const Shape* leaf : ArrayLeaves(e)) out.push_back(leaf);
  return out;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class Importer {
 public:
  explicit Importer(Module& module) : m_(module) {}

  StatusOr<bool> Run() {
    MS_RETURN_IF_ERROR(TakeAttributes());
    if (!any_) return false;
    MS_RETURN_IF_ERROR(FindRegions());
    for (Computation* c : m_.MakeComputationPostOrder())
      for (Instruction* i : Snapshot(c)) MS_RETURN_IF_ERROR(LowerInstruction(i));
    for (Computation* c : m_.MakeComputationPostOrder()) MS_RETURN_IF_ERROR(Rewrite(c));
    for (Computation* c : m_.MakeComputationPostOrder()) InlineBodies(c);
    RemoveDeadBodies();
    for (const auto& c : m_.computations()) c->SortTopologically();
    MS_RETURN_IF_ERROR(SetPartitionsAndMesh());
    return true;
  }

 private:
  using Keys = std::map<std::string, std::string>;

  static std::vector<Instruction*> Snapshot(Computation* c) {
    std::vector<Instruction*> out;
    for (const auto& i : c->instructions()) out.push_back(i.get());
    return out;
  }
  static bool IsTarget(const Instruction& i, const char* target) {
    return i.opcode() == Opcode::kCustomCall && i.attrs().custom_call_target == target;
  }
  Status Err(const Instruction& i, const std::string& key, const std::string& msg) const {
    return Status::Error(msg, AtKey(i.loc(), key));
  }

  // --- 1. the xla.sdy.* attributes, taken off the IR -------------------------
  // Splits a frontend_attributes text into its xla.sdy.* pairs (returned)
  // and the rest (written back; the attribute goes when nothing is left).
  StatusOr<Keys> TakeSdyPairs(std::vector<std::pair<std::string, std::string>>& extra,
                              const std::function<Status(const std::string&)>& malformed) {
    Keys out;
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      if (it->first != "frontend_attributes") continue;
      if (it->second.find(kPrefix) == std::string::npos) return out;
      std::optional<FrontendAttributePairs> pairs = ParseFrontendAttributes(it->second);
      if (!pairs) return malformed("frontend_attributes");
      FrontendAttributePairs rest;
      for (auto& [k, v] : *pairs) {
        if (StartsWith(k, kPrefix)) {
          out[k] = v;
        } else {
          rest.emplace_back(k, v);
        }
      }
      if (rest.empty()) {
        extra.erase(it);
      } else {
        it->second = FormatFrontendAttributes(rest);
      }
      return out;
    }
    return out;
  }

  Status TakeAttributes() {
    SourceLoc header = HeaderLoc(m_);
    auto header_error = [&](const std::string& key) {
      return [&, key](const std::string& msg) { return Status::Error(msg, AtKey(header, key)); };
    };
    StatusOr<Keys> header_keys = TakeSdyPairs(
        m_.mutable_header_attrs(), [&](const std::string& key) {
          return header_error(key)("malformed module frontend_attributes holding xla.sdy.* keys");
        });
    MS_RETURN_IF_ERROR(header_keys.status());
    for (const auto& [key, value] : *header_keys) {
      any_ = true;
      if (key != kMeshesKey)
        return header_error(key)("the module attribute " + key +
                                 " is not read (meshsplit reads xla.sdy.meshes)");
      sdy::ParseError e;
      auto meshes = sdy::ParseMeshes(value, &e);
      if (!meshes)
        return header_error(key)("malformed " + key + ": " + e.message + " (character " +
                                 std::to_string(e.offset + 1) + " of \"" + value + "\")");
      for (auto& [name, mesh] : *meshes) {
        Status valid = sdy::ValidateMesh(mesh);
        if (!valid.ok()) return header_error(key)("mesh @" + name + ": " + valid.message());
        meshes_[name] = std::move(mesh);
      }
    }
    for (const auto& c : m_.computations()) {
      for (const auto& owned : c->instructions()) {
        Instruction* i = owned.get();
        StatusOr<Keys> keys = TakeSdyPairs(
            i->mutable_attrs().extra, [&](const std::string& key) {
              return Err(*i, key, "malformed frontend_attributes of %" + i->name());
            });
        MS_RETURN_IF_ERROR(keys.status());
        const std::string& target = i->attrs().custom_call_target;
        const bool sdy_target = i->opcode() == Opcode::kCustomCall && StartsWith(target, kPrefix);
        if (keys->empty() && !sdy_target) continue;
        any_ = true;
        std::set<std::string> allowed = {kShardingKey};
        if (IsTarget(*i, kGlobalToLocalTarget)) {
          allowed = {kInShardingsKey, kManualAxesKey};
        } else if (IsTarget(*i, kLocalToGlobalTarget)) {
          allowed = {kOutShardingsKey, kManualAxesKey};
        } else if (sdy_target && target != kFuncResultTarget) {
          return Err(*i, target,
                     "custom-call %" + i->name() + " has custom_call_target=\"" + target +
                         "\", which meshsplit does not read (it reads " + kFuncResultTarget +
                         ", " + kGlobalToLocalTarget + " and " + kLocalToGlobalTarget + ")");
        }
        for (const auto& [key, value] : *keys)
          if (!allowed.count(key))
            return Err(*i, key,
                       "the frontend attribute " + key + " of %" + i->name() +
                           " is not read (meshsplit reads " + *allowed.begin() +
                           (allowed.size() > 1 ? " and " + *allowed.rbegin() : "") + " here)");
        sdy_[i] = std::move(*keys);
      }
    }
    return Status::Ok();
  }

  const std::string* Key(const Instruction* i, const char* key) const {
    auto it = sdy_.find(i);
    if (it == sdy_.end()) return nullptr;
    auto k = it->second.find(key);
    return k == it->second.end() ? nullptr : &k->second;
  }

  StatusOr<std::vector<TensorSharding>> ParseKey(const Instruction& i, const char* key) {
    const std::string* text = Key(&i, key);
    if (text == nullptr)
      return Err(i, i.attrs().custom_call_target,
                 "%" + i.name() + " has no frontend attribute " + key);
    sdy::ParseError e;
    auto parsed = sdy::ParseShardings(*text, &e);
    if (!parsed)
      return Err(i, key,
                 "malformed " + std::string(key) + " of %" + i.name() + ": " + e.message +
                     " (character " + std::to_string(e.offset + 1) + " of \"" + *text + "\")");
    return std::move(*parsed);
  }

  StatusOr<std::vector<std::string>> ManualAxes(const Instruction& i) {
    const std::string* text = Key(&i, kManualAxesKey);
    if (text == nullptr) return std::vector<std::string>{};
    sdy::ParseError e;
    auto parsed = sdy::ParseManualAxes(*text, &e);
    if (!parsed)
      return Err(i, kManualAxesKey,
                 std::string("malformed ") + kManualAxesKey + " of %" + i.name() + ": " +
                     e.message + " (character " + std::to_string(e.offset + 1) + ")");
    return std::move(*parsed);
  }

  // --- 2. shard_map regions --------------------------------------------------
  // The values a multi-result op feeds: the op itself, or its
  // get-tuple-elements.
  static std::vector<Instruction*> Results(Instruction* i) {
    if (!i->shape().IsTuple()) return {i};
    std::vector<Instruction*> out;
    for (Instruction* u : i->users())
      if (u->opcode() == Opcode::kGetTupleElement) out.push_back(u);
    return out;
  }
  // The call of a shard_map body that `gtl` feeds, or nullptr.
  static Instruction* CallFedBy(Instruction* gtl) {
    Instruction* call = nullptr;
    for (Instruction* r : Results(gtl))
      for (Instruction* u : r->users()) {
        if (u->opcode() != Opcode::kCall || (call != nullptr && call != u)) return nullptr;
        call = u;
      }
    return call;
  }
  // The call whose results `ltg` reads, or nullptr.
  static Instruction* CallReadBy(Instruction* ltg) {
    Instruction* call = nullptr;
    for (Instruction* o : ltg->operands()) {
      Instruction* c = o->opcode() == Opcode::kGetTupleElement ? o->operand(0) : o;
      if (c->opcode() != Opcode::kCall || (call != nullptr && call != c)) return nullptr;
      call = c;
    }
    return call;
  }

  Status FindRegions() {
    std::vector<Computation*> order = m_.MakeComputationPostOrder();
    std::reverse(order.begin(), order.end());  // callers first
    for (Computation* c : order) {
      const std::vector<std::string> region = region_[c];
      for (const auto& owned : c->instructions()) {
        Instruction* i = owned.get();
        Instruction* call = nullptr;
        if (IsTarget(*i, kGlobalToLocalTarget)) {
          call = CallFedBy(i);
          if (call == nullptr)
            return Err(*i, kGlobalToLocalTarget,
                       "%" + i->name() + " (" + kGlobalToLocalTarget +
                           ") must feed exactly one call of a shard_map body");
        } else if (IsTarget(*i, kLocalToGlobalTarget)) {
          call = CallReadBy(i);
          if (call == nullptr)
            return Err(*i, kLocalToGlobalTarget,
                       "%" + i->name() + " (" + kLocalToGlobalTarget +
                           ") must read the results of one call of a shard_map body");
        }
        if (call == nullptr) continue;
        MS_ASSIGN_OR_RETURN(std::vector<std::string> axes, ManualAxes(*i));
        Computation* body = call->to_apply();
        auto [it, fresh] = body_axes_.emplace(call, axes);
        if (!fresh && it->second != axes)
          return Err(*i, kManualAxesKey,
                     "the manual axes of %" + i->name() + " differ from those around the same " +
                         "shard_map body %" + call->name());
        region_[body] = Concat(region, axes);
      }
      for (const auto& owned : c->instructions())
        for (Computation* callee : owned->called_computations())
          if (!body_axes_.count(owned.get())) region_.emplace(callee, region);
    }
    return Status::Ok();
  }

  // --- 3. value shardings ----------------------------------------------------
  // Lowers `shardings` for a value of `shape`, recording the mesh used.
  StatusOr<Sharding> LowerFor(const Instruction& i, const char* key,
                              const std::vector<TensorSharding>& shardings, const Shape& shape,
                              const LowerRequest& base, std::vector<int64_t>* open_dims) {
    std::vector<const Shape*> leaves = ArrayLeaves(shape);
    if (shardings.size() != leaves.size())
      return Err(i, key,
                 std::string(key) + " of %" + i.name() + " gives " +
                     std::to_string(shardings.size()) + " shardings for " +
                     std::to_string(leaves.size()) + " values");
    std::vector<Sharding> out;
    for (size_t k = 0; k < leaves.size(); ++k) {
      LowerRequest request = base;
      request.rank = leaves[k]->rank();
      StatusOr<Lowered> lowered = sdy::Lower(shardings[k], meshes_, request);
      if (!lowered.ok())
        return Err(i, key, std::string(key) + " of %" + i.name() + ": " +
                               lowered.status().message());
      MS_RETURN_IF_ERROR(NoteMesh(i, key, *lowered));
      if (open_dims != nullptr) *open_dims = lowered->open_empty_dims;
      out.push_back(lowered->sharding);
    }
    if (!shape.IsTuple()) return out[0];
    return Sharding::Tuple(std::move(out));
  }

  Status NoteMesh(const Instruction& i, const char* key, const Lowered& lowered) {
    if (lowered.mesh->IsMaximal()) return Status::Ok();
    const int64_t n = lowered.mesh->num_devices();
    const std::string name = lowered.mesh_name.empty() ? "an inlined mesh" : "@" + lowered.mesh_name;
    if (devices_ == 0) {
      devices_ = n;
      first_mesh_ = name;
    } else if (devices_ != n) {
      return Err(i, key,
                 std::string(key) + " of %" + i.name() + " uses " + name + " of " +
                     std::to_string(n) + " devices, but " + first_mesh_ + " (used before) has " +
                     std::to_string(devices_) + ": one module runs on one device count");
    }
    mesh_names_.insert(lowered.mesh_name);  // "" for an inlined mesh
    return Status::Ok();
  }

  Status SetSharding(Instruction& i, const Sharding& s) {
    if (i.has_sharding() && *i.sharding() != s)
      return Err(i, kShardingKey,
                 std::string(kShardingKey) + " of %" + i.name() + " lowers to " +
                     s.ToString(false) + ", but its sharding=" + i.sharding()->ToString(false) +
                     " says otherwise");
    i.set_sharding(s);
    return Status::Ok();
  }

  Status LowerInstruction(Instruction* i) {
    if (Key(i, kShardingKey) == nullptr) return Status::Ok();
    MS_ASSIGN_OR_RETURN(std::vector<TensorSharding> parsed, ParseKey(*i, kShardingKey));
    LowerRequest request;
    request.manual_axes = region_[i->parent()];
    std::vector<int64_t> open;
    MS_ASSIGN_OR_RETURN(Sharding s, LowerFor(*i, kShardingKey, parsed, i->shape(), request, &open));
    // (A FuncResultSharding's own sharding= is checked too, then moved.)
    MS_RETURN_IF_ERROR(SetSharding(*i, s));
    if (IsTarget(*i, kFuncResultTarget)) {
      result_shardings_[i] = {s, open};
      return Status::Ok();
    }
    if (IsTarget(*i, kShardingTarget) && !open.empty() && !i->shape().IsTuple())
      MS_RETURN_IF_ERROR(MarkUnspecified(*i, open));
    return Status::Ok();
  }

  // An open dim without axes on a Sharding custom-call: XLA's
  // `unspecified_dims`, which propagation may still shard.
  Status MarkUnspecified(Instruction& i, const std::vector<int64_t>& dims) {
    std::string list;
    for (int64_t d : dims) list += (list.empty() ? "" : ",") + std::to_string(d);
    const std::string value = "\"unspecified_dims=[" + list + "]\"";
    for (auto& [k, v] : i.mutable_attrs().extra)
      if (k == "backend_config") {
        if (v == value || v == "\"\"") {
          v = value;
          return Status::Ok();
        }
        return Err(i, kShardingKey,
                   "%" + i.name() + " has open dims in " + kShardingKey +
                       " but a backend_config of its own (" + v + ")");
      }
    i.mutable_attrs().extra.emplace_back("backend_config", value);
    return Status::Ok();
  }

  // --- 4. custom-calls -------------------------------------------------------
  // `name` is made unique unless `take_name` (it replaces the instruction
  // of that name, which goes).
  Instruction* AddCustomCall(Computation* c, const char* target, const std::string& name,
                             const Shape& shape, Instruction* operand, const Sharding& s,
                             const SourceLoc& loc, bool take_name = false) {
    auto i = std::make_unique<Instruction>(
        Opcode::kCustomCall, take_name ? name : m_.UniqueInstructionName(name), shape);
    i->mutable_attrs().custom_call_target = target;
    i->AppendOperand(operand);
    i->set_sharding(s);
    i->set_loc(loc);
    return c->AddInstruction(std::move(i));
  }

  // Makes the users of result k of `multi` (the op itself or its
  // get-tuple-element k) use `values[k]`, removing the get-tuple-elements.
  static Status ReplaceResults(Computation* c, Instruction* multi,
                               const std::vector<Instruction*>& values) {
    if (!multi->shape().IsTuple()) {
      if (c->root() == multi) c->set_root(values[0]);
      multi->ReplaceAllUsesWith(values[0]);
      return Status::Ok();
    }
    std::vector<Instruction*> users = multi->users();
    for (Instruction* u : users) {
      if (u->opcode() != Opcode::kGetTupleElement)
        return Status::Error("%" + multi->name() + " is used by %" + u->name() +
                                 ", not a get-tuple-element",
                             u->loc());
      Instruction* v = values.at(u->attrs().tuple_index);
      if (c->root() == u) c->set_root(v);
      u->ReplaceAllUsesWith(v);
      c->RemoveInstruction(u);
    }
    return Status::Ok();
  }

  Status Rewrite(Computation* c) {
    // The targets are chosen before any is rewritten: a rewrite removes the
    // get-tuple-elements of its results, which a walk over the snapshot
    // would then read after they were freed.
    std::vector<Instruction*> targets;
    for (Instruction* i : Snapshot(c))
      if (IsTarget(*i, kFuncResultTarget) || IsTarget(*i, kGlobalToLocalTarget) ||
          IsTarget(*i, kLocalToGlobalTarget))
        targets.push_back(i);
    for (Instruction* i : targets) {
      if (IsTarget(*i, kFuncResultTarget)) {
        MS_RETURN_IF_ERROR(RewriteFuncResult(c, i));
      } else if (IsTarget(*i, kGlobalToLocalTarget)) {
        MS_RETURN_IF_ERROR(RewriteGlobalToLocal(c, i));
      } else if (IsTarget(*i, kLocalToGlobalTarget)) {
        MS_RETURN_IF_ERROR(RewriteLocalToGlobal(c, i));
      }
    }
    // Entry results: when every element of the root tuple had one, the
    // tuple's sharding (as GSPMD writes it), else a copy per result.
    if (!pending_results_.empty()) {
      Instruction* root = c->root();
      bool all = root->opcode() == Opcode::kTuple && root->operand_count() > 0;
      for (int k = 0; all && k < root->operand_count(); ++k)
        all = pending_results_.count(root->operand(k)) > 0;
      if (all) {
        std::vector<Sharding> elements;
        for (int k = 0; k < root->operand_count(); ++k)
          elements.push_back(result_shardings_.at(root->operand(k)).sharding);
        MS_RETURN_IF_ERROR(SetSharding(*root, Sharding::Tuple(std::move(elements))));
        for (int k = 0; k < root->operand_count(); ++k) {
          Instruction* f = root->operand(k);
          root->ReplaceOperand(k, f->operand(0));
          if (f->users().empty()) c->RemoveInstruction(f);
        }
      } else {
        for (Instruction* f : std::vector<Instruction*>(pending_results_.begin(),
                                                        pending_results_.end()))
          ReplaceByCopy(c, f);
      }
      pending_results_.clear();
    }
    return Status::Ok();
  }

  void ReplaceByCopy(Computation* c, Instruction* f) {
    if (f->parent() != c) return;
    auto copy = std::make_unique<Instruction>(Opcode::kCopy, f->name(), f->shape());
    copy->AppendOperand(f->operand(0));
    copy->set_sharding(result_shardings_.at(f).sharding);
    copy->set_loc(f->loc());
    Instruction* k = c->AddInstruction(std::move(copy));
    if (c->root() == f) c->set_root(k);
    f->ReplaceAllUsesWith(k);
    c->RemoveInstruction(f);
  }

  Status RewriteFuncResult(Computation* c, Instruction* f) {
    if (f->operand_count() != 1 || f->shape().IsTuple())
      return Err(*f, kFuncResultTarget,
                 "%" + f->name() + " (" + kFuncResultTarget + ") must take one array operand");
    if (!result_shardings_.count(f))
      return Err(*f, kFuncResultTarget,
                 "%" + f->name() + " (" + kFuncResultTarget + ") has no " + kShardingKey);
    const ResultSharding r = result_shardings_.at(f);
    Instruction* root = c->root();
    const bool only_root = !f->users().empty() &&
                           std::all_of(f->users().begin(), f->users().end(),
                                       [&](Instruction* u) { return u == root; });
    if (c->IsEntry() && root == f) {
      // The one result: its producer carries the sharding when nothing
      // else fixes it, else a copy does.
      Instruction* x = f->operand(0);
      if (x->opcode() != Opcode::kParameter && !x->has_sharding()) {
        x->set_sharding(r.sharding);
        c->set_root(x);
        c->RemoveInstruction(f);
      } else {
        ReplaceByCopy(c, f);
      }
      return Status::Ok();
    }
    if (c->IsEntry() && only_root && root->opcode() == Opcode::kTuple) {
      pending_results_.insert(f);
      return Status::Ok();
    }
    // Elsewhere (an inlined function's result, a called computation) XLA
    // keeps it as a sharding constraint; so do we.
    f->mutable_attrs().custom_call_target = kShardingTarget;
    auto& extra = f->mutable_attrs().extra;
    extra.erase(std::remove_if(extra.begin(), extra.end(),
                               [](const auto& kv) { return kv.first == "custom_call_has_side_effect"; }),
                extra.end());
    f->set_sharding(r.sharding);
    if (!r.open_dims.empty()) MS_RETURN_IF_ERROR(MarkUnspecified(*f, r.open_dims));
    return Status::Ok();
  }

  // A shard_map's in/out shardings: one per operand.
  Status CheckCount(const Instruction& i, const char* key, size_t count) const {
    if (static_cast<int>(count) == i.operand_count()) return Status::Ok();
    return Err(i, key,
               std::string(key) + " of %" + i.name() + " gives " + std::to_string(count) +
                   " shardings for " + std::to_string(i.operand_count()) + " operands");
  }

  Status RewriteGlobalToLocal(Computation* c, Instruction* g) {
    MS_ASSIGN_OR_RETURN(std::vector<TensorSharding> in, ParseKey(*g, kInShardingsKey));
    MS_ASSIGN_OR_RETURN(std::vector<std::string> axes, ManualAxes(*g));
    const std::vector<std::string>& outer = region_[c];
    MS_RETURN_IF_ERROR(CheckCount(*g, kInShardingsKey, in.size()));
    std::vector<Instruction*> locals;
    for (int k = 0; k < g->operand_count(); ++k) {
      Instruction* x = g->operand(k);
      const Shape& local = g->shape().IsTuple() ? g->shape().tuple_shapes(k) : g->shape();
      if (x->shape().IsTuple() || local.IsTuple())
        return Err(*g, kGlobalToLocalTarget, "%" + g->name() + ": operand " + std::to_string(k) +
                                                 " is a tuple; shard_map operands are arrays");
      LowerRequest global;
      global.manual_axes = outer;
      MS_ASSIGN_OR_RETURN(Sharding gs, LowerFor(*g, kInShardingsKey, {in[k]}, x->shape(), global,
                                                nullptr));
      LowerRequest inner;
      inner.manual_axes = Concat(outer, axes);
      inner.drop_from_dims = axes;
      MS_ASSIGN_OR_RETURN(Sharding ls, LowerFor(*g, kInShardingsKey, {in[k]}, local, inner,
                                                nullptr));
      MS_RETURN_IF_ERROR(CheckLocalShape(*g, kInShardingsKey, k, in[k], axes, x->shape(), local));
      const std::string n = g->operand_count() == 1 ? "" : std::to_string(k);
      Instruction* pinned = AddCustomCall(c, kShardingTarget, g->name() + ".global" + n,
                                          x->shape(), x, gs, g->loc());
      // One result keeps the custom-call's name.
      locals.push_back(AddCustomCall(c, "SPMDFullToShardShape",
                                     n.empty() ? g->name() : g->name() + ".local" + n, local,
                                     pinned, ls, g->loc(), n.empty()));
    }
    MS_RETURN_IF_ERROR(ReplaceResults(c, g, locals));
    c->RemoveInstruction(g);
    return Status::Ok();
  }

  Status RewriteLocalToGlobal(Computation* c, Instruction* l) {
    MS_ASSIGN_OR_RETURN(std::vector<TensorSharding> out, ParseKey(*l, kOutShardingsKey));
    MS_ASSIGN_OR_RETURN(std::vector<std::string> axes, ManualAxes(*l));
    const std::vector<std::string>& outer = region_[c];
    MS_RETURN_IF_ERROR(CheckCount(*l, kOutShardingsKey, out.size()));
    std::vector<Instruction*> globals;
    for (int k = 0; k < l->operand_count(); ++k) {
      Instruction* v = l->operand(k);
      const Shape& global = l->shape().IsTuple() ? l->shape().tuple_shapes(k) : l->shape();
      if (v->shape().IsTuple() || global.IsTuple())
        return Err(*l, kLocalToGlobalTarget, "%" + l->name() + ": result " + std::to_string(k) +
                                                 " is a tuple; shard_map results are arrays");
      LowerRequest inner;
      inner.manual_axes = Concat(outer, axes);
      inner.drop_from_dims = axes;
      MS_ASSIGN_OR_RETURN(Sharding ls, LowerFor(*l, kOutShardingsKey, {out[k]}, v->shape(), inner,
                                                nullptr));
      LowerRequest outside;
      outside.manual_axes = outer;
      MS_ASSIGN_OR_RETURN(Sharding gs, LowerFor(*l, kOutShardingsKey, {out[k]}, global, outside,
                                                nullptr));
      MS_RETURN_IF_ERROR(CheckLocalShape(*l, kOutShardingsKey, k, out[k], axes, global,
                                         v->shape()));
      const std::string n = l->operand_count() == 1 ? "" : std::to_string(k);
      Instruction* pinned = AddCustomCall(c, kShardingTarget, l->name() + ".local" + n,
                                          v->shape(), v, ls, l->loc());
      globals.push_back(AddCustomCall(c, "SPMDShardToFullShape",
                                      n.empty() ? l->name() : l->name() + ".global" + n, global,
                                      pinned, gs, l->loc(), n.empty()));
    }
    MS_RETURN_IF_ERROR(ReplaceResults(c, l, globals));
    c->RemoveInstruction(l);
    return Status::Ok();
  }

  // The local shape of a shard_map value is the global one divided by the
  // manual axes on each dim.
  Status CheckLocalShape(const Instruction& i, const char* key, int k, const TensorSharding& s,
                         const std::vector<std::string>& axes, const Shape& global,
                         const Shape& local) {
    const sdy::MeshDecl* mesh =
        s.inline_mesh ? &*s.inline_mesh : &meshes_.at(s.mesh_name);  // Lower checked the name
    bool fits = local.rank() == global.rank();
    std::string expected;
    for (int64_t d = 0; d < global.rank(); ++d) {
      int64_t parts = 1;
      for (const sdy::AxisRef& r : s.dims[d].axes)
        if (std::find(axes.begin(), axes.end(), r.name) != axes.end())
          for (const sdy::MeshAxisDecl& a : mesh->axes)
            if (a.name == r.name) parts *= a.size;
      fits &= global.dimensions(d) % parts == 0 &&
              (!fits || global.dimensions(d) == local.dimensions(d) * parts);
      expected += (d ? "," : "") + std::to_string(global.dimensions(d) / parts) +
                  (global.dimensions(d) % parts ? "(uneven)" : "");
    }
    if (!fits)
      return Err(i, key,
                 std::string(key) + " of %" + i.name() + ", value " + std::to_string(k) +
                     ": the global shape " + global.ToString(false) +
                     " split by the manual axes is [" + expected + "], not the local shape " +
                     local.ToString(false));
    return Status::Ok();
  }

  // --- 5. shard_map bodies ---------------------------------------------------
  void InlineBodies(Computation* c) {
    for (Instruction* call : Snapshot(c)) {
      if (!body_axes_.count(call)) continue;
      Computation* body = call->to_apply();
      // The first copy of a body keeps its names (the body goes); another
      // call of the same body gets fresh ones.
      const bool fresh_names = inlined_.count(body) > 0;
      std::unordered_map<const Instruction*, Instruction*> map;
      for (int p = 0; p < body->parameter_count(); ++p) map[body->parameter(p)] = call->operand(p);
      for (Instruction* in : body->MakePostOrder()) {
        if (in->opcode() == Opcode::kParameter) continue;
        auto i = std::make_unique<Instruction>(
            in->opcode(), fresh_names ? m_.UniqueInstructionName(in->name()) : in->name(),
            in->shape());
        i->mutable_attrs() = in->attrs();
        if (in->has_literal()) i->set_literal(in->literal());
        if (in->has_sharding()) i->set_sharding(*in->sharding());
        i->set_loc(in->loc());
        i->set_called_computations(in->called_computations());
        for (Instruction* o : in->operands()) i->AppendOperand(map.at(o));
        for (Instruction* p : in->control_predecessors()) i->AddControlPredecessor(map.at(p));
        map[in] = c->AddInstruction(std::move(i));
      }
      Instruction* result = map.at(body->root());
      // get-tuple-elements of the body's result tuple read its operands.
      if (result->opcode() == Opcode::kTuple) {
        for (Instruction* u : std::vector<Instruction*>(call->users())) {
          if (u->opcode() != Opcode::kGetTupleElement) continue;
          Instruction* v = result->operand(u->attrs().tuple_index);
          if (c->root() == u) c->set_root(v);
          u->ReplaceAllUsesWith(v);
          c->RemoveInstruction(u);
        }
      }
      if (c->root() == call) c->set_root(result);
      call->ReplaceAllUsesWith(result);
      c->RemoveInstruction(call);
      if (result->users().empty() && c->root() != result && result->opcode() == Opcode::kTuple)
        c->RemoveInstruction(result);
      inlined_.insert(body);
    }
  }

  void RemoveDeadBodies() {
    std::unordered_set<const Computation*> called;
    for (const auto& c : m_.computations())
      for (const auto& i : c->instructions())
        for (Computation* callee : i->called_computations()) called.insert(callee);
    for (Computation* body : inlined_)
      if (!called.count(body)) m_.RemoveComputation(body);
  }

  // --- 6. the module ---------------------------------------------------------
  Status SetPartitionsAndMesh() {
    if (devices_ == 0) return Status::Ok();
    if (m_.num_partitions() != 1 && m_.num_partitions() != devices_)
      return Status::Error("num_partitions=" + std::to_string(m_.num_partitions()) +
                               " but the Shardy mesh " + first_mesh_ + " has " +
                               std::to_string(devices_) + " devices",
                           AtKey(HeaderLoc(m_), "num_partitions"));
    m_.set_num_partitions(devices_);
    // The named mesh of hand-written HLO, when there is one to name.
    if (mesh_names_.size() != 1 || mesh_names_.begin()->empty()) return Status::Ok();
    if (ModuleFrontendAttribute(m_, kModuleMeshAttribute)) return Status::Ok();
    const sdy::MeshDecl& decl = meshes_.at(*mesh_names_.begin());
    std::vector<MeshAxis> axes;
    for (const sdy::MeshAxisDecl& a : decl.axes) axes.push_back({a.name, a.size});
    StatusOr<Mesh> mesh = Mesh::Create(axes, decl.device_ids);
    // Axis names that are not identifiers have no named form here.
    if (!mesh.ok() || !Mesh::Parse(mesh->ToString()).ok()) return Status::Ok();
    SetModuleFrontendAttribute(m_, kModuleMeshAttribute, mesh->ToString());
    return Status::Ok();
  }

  struct ResultSharding {
    Sharding sharding;
    std::vector<int64_t> open_dims;
  };

  Module& m_;
  bool any_ = false;
  sdy::MeshTable meshes_;
  std::unordered_map<const Instruction*, Keys> sdy_;
  // The manual axes in force in each computation (shard_map bodies and what
  // they call).
  std::unordered_map<const Computation*, std::vector<std::string>> region_;
  // Calls of shard_map bodies, with the body's own manual axes.
  std::unordered_map<const Instruction*, std::vector<std::string>> body_axes_;
  std::unordered_map<const Instruction*, ResultSharding> result_shardings_;
  std::set<Instruction*> pending_results_;
  std::set<Computation*> inlined_;
  int64_t devices_ = 0;
  std::string first_mesh_;
  std::set<std::string> mesh_names_;
};

}  // namespace

StatusOr<bool> ImportShardy(Module& module) { return Importer(module).Run(); }

}  // namespace meshsplit
