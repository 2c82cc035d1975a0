// Forward inference: a sharding for an instruction from its operands (XLA's
// InferShardingFromOperands), reading dims through the op's factor rule.
#include <algorithm>
#include <climits>

#include "ir/computation.h"
#include "propagation/propagator.h"
#include "rules/dot_dims.h"

namespace meshsplit::propagation {

bool Propagator::IsElementwise(const Instruction* i) {
  return Rule(i).kind == RuleKind::kElementwise;
}

bool Propagator::CanPropagateThrough(const Instruction* i, int aggressiveness) {
  return aggressiveness >= Rule(i).min_aggressiveness;
}

bool Propagator::IsPassthroughCustomCall(const Instruction* i) const {
  if (i->opcode() != Opcode::kCustomCall) return false;
  const std::string& t = i->attrs().custom_call_target;
  if (t == "Sharding" || t == "X64Combine" || t == "LayoutConstraint")
    return i->operand_count() >= 1;  // passing through reads operand 0
  if (i->operand_count() != 1 || !i->shape().IsArray() ||
      !i->operand(0)->shape().IsArray() ||
      i->operand(0)->shape().rank() != i->shape().rank())
    return false;
  return t == "ResizeNearest" || t == "ResizeBilinear" ||
         t == "ResizeNearestGrad" || t == "ResizeBilinearGrad" ||
         t == "Cholesky" || t == "MoveToHost" || t == "MoveToDevice" ||
         t == "PinToDevice" || t == "PinToDeviceSram";
}

bool Propagator::HasSideEffect(const Instruction* i) const {
  // Like XLA's, an instruction also has the side effects of the computations
  // it calls (a call of a computation holding an rng, say).
  for (const Computation* c : i->called_computations()) {
    auto it = computation_side_effect_.find(c);
    if (it == computation_side_effect_.end()) {
      bool any = false;
      for (const auto& inner : c->instructions())
        if ((any = HasSideEffect(inner.get()))) break;
      it = computation_side_effect_.emplace(c, any).first;
    }
    if (it->second) return true;
  }
  switch (i->opcode()) {
    case Opcode::kRng:
    case Opcode::kInfeed:
    case Opcode::kOutfeed:
    case Opcode::kRngGetAndUpdateState:
      return true;
    case Opcode::kCustomCall: {
      const std::string* v = i->attrs().FindExtra("custom_call_has_side_effect");
      return v != nullptr && *v == "true";
    }
    // Collectives as XLA's HloInstruction::HasSideEffect sees them: a
    // constrained layout always counts; a channel id counts unless the
    // module is configured for SPMD partitioning, which the modules this
    // pass reads (like XLA's propagation tests) do not say.
    case Opcode::kAllGather:
    case Opcode::kAllToAll:
    case Opcode::kAllReduce:
    case Opcode::kReduceScatter:
      if (i->attrs().constrain_layout) return true;
      return i->attrs().channel_id.has_value();
    case Opcode::kCollectivePermute:
      return i->attrs().channel_id.has_value();
    // Transfers always have side effects in XLA; collective-broadcast and
    // ragged-all-to-all count like collective-permute.
    case Opcode::kSend:
    case Opcode::kSendDone:
    case Opcode::kRecv:
    case Opcode::kRecvDone:
      return true;
    case Opcode::kCollectiveBroadcast:
    case Opcode::kRaggedAllToAll:
      return i->attrs().channel_id.has_value();
    // XLA counts the async halves of collectives as side-effecting always.
    case Opcode::kAllReduceStart:
    case Opcode::kAllReduceDone:
    case Opcode::kAllGatherStart:
    case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteStart:
    case Opcode::kCollectivePermuteDone:
      return true;
    default:
      return false;
  }
}

int64_t Propagator::NonRootUsers(const Instruction* i) const {
  int64_t n = i->users().size();
  for (const Instruction* u : i->users())
    if (u == i->parent()->root()) --n;
  return n;
}

bool Propagator::SupportSpatialPartitioning(const Instruction* i,
                                            bool allow_output, bool allow_params) {
  const Computation* parent = i->parent();
  const bool is_entry_root = parent == module_.entry() && parent->root() == i;
  if (parent->root() == i && !InComputationMap(parent) &&
      !(is_entry_root && allow_output))
    return false;
  const OpShardingRule& rule = Rule(i);
  if (rule.kind == RuleKind::kElementwise &&
      (i->opcode() != Opcode::kRng || options_.is_spmd))
    return true;
  switch (rule.partitionable) {
    case Partitionable::kYes:
      return true;
    case Partitionable::kSpmdOnly:
      return options_.is_spmd;
    case Partitionable::kNo:
      return false;
    case Partitionable::kContext:
      break;
  }
  if (i->opcode() == Opcode::kParameter)
    return allow_params || InComputationMap(parent);
  if (i->opcode() == Opcode::kCustomCall) {
    if (!options_.is_spmd) return false;
    if (IsCustomCallTarget(i, "ShardBarrierFrom") ||
        IsCustomCallTarget(i, "ShardBarrierTo"))
      return true;
    return IsPassthroughCustomCall(i);
  }
  return false;
}

const Instruction* Propagator::PickRepresentativeOperand(const Instruction* i) {
  if (i->opcode() == Opcode::kCustomCall && !as_copy_.count(i))
    return IsPassthroughCustomCall(i) ? i->operand(0) : nullptr;
  switch (Rule(i).representative) {
    case Representative::kNone:
      return nullptr;
    case Representative::kFirstIfSharded:
      return i->operand_count() > 0 && Has(i->operand(0)) ? i->operand(0)
                                                          : nullptr;
    case Representative::kMostSpecific: {
      const Instruction* best = nullptr;
      for (const Instruction* op : i->operands())
        if (Has(op) && (best == nullptr ||
                        IsShardingMoreSpecific(Get(op), Get(best))))
          best = op;
      return best;
    }
  }
  return nullptr;
}

namespace {

bool IsConvolutionKernelSmall(const Instruction* conv) {
  const auto& cd = *conv->attrs().conv_dnums;
  const Instruction* rhs = conv->operand(1);
  int64_t kprod = 1, oprod = 1;
  for (size_t i = 0; i < cd.input_spatial_dimensions.size(); ++i) {
    int64_t k = rhs->shape().dimensions(cd.kernel_spatial_dimensions[i]);
    int64_t o = conv->shape().dimensions(cd.output_spatial_dimensions[i]);
    kprod *= k;
    oprod *= o;
    if (k >= o && (i < 2 || k > 3 || kprod >= oprod)) return false;
  }
  return true;
}

}  // namespace

std::optional<Sharding> Propagator::LookaheadUserSharding(Instruction* instr) {
  if (instr->users().size() != 1) return std::nullopt;
  std::vector<Instruction*> chain = {instr, instr->users()[0]};
  Instruction* cur = instr->users()[0];
  while (!Has(cur)) {
    if (cur->users().size() != 1) return std::nullopt;
    cur = cur->users()[0];
    chain.push_back(cur);
  }
  std::optional<Sharding> s;
  std::vector<Instruction*> set_temp;
  recording_ = false;
  for (int i = (int)chain.size() - 1; i >= 1; --i) {
    s = GetShardingFromUser(chain[i - 1], chain[i], INT_MAX);
    if (s && i != 1) {
      Set(chain[i - 1], *s);
      set_temp.push_back(chain[i - 1]);
      continue;
    }
    break;
  }
  for (Instruction* t : set_temp) Clear(t);
  recording_ = true;
  return s;
}

bool Propagator::InferDotFromOperands(Instruction* instr) {
  const DotDims dims = GetDotDims(Rule(instr), instr);
  const bool may_combine = ctx_aggr_ > 0 && options_.is_spmd;
  auto from_operand = [&](int k) {
    const Sharding& s = Get(instr->operand(k));
    if (s.IsTileMaximal()) return s;
    return ProjectSharding(s, dims.OutputToOperand(k));
  };
  std::optional<Sharding> improved[2];
  const Sharding* cur = Has(instr) ? &Get(instr) : nullptr;
  for (int k = 0; k < 2; ++k)
    if (IsSpatiallyPartitionedInstr(instr->operand(k)))
      improved[k] = ReturnImprovedSharding(from_operand(k), cur, instr->shape(),
                                           may_combine, false);
  if (!improved[0] && !improved[1]) return false;
  auto set_if_new = [&](const Sharding& s) {
    if (Has(instr) && Get(instr) == s) return false;
    Set(instr, s);
    return true;
  };
  if (!improved[1]) return set_if_new(*improved[0]);
  if (!improved[0]) return set_if_new(*improved[1]);
  Sharding prio[2] = {*improved[0], *improved[1]};
  bool decided = false;
  std::optional<Sharding> look = LookaheadUserSharding(instr);
  if (look) {
    bool sub0 = IsSubTilingOrEqualSharding(instr->shape(), *look, *improved[0]);
    bool sub1 = IsSubTilingOrEqualSharding(instr->shape(), *look, *improved[1]);
    if (sub0 && !sub1) decided = true;
    if (!sub0 && sub1) {
      std::swap(prio[0], prio[1]);
      decided = true;
    }
  }
  if (!decided && instr->operand(0)->shape().ByteSize() <
                      instr->operand(1)->shape().ByteSize())
    std::swap(prio[0], prio[1]);
  std::optional<Sharding> before;
  if (Has(instr)) before = Get(instr);
  Set(instr, prio[0]);
  MaybeImprove(instr, prio[1], may_combine);
  return !before || *before != Get(instr);
}

bool Propagator::InferConvolutionFromOperands(Instruction* instr) {
  const OpShardingRule& rule = Rule(instr);
  const DotDims dims = GetDotDims(rule, instr);
  const bool may_combine = ctx_aggr_ > 0 && options_.is_spmd;
  auto partitions = [&](const Instruction* op, int side) {
    int64_t p = 1;
    if (!Has(op) || !Get(op).IsTiled()) return p;
    for (const auto& d : dims.conv_spatial)
      p *= TileDimOr1(Get(op), side == 0 ? d.lhs : d.rhs);
    return p;
  };
  const int64_t bgc = instr->attrs().batch_group_count;
  const int64_t fgc = instr->attrs().feature_group_count;
  if (dims.conv_spatial.empty() ||
      (partitions(instr->operand(0), 0) == 1 &&
       partitions(instr->operand(1), 1) == 1 && bgc == 1 && fgc == 1))
    return InferDotFromOperands(instr);
  const Instruction* lhs = instr->operand(0);
  if (!IsSpatiallyPartitionedInstr(lhs)) return false;
  if (Get(lhs).IsTileMaximal())
    return MaybeImprove(instr, Get(lhs), may_combine);
  if (!Get(lhs).IsTiled()) return false;
  const auto& cd = *instr->attrs().conv_dnums;
  if (IsConvolutionKernelSmall(instr)) {
    if (TileDimOr1(Get(lhs), cd.input_feature_dimension) > 1) return false;
    std::vector<int64_t> out_to_lhs(instr->shape().rank());
    out_to_lhs[cd.output_batch_dimension] = cd.input_batch_dimension;
    out_to_lhs[cd.output_feature_dimension] = cd.input_feature_dimension;
    for (size_t i = 0; i < cd.input_spatial_dimensions.size(); ++i)
      out_to_lhs[cd.output_spatial_dimensions[i]] = cd.input_spatial_dimensions[i];
    return MaybeImprove(instr, TransposeSharding(Get(lhs), out_to_lhs),
                        may_combine);
  }
  return MaybeImprove(
      instr, PartiallyReplicateOnAllDimsExcept(Get(lhs), {cd.input_batch_dimension}),
      may_combine);
}

bool Propagator::InferFromShardGroup(Instruction* instr, int aggressiveness,
                                     const std::vector<Instruction*>& group) {
  if (!CanPropagateThrough(instr, aggressiveness)) return false;
  if (Has(instr) && Get(instr).IsManual()) return false;
  if (IsCustomCallTarget(instr, "ShardBarrierTo")) return false;
  if (!Has(instr) || Get(instr).IsTileMaximal()) {
    for (Instruction* m : group) {
      if (m == instr || !Has(m) || !Get(m).IsManual()) continue;
      SetContext("shard group (manual)", {m}, aggressiveness);
      Set(instr, Get(m));
      return true;
    }
  }
  const bool may_combine = options_.is_spmd && aggressiveness > 0;
  bool changed = false;
  for (Instruction* m : group) {
    if (m == instr || IsCustomCallTarget(m, "ShardBarrierFrom") || !Has(m))
      continue;
    SetContext("shard group", {m}, aggressiveness);
    changed |= MaybeImprove(instr, Get(m), may_combine);
  }
  return changed;
}

bool Propagator::InferFromOperands(Instruction* instr, int aggr) {
  if (!CanPropagateThrough(instr, aggr)) return false;
  if (Has(instr) && Get(instr).IsManual()) return false;
  std::vector<const Instruction*> sources;
  if (Recording())
    for (const Instruction* op : instr->operands())
      if (Has(op)) sources.push_back(op);
  SetContext("forward from operands", std::move(sources), aggr);
  const Opcode opc = instr->opcode();
  const OpShardingRule& rule = Rule(instr);
  const bool custom_tuple = opc == Opcode::kCustomCall && instr->shape().IsTuple();
  // As XLA does: an async op wrapping work of a thread this run leaves alone
  // takes the manual sharding whole (tuple-shaped for the start), since
  // nothing inside it will be propagated.
  const bool async_elsewhere = IsAsyncOnExcludedThread(instr);
  if ((!Has(instr) || Get(instr).IsTileMaximal()) &&
      (instr->shape().IsArray() || opc == Opcode::kReduce ||
       opc == Opcode::kSort || opc == Opcode::kReduceWindow || custom_tuple ||
       async_elsewhere)) {
    for (const Instruction* op : instr->operands()) {
      if (!Has(op) || !Get(op).IsManual()) continue;
      if (IsCustomCallTarget(instr, "SPMDShardToFullShape")) return false;
      if (aggr == 0 && (opc == Opcode::kConcatenate || opc == Opcode::kDynamicSlice))
        return false;
      SetContext("forward: manual from operand", {op}, aggr);
      Sharding m = SingleTuple(instr->shape(), Sharding::Manual());
      if (Has(instr) && Get(instr) == m) return false;
      Set(instr, m);
      return true;
    }
  }
  const bool may_combine = options_.is_spmd && aggr > 0;
  const bool one_user = NonRootUsers(instr) == 1;
  if (!SupportSpatialPartitioning(instr, allow_output_, false)) {
    if (instr->shape().IsTuple() || instr->operand_count() == 0 ||
        instr == instr->parent()->root() || HasSideEffect(instr))
      return false;
    for (const Instruction* op : instr->operands()) {
      if (Has(op) && Get(op).IsTileMaximal() && !Get(op).IsMaximal()) {
        SetContext("forward: replicated operand of an op without spatial "
                   "partitioning",
                   {op}, aggr);
        return MaybeImprove(instr, Get(op), may_combine);
      }
    }
    return false;
  }
  auto maybe_tuple = [&](const Sharding& s) {
    return SingleTuple(instr->shape(), s);
  };
  switch (opc) {
    case Opcode::kGetTupleElement: {
      const Instruction* op = instr->operand(0);
      if (!IsSpatiallyPartitionedInstr(op)) return false;
      Sharding s = GetSubSharding(Get(op), op->shape(), instr->attrs().tuple_index);
      if (s.IsManual()) {
        if (Has(instr) && Get(instr) == s) return false;
        Set(instr, s);
        return true;
      }
      return MaybeImprove(instr, s, may_combine, one_user);
    }
    case Opcode::kTuple: {
      bool any = false;
      for (const Instruction* op : instr->operands())
        any |= IsSpatiallyPartitionedInstr(op);
      if (!any) return false;
      const bool had = Has(instr);
      std::vector<Sharding> subs =
          had ? Get(instr).tuple_elements()
              : std::vector<Sharding>(LeafCount(instr->shape()),
                                       Sharding::Replicate());
      size_t idx = 0;
      for (const Instruction* op : instr->operands()) {
        const int64_t n = LeafCount(op->shape());
        if (Has(op)) {
          // An outfeed's sharding covers its operands and then its token;
          // the value it produces is the token, the last element (XLA's
          // GetOutputSharding).
          Sharding os = op->opcode() == Opcode::kOutfeed && Get(op).IsTuple() &&
                                !Get(op).tuple_elements().empty()
                            ? Get(op).tuple_elements().back()
                            : NormalizeToShape(Get(op), op->shape());
          for (int64_t j = 0; j < n && idx + j < subs.size(); ++j) {
            const Sharding& leaf = os.IsTuple()
                                        ? (j < (int64_t)os.tuple_elements().size()
                                               ? os.tuple_elements()[j]
                                               : subs[idx + j])
                                        : os;
            if (!had || IsShardingMoreSpecific(leaf, subs[idx + j]))
              subs[idx + j] = leaf;
          }
        }
        idx += n;
      }
      Sharding s = Sharding::Tuple(std::move(subs));
      if (had && Get(instr) == s) return false;
      Set(instr, s);
      return true;
    }
    case Opcode::kReduce: {
      bool changed = false;
      const int n = instr->operand_count() / 2;
      for (int k = 0; k < n; ++k) {
        const Instruction* op = instr->operand(k);
        if (!IsSpatiallyPartitionedInstr(op)) continue;
        const Sharding& os = Get(op);
        if (os.IsManual()) {
          changed |= MaybeImproveSub(instr, os, k, may_combine, one_user);
          continue;
        }
        bool reduces_tiled = false;
        for (int64_t d : instr->attrs().dimensions)
          reduces_tiled |= TileDimOr1(os, d) > 1;
        if (os.IsReplicated() || (!options_.is_spmd && reduces_tiled)) {
          changed |= MaybeImprove(instr, maybe_tuple(ReplicateAllDataDims(os)),
                                  may_combine, one_user);
          continue;
        }
        Sharding projected = ProjectSharding(
            os, FactorDimMapping(
                    rule, -1, k,
                    op->shape().rank() - instr->attrs().dimensions.size()));
        changed |= MaybeImprove(instr, maybe_tuple(projected), may_combine, one_user);
      }
      return changed;
    }
    case Opcode::kBroadcast: {
      if (aggr < 3) return false;
      const Instruction* op = instr->operand(0);
      if (!IsSpatiallyPartitionedInstr(op) || Get(op).IsReplicated()) return false;
      Sharding s = ProjectSharding(
          Get(op), FactorDimMapping(rule, -1, 0, instr->shape().rank()));
      return MaybeImprove(instr, s, may_combine, one_user);
    }
    case Opcode::kConcatenate: {
      const Instruction* op = PickRepresentativeOperand(instr);
      if (op == nullptr || !IsSpatiallyPartitionedInstr(op)) return false;
      if (aggr == 0) {
        for (const Instruction* c : instr->operands()) {
          const bool ok = IsSpatiallyPartitionedInstr(c) && Get(c).NumTiles() > 1 &&
                          c->opcode() == Opcode::kReshape &&
                          (c->operand(0)->opcode() == Opcode::kParameter ||
                           c->operand(0)->opcode() == Opcode::kGetTupleElement);
          if (!ok) return false;
          for (int64_t d : instr->attrs().dimensions)
            if (TileDimOr1(Get(c), d) > 1) return false;
        }
      }
      return MaybeImprove(instr, Get(op), may_combine, one_user);
    }
    case Opcode::kConvolution:
      return InferConvolutionFromOperands(instr);
    case Opcode::kTranspose: {
      const Instruction* op = instr->operand(0);
      if (!IsSpatiallyPartitionedInstr(op)) return false;
      return MaybeImprove(instr,
                          TransposeSharding(Get(op), instr->attrs().dimensions),
                          may_combine, one_user);
    }
    case Opcode::kReduceWindow: {
      if (instr->attrs().window)
        for (const auto& w : *instr->attrs().window)
          if (w.base_dilation > 1 || w.window_dilation > 1) return false;
      bool changed = false;
      const int n = instr->operand_count() / 2;
      for (int k = 0; k < n; ++k) {
        const Instruction* op = instr->operand(k);
        if (!IsSpatiallyPartitionedInstr(op)) continue;
        changed |= MaybeImprove(instr, maybe_tuple(Get(op)), may_combine, one_user);
      }
      return changed;
    }
    case Opcode::kSelectAndScatter: {
      const Instruction* op = instr->operand(0);
      if (!IsSpatiallyPartitionedInstr(op)) return false;
      if (instr->attrs().window)
        for (const auto& w : *instr->attrs().window)
          if (w.base_dilation > 1) return false;
      return MaybeImprove(instr, Get(op), may_combine, one_user);
    }
    case Opcode::kReshape: {
      const Instruction* op = instr->operand(0);
      if (!IsSpatiallyPartitionedInstr(op)) return false;
      return MaybeImprove(
          instr, PropagateShardingThroughReshape(op->shape(), instr->shape(), Get(op)),
          may_combine, one_user);
    }
    case Opcode::kReverse: {
      const Instruction* op = instr->operand(0);
      if (!IsSpatiallyPartitionedInstr(op)) return false;
      return MaybeImprove(instr, ReverseSharding(Get(op), instr->attrs().dimensions),
                          may_combine, one_user);
    }
    case Opcode::kDot:
      return InferDotFromOperands(instr);
    case Opcode::kParameter: {
      Instruction* caller = Caller(instr->parent());
      if (caller == nullptr) return false;
      if (caller->opcode() == Opcode::kConditional) {
        const auto& cs = caller->called_computations();
        for (size_t i = 0; i < cs.size(); ++i) {
          if (cs[i] != instr->parent()) continue;
          const Instruction* op = caller->operand(i + 1);
          if (!Has(op)) return false;
          SetContext("forward from conditional operand", {op}, aggr);
          return MaybeImprove(instr, Get(op), may_combine);
        }
        return false;
      }
      if (caller->opcode() == Opcode::kCall) {
        const Instruction* op = caller->operand(instr->attrs().parameter_number);
        if (!Has(op)) return false;
        SetContext("forward from call operand", {op}, aggr);
        return MaybeImprove(instr, Get(op), may_combine);
      }
      return false;
    }
    case Opcode::kSort: {
      const Instruction* op = PickRepresentativeOperand(instr);
      if (op == nullptr || !IsSpatiallyPartitionedInstr(op)) return false;
      const int64_t sort_dim =
          instr->attrs().dimensions.empty() ? 0 : instr->attrs().dimensions[0];
      const Sharding& os = Get(op);
      if (os.IsTiled() && TileDimOr1(os, sort_dim) != 1 &&
          !GetFirstTargetDimToMoveShardingTiles(op->shape(), os, sort_dim))
        return false;
      return MaybeImprove(instr, maybe_tuple(os), may_combine, one_user);
    }
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice: {
      bool changed = false;
      const int sliced = opc == Opcode::kDynamicSlice ? 0 : 1;
      const Instruction* op = instr->operand(sliced);
      if (IsSpatiallyPartitionedInstr(op)) {
        Sharding s = Get(op);
        if (s.IsTiled()) {
          std::vector<int64_t> slice_dims;
          for (int64_t d = 0; d < instr->shape().rank(); ++d)
            if (instr->shape().dimensions(d) != op->shape().dimensions(d))
              slice_dims.push_back(d);
          s = PartiallyReplicateOnDims(s, slice_dims);
        }
        changed |= MaybeImprove(instr, s, may_combine, one_user);
      }
      if (opc == Opcode::kDynamicUpdateSlice &&
          IsSpatiallyPartitionedInstr(instr->operand(0)))
        changed |= MaybeImprove(instr, Get(instr->operand(0)), may_combine);
      return changed;
    }
    case Opcode::kGather:
      return InferGatherFromOperands(instr, may_combine);
    case Opcode::kScatter:
      return InferScatterFromOperands(instr, may_combine);
    case Opcode::kWhile: {
      const Instruction* op = instr->operand(0);
      if (!Has(op)) return false;
      Sharding s = Get(op);
      if (Has(instr)) MergeSharding(Get(instr), &s, may_combine);
      return MaybeImprove(instr, s, may_combine);
    }
    case Opcode::kCustomCall: {
      if (!as_copy_.count(instr)) {
        if (IsCustomCallTarget(instr, "ShardBarrierFrom")) return false;
        if (IsCustomCallTarget(instr, "ShardBarrierTo")) {
          if (!Has(instr->operand(0))) return false;
          return MaybeImprove(instr, Get(instr->operand(0)), may_combine, one_user);
        }
        const Instruction* op = PickRepresentativeOperand(instr);
        if (op == nullptr || !IsSpatiallyPartitionedInstr(op)) return false;
        return MaybeImprove(instr, Get(op), may_combine, one_user);
      }
      break;  // a Sharding annotation read as a copy: elementwise below
    }
    default:
      break;
  }
  if (IsElementwise(instr) && may_combine) {
    bool changed = false;
    for (const Instruction* op : instr->operands()) {
      if (!IsSpatiallyPartitionedInstr(op)) continue;
      if (opc == Opcode::kRng) {
        changed |= MaybeImprove(
            instr, ReplicateAllDataDims(Get(op), instr->shape().rank()),
            may_combine, one_user);
        continue;
      }
      // Skip scalar operands of clamp/select-like ops.
      if (op->shape().IsTuple() != instr->shape().IsTuple() ||
          (instr->shape().IsArray() && op->shape().IsArray() &&
           op->shape().rank() != instr->shape().rank()))
        continue;
      changed |= MaybeImprove(instr, Get(op), may_combine,
                              instr->operand_count() == 1 && one_user);
    }
    return changed;
  }
  const Instruction* op = PickRepresentativeOperand(instr);
  if (op == nullptr || !IsSpatiallyPartitionedInstr(op)) return false;
  if (Get(op).IsTiled() && instr->shape().IsArray() && op->shape().IsArray() &&
      op->shape().rank() != instr->shape().rank())
    return false;
  return MaybeImprove(instr, Get(op), may_combine, one_user);
}

}  // namespace meshsplit::propagation
