// The propagation driver: converts annotations, folds Sharding custom-calls,
// links control-flow bodies to their callers, then alternates forward and
// backward passes to a fixed point at aggressiveness 0..3 (XLA's order), and
// finally applies shard_as groups, barriers and the entry-signature policies.
#include "propagation/propagation.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <sstream>
#include <unordered_set>

#include "ir/shape_inference_p2p.h"
#include "propagation/propagator.h"
#include "support/check.h"

namespace meshsplit {

using propagation::Propagator;

StatusOr<bool> PropagateShardings(Module& module,
                                  const PropagationOptions& options,
                                  PropagationReport* report) {
  Propagator p(module, options, report);
  StatusOr<bool> changed = p.Run();
  if (report != nullptr && changed.ok()) report->changed = *changed;
  return changed;
}

namespace propagation {

namespace {

// XLA's post order: DFS from each user-less instruction in list order, first
// operand first, then control predecessors.
std::vector<Instruction*> PostOrder(const Computation* c) {
  std::vector<Instruction*> order;
  order.reserve(c->instructions().size());
  // Visited marks by position in the computation's list.
  PtrIndex pos;
  pos.Reserve(c->instructions().size());
  for (size_t k = 0; k < c->instructions().size(); ++k)
    pos.Put(c->instructions()[k].get(), (int)k);
  std::vector<char> seen(c->instructions().size(), 0);
  struct Visited {
    PtrIndex& pos;
    std::vector<char>& seen;
    // Returns true if newly inserted (like unordered_set::insert().second).
    bool insert(const Instruction* i) {
      int k = pos.Find(i);
      if (k < 0 || seen[k]) return false;
      seen[k] = 1;
      return true;
    }
  } visited{pos, seen};
  std::vector<std::pair<Instruction*, size_t>> stack;
  auto visit_from = [&](Instruction* start) {
    if (!visited.insert(start)) return;
    stack.push_back({start, 0});
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      const size_t n_ops = node->operands().size();
      const size_t n_all = n_ops + node->control_predecessors().size();
      if (next < n_all) {
        Instruction* dep = next < n_ops ? node->operands()[next]
                                        : node->control_predecessors()[next - n_ops];
        ++next;
        if (dep->parent() == c && visited.insert(dep))
          stack.push_back({dep, 0});
        continue;
      }
      order.push_back(node);
      stack.pop_back();
    }
  };
  for (const auto& i : c->instructions())
    if (i->users().empty()) visit_from(i.get());
  for (const auto& i : c->instructions()) visit_from(i.get());
  return order;
}

std::vector<int64_t> ParseUnspecifiedDims(const Instruction& instr) {
  const std::string* cfg = instr.attrs().FindExtra("backend_config");
  if (cfg == nullptr) return {};
  std::vector<int64_t> dims = UnspecifiedDimsAsWritten(*cfg);
  std::sort(dims.begin(), dims.end());
  return dims;
}

// Whether propagation can work with `s`: no unreduced values or subgroups
// (those are kept verbatim and nothing flows through them).
bool IsModelled(const Sharding& s, std::string* why) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements())
      if (!IsModelled(e, why)) return false;
    return true;
  }
  if (s.kind() == Sharding::Kind::kUnreduced ||
      s.SubgroupDim(SubgroupType::kUnreduced) >= 0) {
    *why = "unreduced shardings are not propagated";
    return false;
  }
  return true;
}

// The working form of an IR sharding: nested tuples flattened, metadata
// dropped except XLA's CSE-prevention marker (which the write-back keeps).
Sharding WorkingForm(const Sharding& ir) {
  if (ir.IsTuple()) {
    std::vector<Sharding> leaves;
    for (const Sharding& e : ir.tuple_elements()) leaves.push_back(WorkingForm(e));
    Sharding t = FlatTuple(std::move(leaves));
    return t;
  }
  Sharding s = ir;
  SetCsePrevention(&s, HasCsePrevention(ir));
  return s;
}

// Ranks of the leaves of `shape` (0 for tokens and scalars).
void LeafRanks(const Shape& shape, std::vector<int64_t>* out) {
  if (shape.IsTuple()) {
    for (const Shape& e : shape.tuple_shapes()) LeafRanks(e, out);
    return;
  }
  out->push_back(shape.IsArray() ? shape.rank() : 0);
}

// An annotation that does not fit its value's shape (the tile rank, or a
// tuple sharding's leaf count) is an input error: every rule indexes tile
// dims by the value's dims. Outfeed shardings describe the operands, not the
// token result, and are not checked here (as in the verifier).
Status CheckShardingFits(const Instruction& instr) {
  if (instr.opcode() == Opcode::kOutfeed) return Status::Ok();
  constexpr int64_t kAnyDevices = int64_t{1} << 62;
  Status fit = Status::Ok();
  if (instr.shape().IsTuple()) {
    std::vector<int64_t> ranks;
    LeafRanks(instr.shape(), &ranks);
    fit = instr.sharding()->ValidateTuple(ranks, kAnyDevices);
  } else {
    fit = instr.sharding()->Validate(
        instr.shape().IsArray() ? instr.shape().rank() : 0, kAnyDevices);
  }
  if (fit.ok()) return fit;
  return Status::Error("sharding of '" + instr.name() + "' does not fit " +
                           instr.shape().ToString(false) + ": " + fit.message(),
                       instr.loc());
}

