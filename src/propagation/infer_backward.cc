// Backward inference: a sharding for an instruction from its users (XLA's
// InferShardingFromUsers / GetShardingFromUser), plus the refinement of
// partially specified Sharding custom-calls (unspecified_dims) and their
// manual/auto conversion ops.
#include <algorithm>
#include <functional>

#include "ir/computation.h"
#include "propagation/propagator.h"
#include "rules/dot_dims.h"

namespace meshsplit::propagation {

namespace {

bool CompatibleIgnoringType(const Shape& a, const Shape& b) {
  if (a.IsTuple() != b.IsTuple()) return false;
  if (a.IsTuple()) {
    if (a.tuple_size() != b.tuple_size()) return false;
    for (int i = 0; i < a.tuple_size(); ++i)
      if (!CompatibleIgnoringType(a.tuple_shapes(i), b.tuple_shapes(i)))
        return false;
    return true;
  }
  if (a.IsToken() || b.IsToken()) return a.IsToken() && b.IsToken();
  return a.dimensions() == b.dimensions();
}

int OperandIndex(const Instruction* user, const Instruction* op) {
  for (int i = 0; i < user->operand_count(); ++i)
    if (user->operand(i) == op) return i;
  return -1;
}

}  // namespace

Sharding Propagator::InferDotOperandSharding(const Instruction* dot, int k,
                                              bool may_combine) {
  const DotDims dims = GetDotDims(Rule(dot), dot);
  Sharding s = Sharding::Replicate();
  if (Has(dot)) s = ProjectSharding(Get(dot), dims.OperandToOutput(k));
  const Instruction* other = dot->operand(1 - k);
  if (Has(other) && IsSpatiallyPartitioned(Get(other))) {
    Sharding from_other = ProjectSharding(Get(other), dims.OperandToOther(k));
    if (MergeSharding(s, &from_other, may_combine)) s = from_other;
  }
  return s;
}

std::optional<Sharding> Propagator::GetShardingFromUser(const Instruction* instr,
                                                         const Instruction* user,
                                                         int aggr) {
  if (!CanPropagateThrough(user, aggr)) return std::nullopt;
  if (!IsSpatiallyPartitionedInstr(user)) return std::nullopt;
  const bool may_combine = options_.is_spmd && aggr > 0;
  const Sharding& us = Get(user);
  const OpShardingRule& rule = Rule(user);
  if (as_copy_.count(user)) {
    if (CompatibleIgnoringType(instr->shape(), user->shape())) return us;
    return std::nullopt;
  }
  switch (user->opcode()) {
    case Opcode::kBroadcast: {
      if (us.IsReplicated() || us.IsManual() || !us.IsTiled()) return us;
      bool needs_replication = false;
      const auto& dims = user->attrs().dimensions;
      for (int64_t d = 0; d < user->shape().rank(); ++d)
        if (std::find(dims.begin(), dims.end(), d) == dims.end() &&
            TileDimOr1(us, d) > 1)
          needs_replication = true;
      if (!options_.is_spmd && needs_replication) return std::nullopt;
      return ProjectSharding(
          us, FactorDimMapping(rule, 0, -1, instr->shape().rank()));
    }
    case Opcode::kConcatenate: {
      if (aggr == 0) return std::nullopt;
      if (us.IsReplicated()) return us;
      const int64_t cdim = user->attrs().dimensions.empty() ? 0 : user->attrs().dimensions[0];
      if (TileDimOr1(us, cdim) == 1 || options_.is_spmd || !us.IsTiled()) return us;
      int64_t start = 0;
      for (const Instruction* op : user->operands()) {
        if (op == instr) break;
        start += op->shape().dimensions(cdim);
      }
      const TileAssignment& t = us.tile_assignment();
      const int64_t tile =
          (user->shape().dimensions(cdim) + t.dim(cdim) - 1) / t.dim(cdim);
      std::vector<int64_t> starts(t.num_dimensions(), 0), limits = t.dims();
      starts[cdim] = start / tile;
      limits[cdim] = (start + instr->shape().dimensions(cdim) + tile - 1) / tile;
      // The devices of the tiles this operand covers (non-SPMD only): one
      // lookup per covered tile.
      std::vector<int64_t> sliced_dims(starts.size()), devices;
      for (size_t i = 0; i < starts.size(); ++i) sliced_dims[i] = limits[i] - starts[i];
      std::vector<int64_t> idx = starts;
      int64_t count = 1;
      for (int64_t d : sliced_dims) count *= d;
      for (int64_t k = 0; k < count; ++k) {
        devices.push_back(t.DeviceAt(idx));
        for (int64_t i = static_cast<int64_t>(idx.size()) - 1; i >= 0; --i) {
          if (++idx[i] < limits[i]) break;
          idx[i] = starts[i];
        }
      }
      if (devices.size() == 1) return Sharding::Maximal(devices[0]);
      return Sharding::Tile(
          TileAssignment::FromDevices(std::move(sliced_dims), std::move(devices)));
    }
    case Opcode::kConvolution: {
      const DotDims dims = GetDotDims(rule, user);
      if (!dims.conv_spatial.empty()) return std::nullopt;
      return InferDotOperandSharding(user, OperandIndex(user, instr), may_combine);
    }
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice: {
      if (aggr == 0) return std::nullopt;
      if (us.IsReplicated()) return us;
      if (user->opcode() == Opcode::kDynamicUpdateSlice && instr == user->operand(0))
        return us;
      const Instruction* op = user->opcode() == Opcode::kDynamicSlice
                                  ? user->operand(0)
                                  : user->operand(1);
      if (instr != op) return std::nullopt;
      std::vector<int64_t> slice_dims;
      for (int64_t d = 0; d < user->shape().rank(); ++d)
        if (user->shape().dimensions(d) != op->shape().dimensions(d))
          slice_dims.push_back(d);
      return PartiallyReplicateOnDims(us, slice_dims);
    }
    case Opcode::kReduceWindow: {
      const int n = user->operand_count() / 2;
      int idx = -1;
      for (int k = 0; k < n; ++k)
        if (user->operand(k) == instr) idx = k;
      if (idx < 0) return std::nullopt;
      if (user->shape().IsTuple()) return GetSubSharding(us, user->shape(), idx);
      return us;
    }
    case Opcode::kReshape:
      return PropagateShardingThroughReshape(user->shape(), instr->shape(), us);
    case Opcode::kPad:
      if (instr != user->operand(0)) return std::nullopt;
      return us;
    case Opcode::kSlice:
      return us;
    case Opcode::kTranspose: {
      const auto& perm = user->attrs().dimensions;
      std::vector<int64_t> rev(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) rev[perm[i]] = i;
      return TransposeSharding(us, rev);
    }
    case Opcode::kTuple: {
      int first = OperandIndex(user, instr);
      Sharding sub = GetSubSharding(us, user->shape(), first);
      for (int i = first + 1; i < user->operand_count(); ++i) {
        if (user->operand(i) != instr) continue;
        Sharding alt = GetSubSharding(us, user->shape(), i);
        if (IsShardingMoreSpecific(alt, sub)) sub = alt;
      }
      return sub;
    }
    case Opcode::kGetTupleElement: {
      if (!instr->shape().IsTuple()) return std::nullopt;
      const int64_t index = user->attrs().tuple_index;
      int64_t start = 0;
      for (int64_t i = 0; i < index; ++i)
        start += LeafCount(instr->shape().tuple_shapes(i));
      Sharding base;
      auto leaves_like = [&](const Sharding& leaf_src) {
        std::vector<Sharding> leaves;
        std::function<void(const Shape&)> walk = [&](const Shape& s) {
          if (s.IsTuple()) {
            for (const Shape& e : s.tuple_shapes()) walk(e);
          } else {
            leaves.push_back(
                ReplicateAllDataDims(leaf_src, s.IsArray() ? s.rank() : 0));
          }
        };
        walk(instr->shape());
        return Sharding::Tuple(std::move(leaves));
      };
      if (user->shape().IsArray() || !us.IsTuple()) {
        base = Has(instr) ? Get(instr) : leaves_like(us);
        if (!base.IsTuple()) base = SingleTuple(instr->shape(), base);
        if (start < (int64_t)base.tuple_elements().size())
          base.mutable_tuple_elements()[start] = us;
        return base;
      }
      if (us.tuple_elements().empty()) return std::nullopt;
      base = Has(instr) ? Get(instr) : leaves_like(us.tuple_elements()[0]);
      if (!base.IsTuple()) base = SingleTuple(instr->shape(), base);
      for (size_t i = 0; i < us.tuple_elements().size(); ++i)
        if (start + i < base.tuple_elements().size())
          base.mutable_tuple_elements()[start + i] = us.tuple_elements()[i];
      return base;
    }
    case Opcode::kDot:
      return InferDotOperandSharding(user, OperandIndex(user, instr), may_combine);
    case Opcode::kReduce: {
      if (!instr->shape().IsArray() || instr->shape().rank() == 0)
        return std::nullopt;
      const int idx = OperandIndex(user, instr);
      Sharding s = user->shape().IsTuple() ? GetSubSharding(us, user->shape(), idx)
                                            : us;
      if (s.IsTiled()) {
        s = ProjectSharding(
            s, FactorDimMapping(rule, 0, -1, instr->shape().rank()));
      }
      const int n = user->operand_count() / 2;
      for (int k = 0; k < n; ++k) {
        const Instruction* op = user->operand(k);
        if (op != instr && Has(op)) MergeShardingIfCompatible(Get(op), &s);
      }
      return s;
    }
    case Opcode::kSort:
      if (us.IsTuple())
        return GetSubSharding(us, user->shape(), OperandIndex(user, instr));
      return us;
    case Opcode::kReverse:
      return ReverseSharding(us, user->attrs().dimensions);
    case Opcode::kOutfeed: {
      if (instr != user->operand(0)) return std::nullopt;
      if (us.IsTuple() && !us.tuple_elements().empty()) {
        std::vector<Shape> shapes;
        for (const Instruction* op : user->operands()) shapes.push_back(op->shape());
        return GetSubSharding(us, Shape::Tuple(shapes), 0);
      }
      return us;
    }
    case Opcode::kGather:
      return GatherOperandFromUser(instr, user);
    case Opcode::kScatter:
      return ScatterOperandFromUser(instr, user);
    case Opcode::kCustomCall:
      if (!CompatibleIgnoringType(instr->shape(), user->shape())) return std::nullopt;
      return us;
    default:
      if (CompatibleIgnoringType(instr->shape(), user->shape())) return us;
      return std::nullopt;
  }
}

bool Propagator::InferFromUsers(Instruction* instr, int aggr) {
  if (aggr < 2 && instr->opcode() == Opcode::kBroadcast) return false;
  if (Has(instr) && Get(instr).IsManual()) return false;
  if (!Has(instr) || Get(instr).IsTileMaximal()) {
    // Only a user whose sharding has a manual leaf can hand out a manual one.
    auto has_manual = [](const Sharding& s) {
      if (!s.IsTuple()) return s.kind() == Sharding::Kind::kManual;
      for (const Sharding& e : s.tuple_elements())
        if (e.kind() == Sharding::Kind::kManual) return true;
      return false;
    };
    for (const Instruction* user : instr->users()) {
      if (!Has(user) || !has_manual(Get(user)) ||
          IsCustomCallTarget(user, "SPMDFullToShardShape"))
        continue;
      SetContext("backward: manual from user", {user}, aggr);
      if (instr->shape().IsArray() && Get(user).IsManual()) {
        Set(instr, Sharding::Manual());
        return true;
      }
      auto s = GetShardingFromUser(instr, user, aggr);
      if (s && s->IsManual()) {
        Set(instr, *s);
        return true;
      }
    }
  }
  if (!SupportSpatialPartitioning(instr, false, allow_params_)) return false;
  bool improved = false;
  const bool may_combine = options_.is_spmd && aggr > 0;
  for (const Instruction* user : instr->users()) {
    SetContext("backward from user", {user}, aggr);
    if (user->opcode() == Opcode::kRngBitGenerator) {
      if (Has(instr) && Get(instr).IsReplicated()) return false;
      Set(instr, Sharding::Replicate());
      return true;
    }
    auto s = GetShardingFromUser(instr, user, aggr);
    if (s && IsCustomCallTarget(instr, "ShardBarrierTo"))
      s = Sharding::Replicate();  // barrier: nothing flows back through it
    if (s) improved |= MaybeImprove(instr, *s, may_combine);
  }
  return improved;
}

// --- partially specified annotations ---------------------------------------------

namespace {

// Manual/auto conversion op right after a partially specified annotation, if
// it has the same unspecified dims.
// XLA compares the conversion op's dims as written on the backward path (its
// sort there runs before the parse) and sorted on the forward path; `sorted`
// picks which.
Instruction* ConversionAfter(Propagator& p, Instruction* annotate,
                             const std::vector<int64_t>& unspec, bool* ok,
                             bool sorted = true) {
  *ok = true;
  if (annotate->users().size() != 1) return nullptr;
  Instruction* user = annotate->users()[0];
  if (!p.IsCustomCallTarget(user, "SPMDFullToShardShape") &&
      !p.IsCustomCallTarget(user, "SPMDShardToFullShape"))
    return nullptr;
  std::vector<int64_t> dims;
  if (const std::string* cfg = user->attrs().FindExtra("backend_config"))
    dims = UnspecifiedDimsAsWritten(*cfg);
  if (sorted) std::sort(dims.begin(), dims.end());
  if (dims != unspec) *ok = false;
  return user;
}

bool RefineFromAuto(const Sharding& to_merge, const std::vector<int64_t>& unspec,
                    Sharding* auto_s, Sharding* manual_s) {
  if (!manual_s->HasManualSubgroup() || auto_s->HasManualSubgroup() ||
      !manual_s->HasPartialReplication() || manual_s->subgroup_types().size() != 2)
    return false;
  Sharding partial = PartiallyReplicateOnAllDimsExcept(to_merge, unspec);
  if (!partial.IsTiled()) return false;
  if (!MergeShardingIfCompatible(partial, auto_s)) return false;
  // Merge into the manual sharding by reading its manual dim as a data dim.
  const int rank = partial.TiledDataRank();
  std::vector<int64_t> pdims = partial.tile_assignment().dims();
  pdims.insert(pdims.begin() + rank, 1);
  Sharding partial_for_manual =
      Sharding::PartialTile(partial.tile_assignment().Reshape(pdims));
  TileAssignment mt = manual_s->tile_assignment();
  if (manual_s->subgroup_types().back() != SubgroupType::kReplicated) {
    std::vector<int64_t> perm(mt.num_dimensions());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = i;
    std::swap(perm.back(), perm[rank]);
    mt = mt.Transpose(perm);
  }
  Sharding tmp = Sharding::PartialTile(mt);
  if (!MergeShardingIfCompatible(partial_for_manual, &tmp)) return false;
  std::vector<SubgroupType> types = {SubgroupType::kManual};
  if (tmp.HasPartialReplication()) types.push_back(SubgroupType::kReplicated);
  *manual_s = Sharding::Subgroup(tmp.tile_assignment(), types);
  return true;
}

bool RefineFromManual(const Sharding& to_merge, const std::vector<int64_t>& unspec,
                      Sharding* auto_s, Sharding* manual_s) {
  if (!to_merge.HasManualSubgroup() || !manual_s->HasManualSubgroup() ||
      !manual_s->HasPartialReplication() || auto_s->HasManualSubgroup() ||
      manual_s->subgroup_types().size() != 2)
    return false;
  Sharding partial = PartiallyReplicateOnAllDimsExcept(to_merge, unspec);
  if (!partial.IsTiled()) return false;
  if (!MergeShardingIfCompatible(partial, manual_s)) return false;
  std::vector<SubgroupType> types(partial.subgroup_types().size(),
                                  SubgroupType::kReplicated);
  Sharding for_auto = Sharding::Subgroup(partial.tile_assignment(), types);
  return MergeShardingIfCompatible(for_auto, auto_s);
}

}  // namespace

bool Propagator::InferUnspecifiedDimsFromOperand(Instruction* annotate,
                                                 Instruction** conversion_after) {
  *conversion_after = nullptr;
  const Instruction* op = annotate->operand(0);
  if (!IsSpatiallyPartitionedInstr(op) || !Get(op).IsTiled()) return false;
  const auto& unspec = unspecified_dims_[annotate];
  bool ok;
  Instruction* conv = ConversionAfter(*this, annotate, unspec, &ok);
  if (!ok) return false;
  *conversion_after = conv;
  SetContext("refine unspecified dims from operand", {op}, ctx_aggr_);
  if (conv == nullptr) {
    Sharding partial = PartiallyReplicateOnAllDimsExcept(Get(op), unspec);
    Sharding s = Get(annotate);
    if (!MergeShardingIfCompatible(partial, &s)) return false;
    Set(annotate, s);
    return true;
  }
  if (!Has(conv)) return false;
  if (IsCustomCallTarget(conv, "SPMDFullToShardShape")) {
    Sharding auto_s = Get(annotate), manual_s = Get(conv);
    if (!RefineFromAuto(Get(op), unspec, &auto_s, &manual_s)) return false;
    Set(annotate, auto_s);
    Set(conv, manual_s);
  } else {
    Sharding manual_s = Get(annotate), auto_s = Get(conv);
    if (!RefineFromManual(Get(op), unspec, &auto_s, &manual_s)) return false;
    Set(annotate, manual_s);
    Set(conv, auto_s);
  }
  return true;
}

bool Propagator::InferUnspecifiedDimsFromUsers(Instruction* annotate, int aggr,
                                               Instruction** conversion_after) {
  *conversion_after = nullptr;
  const auto& unspec = unspecified_dims_[annotate];
  bool ok;
  Instruction* conv =
      ConversionAfter(*this, annotate, unspec, &ok, /*sorted=*/false);
  if (!ok) return false;
  *conversion_after = conv;
  Instruction* op_for_users = conv == nullptr ? annotate : conv;
  bool changed = false;
  for (const Instruction* user : op_for_users->users()) {
    if (!Has(user) || !Get(user).IsTiled()) continue;
    auto us = GetShardingFromUser(op_for_users, user, aggr);
    if (!us || us->IsTileMaximal() || us->IsManual() || !us->IsTiled()) continue;
    SetContext("refine unspecified dims from user", {user}, aggr);
    if (conv == nullptr) {
      Sharding partial = PartiallyReplicateOnAllDimsExcept(*us, unspec);
      Sharding s = Get(annotate);
      if (!MergeShardingIfCompatible(partial, &s)) continue;
      Set(annotate, s);
      changed = true;
      continue;
    }
    if (!Has(conv)) continue;
    if (IsCustomCallTarget(conv, "SPMDFullToShardShape")) {
      Sharding auto_s = Get(annotate), manual_s = Get(conv);
      if (!RefineFromManual(*us, unspec, &auto_s, &manual_s)) continue;
      Set(annotate, auto_s);
      Set(conv, manual_s);
    } else {
      Sharding manual_s = Get(annotate), auto_s = Get(conv);
      if (!RefineFromAuto(*us, unspec, &auto_s, &manual_s)) continue;
      Set(annotate, manual_s);
      Set(conv, auto_s);
    }
    changed = true;
  }
  return changed;
}

bool Propagator::InferUnspecifiedDimsFromShardGroup(
    Instruction* annotate, const std::vector<Instruction*>& group) {
  if (IsCustomCallTarget(annotate, "ShardBarrierTo")) return false;
  bool changed = false;
  const auto& unspec = unspecified_dims_[annotate];
  for (const Instruction* m : group) {
    if (m == annotate || IsCustomCallTarget(m, "ShardBarrierFrom")) continue;
    if (!IsSpatiallyPartitionedInstr(m) || !Get(m).IsTiled()) continue;
    Sharding partial = PartiallyReplicateOnAllDimsExcept(Get(m), unspec);
    Sharding s = Get(annotate);
    if (!MergeShardingIfCompatible(partial, &s)) continue;
    SetContext("refine unspecified dims from shard group", {m}, ctx_aggr_);
    Set(annotate, s);
    changed = true;
  }
  return changed;
}

}  // namespace meshsplit::propagation