bool EvenlyPartitions(const Shape& shape, const Sharding& s) {
  if (s.IsTuple()) {
    for (int64_t i = 0; i < shape.tuple_size(); ++i)
      if (!EvenlyPartitions(shape.tuple_shapes(i), GetSubSharding(s, shape, i)))
        return false;
    return true;
  }
  // Only tilings can fail to divide: replicated, single-device (maximal) and
  // manual shardings always fit (XLA keeps a maximal entry sharding as is).
  if (!s.IsTiled()) return true;
  if (!shape.IsArray()) return true;
  for (int i = 0; i < shape.rank() && i < s.TiledDataRank(); ++i)
    if (shape.dimensions(i) % TileDimOr1(s, i) != 0) return false;
  return true;
}

}  // namespace

// --- state ---------------------------------------------------------------------

void Propagator::Set(const Instruction* i, Sharding s) {
  if (s.IsTuple() != i->shape().IsTuple()) s = NormalizeToShape(s, i->shape());
  int id = Id(i);
  if (recording_ && report_ != nullptr) {
    ShardingProvenance p;
    p.how = ctx_how_;
    p.rule = Rule(i).name;
    for (const Instruction* src : ctx_sources_) p.sources.push_back(src->name());
    p.sharding = ProvenanceText(s);
    p.aggressiveness = ctx_aggr_;
    report_->history[i->name()].push_back(std::move(p));
  }
  sharding_[id] = std::move(s);
}

const std::string& Propagator::ProvenanceText(const Sharding& s) {
  if (s.IsTuple()) return tuple_text_ = s.ToString(/*include_metadata=*/false);
  auto it = provenance_text_.find(s);
  if (it == provenance_text_.end())
    it = provenance_text_.emplace(s, s.ToString(/*include_metadata=*/false)).first;
  return it->second;
}

void Propagator::Clear(const Instruction* i) { sharding_[Id(i)].reset(); }

const OpShardingRule& Propagator::ComputeRule(const Instruction* i, int id) {
  if (as_copy_.count(i)) {
    // An annotation XLA replaces by a copy: its sharding passes whole in
    // either direction (as_copy_ checks), so the rule needs no factors.
    rules_[id] = RuleBuilder(RuleKind::kElementwise, "sharding-annotation")
                     .MinAggressiveness(0)
                     .Partitioning(Partitionable::kYes)
                     .RepresentedBy(Representative::kMostSpecific)
                     .Build();
  } else {
    rules_[id] = GetOpShardingRule(*i);
  }
  return *rules_[id];
}

bool Propagator::IsCustomCallTarget(const Instruction* i, const char* target) const {
  return IsCustomCall(*i, target) && !as_copy_.count(i);
}

bool Propagator::MaybeImprove(const Instruction* i, const Sharding& s,
                              bool may_combine, bool allow_aggressive) {
  if (s.IsTuple() != i->shape().IsTuple())
    return MaybeImprove(i, NormalizeToShape(s, i->shape()), may_combine,
                        allow_aggressive);
  const Sharding* cur = Has(i) ? &Get(i) : nullptr;
  // The same sharding again (most visits once the fixed point is near):
  // ReturnImprovedSharding would keep `cur`, so nothing changes (and
  // nothing is copied).
  if (cur != nullptr && *cur == s) return false;
  auto r = ReturnImprovedSharding(s, cur, i->shape(), may_combine,
                                  allow_aggressive);
  if (!r) return false;
  if (cur != nullptr && *cur == *r) return false;
  Set(i, std::move(*r));
  return true;
}

bool Propagator::MaybeImproveSub(const Instruction* i, Sharding s, int64_t index,
                                 bool may_combine, bool allow_aggressive) {
  if (!i->shape().IsTuple())
    return MaybeImprove(i, std::move(s), may_combine, allow_aggressive);
  const Shape& sub_shape = i->shape().tuple_shapes(index);
  std::optional<Sharding> cur;
  if (Has(i)) cur = GetSubSharding(Get(i), i->shape(), index);
  auto r = ReturnImprovedSharding(NormalizeToShape(s, sub_shape),
                                  cur ? &*cur : nullptr, sub_shape, may_combine,
                                  allow_aggressive);
  if (!r) return false;
  Sharding whole = Has(i) ? Get(i) : SingleTuple(i->shape(), Sharding::Replicate());
  int64_t start = 0;
  for (int64_t k = 0; k < index; ++k) start += LeafCount(i->shape().tuple_shapes(k));
  auto& el = whole.mutable_tuple_elements();
  if (r->IsTuple()) {
    for (size_t k = 0; k < r->tuple_elements().size(); ++k)
      el[start + k] = r->tuple_elements()[k];
  } else {
    el[start] = *r;
  }
  if (Has(i) && Get(i) == whole) return false;
  Set(i, std::move(whole));
  return true;
}

// --- driver --------------------------------------------------------------------

bool Propagator::ThreadIncluded(const std::string& thread) const {
  const auto& threads = options_.execution_threads;
  const std::string& name = thread.empty() ? std::string("main") : thread;
  return threads.empty() || std::find(threads.begin(), threads.end(), name) != threads.end();
}

bool Propagator::IsAsyncOnExcludedThread(const Instruction* i) const {
  const Opcode opc = i->opcode();
  if (opc != Opcode::kAsyncStart && opc != Opcode::kAsyncUpdate && opc != Opcode::kAsyncDone)
    return false;
  // -update and -done reach their start through operand 0.
  const Instruction* start = i;
  while (start->opcode() != Opcode::kAsyncStart && start->operand_count() > 0)
    start = start->operand(0);
  if (start->opcode() != Opcode::kAsyncStart || start->called_computations().empty())
    return false;
  return !ThreadIncluded(start->called_computations()[0]->execution_thread());
}

Status Propagator::Init() {
  size_t total = 0;
  for (const auto& c : module_.computations()) total += c->instructions().size();
  id_.Reserve(total + 16);
  instrs_.reserve(total + 1);
  // Like XLA, which propagates over its non-fusion computations only, fused
  // computations are left as they are.
  std::unordered_set<const Computation*> fused;
  for (const auto& c : module_.computations())
    for (const auto& instr : c->instructions())
      if (instr->opcode() == Opcode::kFusion)
        for (const Computation* f : instr->called_computations()) fused.insert(f);
  for (const auto& c : module_.computations()) {
    // Only computations of the requested execution threads are propagated
    // ("main" is the thread of computations that name none).
    if (ThreadIncluded(c->execution_thread()) && !fused.count(c.get()))
      computations_.push_back(c.get());
    for (const auto& instr : c->instructions()) {
      id_.Put(instr.get(), (int)instrs_.size());
      instrs_.push_back(instr.get());
      std::optional<Sharding> s;
      if (instr->has_sharding()) {
        MS_RETURN_IF_ERROR(CheckShardingFits(*instr));
        std::string why;
        if (IsModelled(*instr->sharding(), &why)) {
          s = NormalizeToShape(WorkingForm(*instr->sharding()), instr->shape());
        } else {
          // A form propagation does not model (e.g. unreduced): keep it
          // untouched and let nothing flow through it.
          opaque_.insert(instr.get());
          if (report_ != nullptr)
            report_->warnings.push_back("sharding of '" + instr->name() +
                                        "' is kept as is and not propagated (" +
                                        why + ")");
        }
      }
      original_.push_back(s);
      sharding_.push_back(s);
    }
  }
  rules_.resize(instrs_.size());
  const auto& out = options_.allow_spmd_sharding_propagation_to_output;
  const auto& par = options_.allow_spmd_sharding_propagation_to_parameters;
  allow_output_ = std::any_of(out.begin(), out.end(), [](bool b) { return b; });
  allow_params_ = std::any_of(par.begin(), par.end(), [](bool b) { return b; });
  return Status::Ok();
}

void Propagator::RemoveInstruction(Instruction* instr, Instruction* replacement) {
  instr->ReplaceAllUsesWith(replacement);
  removed_.insert(instr);
  Clear(instr);
  structure_changed_ = true;
  instr->DropAllOperands();
  // Deleted after write-back so no pointer to it dangles during the run.
}

Status Propagator::ProcessShardingInstructions() {
  const bool replace = !options_.cse_prevention_only;
  for (Computation* c : computations_) {
    std::vector<Instruction*> order = PostOrder(c);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Instruction* instr = *it;
      bool is_annotation = IsCustomCall(*instr, "Sharding");
      bool replaced = false;
      if (is_annotation) {
        if (!Has(instr))
          return Status::Error("Sharding custom-call '" + instr->name() +
                                   "' has no sharding attribute",
                               instr->loc());
        replaced = replace && (!IsUnknownSharding(Get(instr)) ||
                               instr->operand(0)->opcode() == Opcode::kParameter);
        if (replaced) as_copy_.insert(instr);
      }
      bool remove = false;
      if (replace && Has(instr) && !Get(instr).IsTuple() &&
          Get(instr).shard_group().has_value()) {
        const Sharding& s = Get(instr);
        if (is_annotation && !replaced) {
          // An unknown Sharding custom-call only names a shard group: hand
          // the group to its operand and drop the call.
          Instruction* op = instr->operand(0);
          Sharding os = Has(op) ? Get(op) : Sharding::Unknown();
          if (!os.IsTuple()) os.set_shard_group(s.shard_group());
          SetContext("shard group from " + instr->name(), {instr}, -1);
          Set(op, os);
          remove = true;
        } else {
          const ShardGroup group = *s.shard_group();
          shard_group_of_[instr] = group.id;
          (group.shard_as ? shard_as_groups_ : shard_like_groups_)[group.id]
              .push_back(instr);
          Sharding clean = s;
          clean.set_shard_group(std::nullopt);
          sharding_[Id(instr)] = clean;
        }
      }
      if (is_annotation) {
        std::vector<int64_t> unspec = ParseUnspecifiedDims(*instr);
        if (!unspec.empty()) {
          unspecified_dims_[instr] = unspec;
        } else if (!Has(instr->operand(0))) {
          SetContext("annotation " + instr->name(), {instr}, -1);
          Set(instr->operand(0), Get(instr));
        }
      }
      if (remove) RemoveInstruction(instr, instr->operand(0));
    }
  }
  Computation* entry = module_.entry();
  Instruction* root = entry->root();
  if (allow_output_ && root->shape().IsTuple() && Has(root))
    saved_root_shardings_ = Get(root).tuple_elements();
  if (allow_params_) {
    for (int i = 0; i < entry->parameter_count(); ++i)
      if (Has(entry->parameter(i)))
        saved_param_shardings_.emplace(i, Get(entry->parameter(i)));
  }
  return Status::Ok();
}

std::vector<Instruction*> Propagator::RelatedInstructions(Instruction* instr) {
  switch (instr->opcode()) {
    case Opcode::kWhile:
      return {instr, instr->while_body()->root(),
              instr->while_body()->parameter(0),
              instr->while_condition()->parameter(0)};
    case Opcode::kConditional: {
      std::vector<Instruction*> r = {instr};
      for (Computation* c : instr->called_computations()) r.push_back(c->root());
      return r;
    }
    case Opcode::kCall:
      return {instr, instr->called_computations().front()->root()};
    case Opcode::kParameter: {
      Instruction* caller = Caller(instr->parent());
      if (caller == nullptr) return {};
      if (caller->opcode() == Opcode::kConditional) {
        const auto& cs = caller->called_computations();
        for (size_t i = 0; i < cs.size(); ++i)
          if (cs[i] == instr->parent() && (int)i + 1 < caller->operand_count())
            return {instr, caller->operand(i + 1)};
      }
      if (caller->opcode() == Opcode::kCall &&
          instr->attrs().parameter_number < caller->operand_count())
        return {instr, caller->operand(instr->attrs().parameter_number)};
      return {};
    }
    default:
      return {};
  }
}

// A while whose body holds a channel instruction (a send or recv that is not
// a host transfer, or an all-reduce or reduce-scatter with a channel id)
// placed on one device must run entirely on
// that device: every other single-device instruction of the body must agree,
// and the body root is placed there if it has no placement yet (from which
// the while, its parameters and its condition take it, below). XLA checks the
// same before propagating.
Status Propagator::CheckWhileDeviceAssignments() {
  auto unique_device = [&](const Instruction* i) -> std::optional<int64_t> {
    if (!Has(i)) return std::nullopt;
    return Get(i).UniqueDevice();
  };
  auto conflict = [](const Instruction* i, int64_t device,
                     const Instruction* channel, int64_t channel_device) {
    return Status::Error("'" + i->name() + "' is on device " +
                             std::to_string(device) +
                             ", which conflicts with device " +
                             std::to_string(channel_device) +
                             " of channel instruction '" + channel->name() + "'",
                         i->loc());
  };
  for (Computation* c : computations_) {
    for (const auto& ip : c->instructions()) {
      const Instruction* w = ip.get();
      if (w->opcode() != Opcode::kWhile || removed_.count(w) ||
          w->while_body() == nullptr)
        continue;
      const Computation* body = w->while_body();
      std::optional<int64_t> device;
      const Instruction* channel = nullptr;
      std::vector<std::pair<int64_t, const Instruction*>> others;
      for (const auto& bp : body->instructions()) {
        const Instruction* i = bp.get();
        if (removed_.count(i)) continue;
        const std::optional<int64_t> d = unique_device(i);
        if (!d) continue;
        const bool is_channel =
            ((i->opcode() == Opcode::kSend || i->opcode() == Opcode::kRecv) &&
             !IsHostTransfer(*i)) ||
            ((i->opcode() == Opcode::kAllReduce || i->opcode() == Opcode::kReduceScatter) &&
             i->attrs().channel_id.has_value());
        if (device) {
          if (*d != *device) return conflict(i, *d, channel, *device);
        } else if (is_channel) {
          channel = i;
          device = d;
          for (const auto& [od, oi] : others)
            if (od != *device) return conflict(oi, od, channel, *device);
        } else {
          others.push_back({*d, i});
        }
      }
      if (!device) continue;
      if (auto wd = unique_device(w); wd && *wd != *device)
        return conflict(w, *wd, channel, *device);
      Instruction* root = body->root();
      const std::optional<int64_t> rd = unique_device(root);
      if (!rd) {
        SetContext("while body placed with its channel instruction", {channel},
                   -1);
        Set(root, SingleTuple(root->shape(), Sharding::Maximal(*device)));
      } else if (*rd != *device) {
        return conflict(root, *rd, channel, *device);
      }
    }
  }
  return Status::Ok();
}

void Propagator::BuildComputationMap() {
  for (Computation* c : computations_) {
    for (const auto& ip : c->instructions()) {
      Instruction* instr = ip.get();
      if (instr->opcode() != Opcode::kWhile &&
          instr->opcode() != Opcode::kConditional &&
          instr->opcode() != Opcode::kCall)
        continue;
      if (instr->opcode() == Opcode::kWhile &&
          instr->called_computations().size() < 2)
        continue;
      std::vector<Instruction*> related = RelatedInstructions(instr);
      const Instruction* sharded = nullptr;
      for (Instruction* r : related)
        if (Has(r)) {
          sharded = r;
          break;
        }
      if (sharded != nullptr) {
        Sharding s = Get(sharded);
        SetContext("control flow: shared with " + sharded->name(), {sharded}, -1);
        for (Instruction* r : related)
          if (r != sharded && (!Has(r) || Get(r) != s)) Set(r, s);
      }
      for (Computation* called : instr->called_computations())
        computation_map_[called] = instr;
    }
  }
}

void Propagator::CollectProvided() {
  Computation* entry = module_.entry();
  for (const Instruction* i : opaque_) provided_.insert(i);
  for (Instruction* instr : instrs_) {
    if (removed_.count(instr)) continue;
    if (Has(instr) && instr != entry->root() &&
        instr->opcode() != Opcode::kParameter && !IsUnknownSharding(Get(instr)))
      provided_.insert(instr);
  }
  Instruction* root = entry->root();
  if (!allow_output_ && (!Has(root) || !IsUnknownSharding(Get(root)))) {
    if (root->opcode() == Opcode::kWhile) {
      // Keep the entry result fixed behind a copy so that the while itself
      // can still be resharded.
      auto copy = std::make_unique<Instruction>(
          Opcode::kCopy, module_.UniqueInstructionName("copy"), root->shape());
      copy->AppendOperand(root);
      Instruction* c = entry->AddInstruction(std::move(copy));
      id_.Put(c, (int)instrs_.size());
      instrs_.push_back(c);
      sharding_.push_back(std::nullopt);
      original_.push_back(std::nullopt);
      rules_.emplace_back();
      if (Has(root)) {
        SetContext("entry result", {root}, -1);
        Set(c, Get(root));
      }
      entry->set_root(c);
      structure_changed_ = true;
      root_copy_added_ = true;
      root = c;
    }
    provided_.insert(root);
  }
  if (!allow_params_) {
    for (int i = 0; i < entry->parameter_count(); ++i) {
      Instruction* p = entry->parameter(i);
      if (Has(p) && !IsUnknownSharding(Get(p))) provided_.insert(p);
    }
  }
  for (Instruction* instr : instrs_) {
    if (removed_.count(instr) || !Has(instr)) continue;
    const Sharding& s = Get(instr);
    if (s.IsTuple()) {
      bool any = false;
      Sharding t = s;
      for (auto& e : t.mutable_tuple_elements())
        if (e.IsUnknown()) e = Sharding::Replicate(), any = true;
      if (any) sharding_[Id(instr)] = t;
    } else if (s.IsUnknown()) {
      sharding_[Id(instr)] = Sharding::Replicate();
    }
  }
}

void Propagator::MaybeComputationPropagation(
    Instruction* instr, std::unordered_set<Instruction*>* changed) {
  auto propagate_to = [&](Instruction* search) {
    std::vector<Instruction*> related = RelatedInstructions(search);
    if (std::find(related.begin(), related.end(), instr) == related.end()) return;
    for (Instruction* r : related) {
      if (r == instr || provided_.count(r)) continue;
      if (Has(r) && Has(instr) && Get(r) == Get(instr)) continue;
      if (!Has(instr)) continue;
      SetContext("control flow: same as " + instr->name(), {instr}, ctx_aggr_);
      Set(r, Get(instr));
      changed->insert(r);
      MaybeComputationPropagation(r, changed);
    }
  };
  const Opcode op = instr->opcode();
  if (op == Opcode::kConditional || op == Opcode::kWhile || op == Opcode::kCall)
    propagate_to(instr);
  if (op == Opcode::kParameter || instr->parent()->root() == instr) {
    Instruction* caller = Caller(instr->parent());
    if (caller != nullptr) {
      propagate_to(caller);
      if (op == Opcode::kParameter && (caller->opcode() == Opcode::kConditional ||
                                       caller->opcode() == Opcode::kCall))
        propagate_to(instr);
    }
  }
}

bool Propagator::RunToFixPoint(int aggr) {
  bool changed = false;
  // Per-instruction "already inferred" caches, indexed by id.
  struct Cache {
    const Propagator* p;
    std::vector<char> bits;
    bool count(const Instruction* i) const { return bits[p->Id(i)]; }
    void insert(const Instruction* i) { bits[p->Id(i)] = 1; }
    void erase(const Instruction* i) { bits[p->Id(i)] = 0; }
  };
  Cache from_group{this, std::vector<char>(instrs_.size(), 0)};
  Cache from_operands = from_group, from_users = from_group;
  const bool may_merge_partial = options_.is_spmd && aggr > 0;
  auto group_of = [&](const Instruction* i) -> const std::vector<Instruction*>* {
    auto it = shard_group_of_.find(i);
    if (it == shard_group_of_.end()) return nullptr;
    // By id, the shard_as group first (as XLA does): a shard_like member
    // whose id also names a shard_as group reads that group.
    auto a = shard_as_groups_.find(it->second);
    if (a != shard_as_groups_.end()) return &a->second;
    auto l = shard_like_groups_.find(it->second);
    if (l != shard_like_groups_.end()) return &l->second;
    return nullptr;
  };
  auto clear_cache = [&](Instruction* hlo, Instruction* hlo_for_users) {
    for (Instruction* op : hlo->operands()) from_users.erase(op);
    if (hlo_for_users == nullptr) hlo_for_users = hlo;
    for (Instruction* u : hlo_for_users->users()) {
      from_operands.erase(u);
      for (Computation* c : u->called_computations())
        for (Instruction* p : c->parameters()) from_operands.erase(p);
    }
    if (const auto* g = group_of(hlo))
      for (Instruction* m : *g)
        if (m != hlo) from_group.erase(m);
  };
  auto after_change = [&](Instruction* instr) {
    std::unordered_set<Instruction*> comp_changed;
    MaybeComputationPropagation(instr, &comp_changed);
    clear_cache(instr, nullptr);
    for (Instruction* h : comp_changed) clear_cache(h, nullptr);
  };
  if (orders_.empty()) {
    for (Computation* c : computations_) {
      std::vector<Instruction*> order = PostOrder(c);
      order.erase(std::remove_if(order.begin(), order.end(),
                                 [&](Instruction* i) { return removed_.count(i) > 0; }),
                  order.end());
      orders_.push_back(std::move(order));
    }
  }
  const auto& orders = orders_;
  bool changed_last_iter = true;
  int iterations = 0;
  while (changed_last_iter) {
    changed_last_iter = false;
    if (++iterations > 10000) break;  // cannot happen; guards a rule bug
    for (const auto& instructions : orders) {
      // 1. Shard groups.
      for (Instruction* instr : instructions) {
        if (from_group.count(instr)) continue;
        const auto* group = group_of(instr);
        if (group == nullptr) continue;
        if (provided_.count(instr)) {
          if (!may_merge_partial) continue;
          if (unspecified_dims_.count(instr) &&
              InferUnspecifiedDimsFromShardGroup(instr, *group)) {
            clear_cache(instr, nullptr);
            from_group.insert(instr);
            changed_last_iter = true;
          }
          continue;
        }
        from_group.insert(instr);
        if (InferFromShardGroup(instr, aggr, *group)) {
          changed = true;
          after_change(instr);
          changed_last_iter = true;
        }
      }
      // 2. Forward, in post order.
      for (Instruction* instr : instructions) {
        if (from_operands.count(instr)) continue;
        if (provided_.count(instr)) {
          if (!may_merge_partial) continue;
          Instruction* conv_after = nullptr;
          if (unspecified_dims_.count(instr) &&
              InferUnspecifiedDimsFromOperand(instr, &conv_after)) {
            clear_cache(instr, conv_after);
            from_operands.insert(instr);
            changed_last_iter = true;
          }
          continue;
        }
        from_operands.insert(instr);
        if (InferFromOperands(instr, aggr)) {
          changed = true;
          after_change(instr);
          changed_last_iter = true;
        }
      }
      // 3. Backward, in reverse post order.
      for (auto it = instructions.rbegin(); it != instructions.rend(); ++it) {
        Instruction* instr = *it;
        if (IsCustomCallTarget(instr, "SPMDFullToShardShape") ||
            IsCustomCallTarget(instr, "SPMDShardToFullShape")) {
          if (!from_users.count(instr)) from_users.erase(instr->operand(0));
        }
        if (from_users.count(instr)) continue;
        if (provided_.count(instr)) {
          if (!may_merge_partial) continue;
          Instruction* conv_after = nullptr;
          if (unspecified_dims_.count(instr) &&
              InferUnspecifiedDimsFromUsers(instr, aggr, &conv_after)) {
            clear_cache(instr, conv_after);
            from_users.insert(instr);
            if (conv_after != nullptr) from_users.insert(conv_after);
            changed_last_iter = true;
          }
          continue;
        }
        from_users.insert(instr);
        if (InferFromUsers(instr, aggr)) {
          changed = true;
          after_change(instr);
          changed_last_iter = true;
        }
      }
    }
  }
  return changed;
}

void Propagator::AlignShardAsGroups() {
  for (auto& [id, group] : shard_as_groups_) {
    Sharding def = Sharding::Replicate();
    std::vector<Sharding> shardings;
    for (Instruction* m : group) {
      if (!Has(m)) continue;
      shardings.push_back(Get(m));
      if (!IsCustomCallTarget(m, "ShardBarrierFrom") && def.IsReplicated())
        def = Get(m);
    }
    Sharding common = shardings.empty() ? def : FindCommonSharding(shardings, def);
    for (Instruction* m : group) {
      if (IsCustomCallTarget(m, "ShardBarrierTo")) continue;
      SetContext("shard_as group " + std::to_string(id), {}, 3);
      if (provided_.count(m) && unspecified_dims_.count(m)) {
        Sharding partial =
            PartiallyReplicateOnAllDimsExcept(common, unspecified_dims_[m]);
        Sharding s = Get(m);
        if (MergeShardingIfCompatible(partial, &s)) Set(m, s);
      }
      if (!Has(m) || Get(m) != common) Set(m, common);
    }
  }
}

void Propagator::RelayBarrierFrom() {
  for (Instruction* instr : instrs_) {
    if (removed_.count(instr) || !IsCustomCallTarget(instr, "ShardBarrierFrom"))
      continue;
    auto g = shard_group_of_.find(instr);
    if (g == shard_group_of_.end() || !shard_as_groups_.count(g->second)) continue;
    if (!Has(instr)) continue;
    Sharding s = Get(instr);
    Instruction* op = instr->operand(0);
    if (Has(op)) MergeShardingIfCompatible(Get(op), s.NumTiles(), &s);
    SetContext("shard barrier relay", {instr}, 3);
    Set(op, s);
  }
}

Status Propagator::RemoveBarriers() {
  RelayBarrierFrom();
  for (Instruction* instr : std::vector<Instruction*>(instrs_)) {
    if (removed_.count(instr)) continue;
    if (IsCustomCallTarget(instr, "ShardBarrierFrom") ||
        IsCustomCallTarget(instr, "ShardBarrierTo")) {
      const int id = Id(instr);
      if (baseline_.size() > static_cast<size_t>(id) &&
          sharding_[id] != baseline_[id])
        barrier_changed_ = true;
      RemoveInstruction(instr, instr->operand(0));
    }
  }
  return Status::Ok();
}

void Propagator::PostProcessCsePrevention() {
  if (!options_.cse_prevention_only) return;
  for (Instruction* instr : instrs_) {
    if (removed_.count(instr) || !Has(instr)) continue;
    const int id = Id(instr);
    const bool target = instr->opcode() == Opcode::kBroadcast &&
                        instr->operand(0)->shape().IsArray() &&
                        instr->operand(0)->shape().rank() == 0;
    if (target) {
      if (!original_[id]) SetCsePrevention(&*sharding_[id], true);
      continue;
    }
    sharding_[id] = original_[id];
  }
}

void Propagator::RestoreAndCheckEntryShardings() {
  Computation* entry = module_.entry();
  Instruction* root = entry->root();
  const auto& out = options_.allow_spmd_sharding_propagation_to_output;
  const auto& par = options_.allow_spmd_sharding_propagation_to_parameters;
  SetContext("entry signature policy", {}, -1);
  if (saved_root_shardings_.size() == out.size() && Has(root) &&
      Get(root).IsTuple()) {
    Sharding s = Get(root);
    for (size_t i = 0; i < saved_root_shardings_.size() &&
                       i < s.tuple_elements().size(); ++i)
      if (!out[i] && !saved_root_shardings_[i].IsUnknown())
        s.mutable_tuple_elements()[i] = saved_root_shardings_[i];
    if (s != Get(root)) Set(root, s);
  }
  const int np = entry->parameter_count();
  if (allow_params_) {
    if ((int)par.size() == np) {
      for (int i = 0; i < np; ++i) {
        if (par[i]) continue;
        Instruction* p = entry->parameter(i);
        auto it = saved_param_shardings_.find(i);
        if (it != saved_param_shardings_.end() && !IsUnknownSharding(it->second)) {
          Set(p, it->second);
        } else {
          Clear(p);
        }
      }
    } else if (np == 1 && saved_param_shardings_.size() == 1 &&
               entry->parameter(0)->shape().IsTuple() &&
               entry->parameter(0)->shape().tuple_size() == (int)par.size() &&
               Has(entry->parameter(0))) {
      Instruction* p = entry->parameter(0);
      Sharding s = Get(p);
      for (int i = 0; i < (int)par.size(); ++i) {
        Sharding saved =
            GetSubSharding(saved_param_shardings_.at(0), p->shape(), i);
        if (!par[i] && !IsUnknownSharding(saved) && !saved.IsTuple() && s.IsTuple())
          s.mutable_tuple_elements()[i] = saved;
      }
      Set(p, s);
    }
  }
  if (allow_output_ && Has(root)) {
    if (root->shape().IsTuple() && (int)out.size() == root->shape().tuple_size()) {
      Sharding s = Get(root);
      bool changed = false;
      for (int i = 0; i < root->shape().tuple_size(); ++i) {
        if (!out[i]) continue;
        Sharding e = GetSubSharding(s, root->shape(), i);
        if (!EvenlyPartitions(root->shape().tuple_shapes(i), e) && !e.IsTuple()) {
          s.mutable_tuple_elements()[i] = Sharding::Replicate();
          changed = true;
        }
      }
      if (changed) Set(root, s);
    } else if (!root->shape().IsTuple()) {
      if (!EvenlyPartitions(root->shape(), Get(root)))
        Set(root, Sharding::Replicate());
    }
  }
  if (allow_params_) {
    if ((int)par.size() == np) {
      for (int i = 0; i < np; ++i) {
        Instruction* p = entry->parameter(i);
        if (Has(p) && par[i] && !EvenlyPartitions(p->shape(), Get(p)))
          Set(p, Sharding::Replicate());
      }
    } else if (np == 1 && entry->parameter(0)->shape().IsTuple() &&
               Has(entry->parameter(0)) &&
               entry->parameter(0)->shape().tuple_size() == (int)par.size()) {
      Instruction* p = entry->parameter(0);
      Sharding s = Get(p);
      bool changed = false;
      for (int i = 0; i < (int)par.size(); ++i) {
        Sharding e = GetSubSharding(s, p->shape(), i);
        if (par[i] && !e.IsTuple() &&
            !EvenlyPartitions(p->shape().tuple_shapes(i), e)) {
          s.mutable_tuple_elements()[i] = Sharding::Replicate();
          changed = true;
        }
      }
      if (changed) Set(p, s);
    }
  }
}

Status Propagator::WriteBack() {
  for (Instruction* instr : instrs_) {
    if (removed_.count(instr) || opaque_.count(instr)) continue;
    const int id = Id(instr);
    const auto& now = sharding_[id];
    const auto& before = original_[id];
    if (!now) {
      if (instr->has_sharding()) instr->clear_sharding();
      continue;
    }
    if (before && *before == *now && !HasCsePrevention(*now)) continue;
    instr->set_sharding(*now);
  }
  return Status::Ok();
}

StatusOr<bool> Propagator::Run() {
  if (module_.entry() == nullptr) return Status::Error("module has no entry");
  MS_RETURN_IF_ERROR(Init());
  SetContext("annotation", {}, -1);
  if (report_ != nullptr) {
    for (Instruction* instr : instrs_)
      if (Has(instr)) {
        ShardingProvenance p;
        p.how = "annotation (input)";
        p.rule = "user";
        p.sharding = ProvenanceText(Get(instr));
        report_->history[instr->name()].push_back(p);
      }
  }
  if (!options_.cse_prevention_only) {
    for (Instruction* instr : instrs_)
      if (Has(instr) && HasCsePrevention(Get(instr))) {
        Clear(instr);
        cse_dropped_ = true;
      }
  }
  MS_RETURN_IF_ERROR(ProcessShardingInstructions());
  MS_RETURN_IF_ERROR(CheckWhileDeviceAssignments());
  BuildComputationMap();
  CollectProvided();
  baseline_ = sharding_;
  for (Instruction* instr : instrs_) {
    if (removed_.count(instr)) continue;
    const OpShardingRule& r = Rule(instr);
    if (r.kind == RuleKind::kNoRule) {
      std::string key = std::string(OpcodeName(instr->opcode()));
      if (warned_.insert(key).second && report_ != nullptr)
        report_->warnings.push_back("no sharding rule for '" + instr->name() +
                                    "' (" + key + ": " + r.name +
                                    "); it gets no inferred tiling (replicated)");
      if (options_.strict)
        return Status::Error("no sharding rule for " + key + " ('" +
                                 instr->name() + "'): " + r.name,
                             instr->loc());
    }
  }
  for (int aggr = 0; aggr < 4; ++aggr) RunToFixPoint(aggr);
  AlignShardAsGroups();
  RelayBarrierFrom();
  RunToFixPoint(3);
  MS_RETURN_IF_ERROR(RemoveBarriers());
  PostProcessCsePrevention();
  RestoreAndCheckEntryShardings();
  // "Changed" as XLA reports it: what propagation did after the set-up
  // (see baseline_), plus the structural events XLA counts (Sharding
  // custom-calls turned into copies, a copy above a while root, dropped
  // CSE-prevention shardings). Sharing shardings between control-flow
  // relatives, reading unknown as replicated and removing barriers or
  // shard-group-only annotations are not changes there.
  bool changed = root_copy_added_ || cse_dropped_ || barrier_changed_ ||
                 !as_copy_.empty();  // XLA replaces those with copies
  for (Instruction* instr : instrs_) {
    if (removed_.count(instr)) continue;
    const int id = Id(instr);
    if (id < static_cast<int>(baseline_.size()) && sharding_[id] != baseline_[id])
      changed = true;
  }
  MS_RETURN_IF_ERROR(WriteBack());
  for (const Instruction* instr : removed_)
    instr->parent()->RemoveInstruction(const_cast<Instruction*>(instr));
  removed_.clear();
  if (report_ != nullptr) report_->changed = changed;
  return changed;
}

}  // namespace propagation
}  // namespace meshsplit
