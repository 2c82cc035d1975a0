// The per-opcode sharding rules (see op_rules.h). Every opcode of
// ir/opcodes.def has a case below; -Werror=switch makes a new opcode fail to
// compile until it gets one.
#include "rules/op_rules.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "ir/computation.h"

namespace meshsplit {

namespace {

int64_t Rank(const Instruction* i) {
  return i->shape().IsArray() ? i->shape().rank() : 0;
}

// Factors shared by the result and every operand of the same rank.
void AddIdentityFactors(const Instruction& instr, OpShardingRule* rule,
                        int num_operands = -1) {
  if (!instr.shape().IsArray()) return;
  const int64_t rank = instr.shape().rank();
  // A custom-call may have no operands at all (valid HLO), so the "first
  // operand" of SameAsOperand0-style rules may not exist.
  if (num_operands < 0 || num_operands > instr.operand_count())
    num_operands = instr.operand_count();
  for (int64_t d = 0; d < rank; ++d) {
    Factor f;
    f.result_dim = d;
    f.size = instr.shape().dimensions(d);
    f.operand_dims.assign(instr.operand_count(), -1);
    for (int i = 0; i < num_operands; ++i)
      if (Rank(instr.operand(i)) == rank) f.operand_dims[i] = d;
    rule->factors.push_back(f);
  }
}

OpShardingRule Elementwise(const Instruction& instr, Representative rep) {
  OpShardingRule r;
  r.kind = RuleKind::kElementwise;
  r.min_aggressiveness = 0;
  r.partitionable = Partitionable::kYes;
  r.representative = rep;
  r.name = "elementwise";
  AddIdentityFactors(instr, &r);
  return r;
}

OpShardingRule NoRule(const char* why) {
  OpShardingRule r;
  r.kind = RuleKind::kNoRule;
  r.name = why;
  return r;
}

// Ops XLA's propagation does not partition spatially (fft, the linear-algebra
// ops, ragged-dot, batch-norm): an array result takes a replicated operand's
// sharding, and nothing else passes through them in either direction.
OpShardingRule NotPartitioned(const char* name) {
  OpShardingRule r;
  r.kind = RuleKind::kNotPartitioned;
  r.partitionable = Partitionable::kNo;
  r.name = name;
  return r;
}

OpShardingRule Leaf(Partitionable p, const char* name) {
  OpShardingRule r;
  r.kind = RuleKind::kLeaf;
  r.partitionable = p;
  r.name = name;
  return r;
}

OpShardingRule SameAsOperand0(const Instruction& instr, Partitionable p,
                              Representative rep, int min_aggr,
                              const char* name) {
  OpShardingRule r;
  r.kind = RuleKind::kSameAsOperand0;
  r.partitionable = p;
  r.representative = rep;
  r.min_aggressiveness = min_aggr;
  r.name = name;
  AddIdentityFactors(instr, &r, 1);
  return r;
}

OpShardingRule Transpose(const Instruction& instr) {
  OpShardingRule r;
  r.kind = RuleKind::kFactors;
  r.min_aggressiveness = 0;
  r.partitionable = Partitionable::kYes;
  r.name = "transpose";
  const auto& perm = instr.attrs().dimensions;
  for (size_t i = 0; i < perm.size(); ++i) {
    Factor f;
    f.result_dim = i;
    f.operand_dims = {perm[i]};
    f.size = instr.shape().dimensions(i);
    r.factors.push_back(f);
  }
  return r;
}

OpShardingRule Broadcast(const Instruction& instr) {
  OpShardingRule r;
  r.kind = RuleKind::kFactors;
  r.min_aggressiveness = 2;
  r.partitionable = Partitionable::kYes;
  r.name = "broadcast";
  const auto& dims = instr.attrs().dimensions;
  for (int64_t d = 0; d < instr.shape().rank(); ++d) {
    Factor f;
    f.result_dim = d;
    f.size = instr.shape().dimensions(d);
    auto it = std::find(dims.begin(), dims.end(), d);
    f.operand_dims = {it == dims.end() ? -1 : int64_t(it - dims.begin())};
    r.factors.push_back(f);
  }
  return r;
}

OpShardingRule Reduce(const Instruction& instr) {
  OpShardingRule r;
  r.kind = RuleKind::kFactors;
  r.partitionable = Partitionable::kYes;
  r.name = "reduce";
  const int n = instr.operand_count() / 2;
  const auto& reduced = instr.attrs().dimensions;
  const Shape& in = instr.operand(0)->shape();
  if (!in.IsArray()) return r;
  int64_t out = 0;
  for (int64_t d = 0; d < in.rank(); ++d) {
    Factor f;
    f.size = in.dimensions(d);
    f.operand_dims.assign(instr.operand_count(), -1);
    for (int i = 0; i < n; ++i) f.operand_dims[i] = d;
    if (std::find(reduced.begin(), reduced.end(), d) != reduced.end()) {
      f.kind = FactorKind::kReduction;
    } else {
      f.result_dim = out++;
    }
    r.factors.push_back(f);
  }
  return r;
}

OpShardingRule Dot(const Instruction& instr) {
  OpShardingRule r;
  r.kind = RuleKind::kDot;
  r.partitionable = Partitionable::kYes;
  r.name = "dot";
  if (!instr.attrs().dot_dnums) return NoRule("dot without dimension numbers");
  const auto& dn = *instr.attrs().dot_dnums;
  const int64_t lr = Rank(instr.operand(0)), rr = Rank(instr.operand(1));
  auto in = [](const std::vector<int64_t>& v, int64_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  int64_t out = 0;
  for (size_t i = 0; i < dn.lhs_batch_dimensions.size(); ++i) {
    Factor f;
    f.dot_role = DotRole::kBatch;
    f.operand_dims = {dn.lhs_batch_dimensions[i], dn.rhs_batch_dimensions[i]};
    f.result_dim = out++;
    r.factors.push_back(f);
  }
  for (int64_t d = 0; d < lr; ++d) {
    if (in(dn.lhs_batch_dimensions, d) || in(dn.lhs_contracting_dimensions, d))
      continue;
    Factor f;
    f.dot_role = DotRole::kLhsNonContracting;
    f.operand_dims = {d, -1};
    f.result_dim = out++;
    r.factors.push_back(f);
  }
  for (int64_t d = 0; d < rr; ++d) {
    if (in(dn.rhs_batch_dimensions, d) || in(dn.rhs_contracting_dimensions, d))
      continue;
    Factor f;
    f.dot_role = DotRole::kRhsNonContracting;
    f.operand_dims = {-1, d};
    f.result_dim = out++;
    r.factors.push_back(f);
  }
  for (size_t i = 0; i < dn.lhs_contracting_dimensions.size(); ++i) {
    Factor f;
    f.kind = FactorKind::kReduction;
    f.dot_role = DotRole::kContracting;
    f.operand_dims = {dn.lhs_contracting_dimensions[i],
                      dn.rhs_contracting_dimensions[i]};
    r.factors.push_back(f);
  }
  for (auto& f : r.factors)
    if (f.operand_dims[0] >= 0) f.size = instr.operand(0)->shape().dimensions(f.operand_dims[0]);
    else f.size = instr.operand(1)->shape().dimensions(f.operand_dims[1]);
  return r;
}

// Reads a convolution as a dot where it can: batch and output feature are
// non-contracting, input feature is contracting, and trivial spatial dims
// (window 1 without padding, or window covering the input) become
// non-contracting or contracting dims; the rest are windowed.
// The first three factors are always batch, output feature and input
// feature (the partitioner's whole-spatial path reads only those).
OpShardingRule Convolution(const Instruction& instr) {
  OpShardingRule r;
  r.kind = RuleKind::kConvolution;
  r.partitionable = Partitionable::kYes;
  r.name = "convolution";
  if (!instr.attrs().conv_dnums) return NoRule("convolution without dim_labels");
  const auto& cd = *instr.attrs().conv_dnums;
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  auto add = [&](FactorKind k, DotRole role, int64_t l, int64_t rr, int64_t o) {
    Factor f;
    f.kind = k;
    f.dot_role = role;
    f.operand_dims = {l, rr};
    f.result_dim = o;
    f.size = o >= 0 ? instr.shape().dimensions(o) : ls.dimensions(l);
    r.factors.push_back(f);
  };
  // Group counts do not change the reading; the driver only uses it when no
  // windowed dim is sharded or both counts are 1 (as XLA does).
  add(FactorKind::kPassThrough, DotRole::kLhsNonContracting,
      cd.input_batch_dimension, -1, cd.output_batch_dimension);
  add(FactorKind::kPassThrough, DotRole::kRhsNonContracting, -1,
      cd.kernel_output_feature_dimension, cd.output_feature_dimension);
  add(FactorKind::kReduction, DotRole::kContracting, cd.input_feature_dimension,
      cd.kernel_input_feature_dimension, -1);
  for (size_t i = 0; i < cd.input_spatial_dimensions.size(); ++i) {
    const int64_t l = cd.input_spatial_dimensions[i];
    const int64_t k = cd.kernel_spatial_dimensions[i];
    const int64_t o = cd.output_spatial_dimensions[i];
    WindowDimension w;
    if (instr.attrs().window && i < instr.attrs().window->size())
      w = (*instr.attrs().window)[i];
    const int64_t lsz = ls.dimensions(l), ksz = rs.dimensions(k);
    const bool no_pad = w.padding_low == 0 && w.padding_high == 0;
    // A dot batch dim of size B written as a window of size B over a
    // B-dilated input (stride B-1), or its reversed-padding variant.
    const bool parallel =
        (lsz == w.size && lsz == w.base_dilation &&
         ((std::max<int64_t>(1, lsz - 1) == w.stride && w.window_dilation == 1) ||
          (std::max<int64_t>(1, lsz - 1) == w.window_dilation && w.stride == 1)) &&
         no_pad && !w.window_reversal) ||
        (w.size == lsz && w.padding_high == lsz - 1 && w.padding_low == lsz - 1 &&
         w.window_reversal && w.window_dilation == 1 && w.stride == lsz &&
         w.base_dilation == lsz - 1);
    if (parallel) {
      add(FactorKind::kPassThrough, DotRole::kBatch, l, k, o);
    } else if (lsz == w.size && w.base_dilation == 1 && w.window_dilation == 1 &&
               no_pad && !w.window_reversal) {
      add(FactorKind::kReduction, DotRole::kContracting, l, k, o);
    } else if (w.stride == 1 && w.window_dilation == 1 && w.base_dilation == 1 &&
               ksz == 1 && w.size == 1 && no_pad && !w.window_reversal) {
      add(FactorKind::kPassThrough, DotRole::kLhsNonContracting, l, k, o);
    } else if (w.stride == 1 && w.window_dilation == 1 && w.base_dilation == 1 &&
               lsz == 1 && w.size == ksz && w.padding_high == ksz - 1 &&
               w.padding_low == ksz - 1 && w.window_reversal) {
      add(FactorKind::kPassThrough, DotRole::kRhsNonContracting, l, k, o);
    } else {
      add(FactorKind::kWindowed, DotRole::kConvSpatial, l, k, o);
    }
  }
  return r;
}

// Compound factors: consecutive dim groups with equal element counts.
OpShardingRule Reshape(const Instruction& instr) {
  OpShardingRule r;
  r.kind = RuleKind::kReshape;
  r.min_aggressiveness = 0;
  r.partitionable = Partitionable::kYes;
  r.name = "reshape";
  const Shape& in = instr.operand(0)->shape();
  const Shape& out = instr.shape();
  if (!in.IsArray() || !out.IsArray()) return r;
  int64_t i = 0, j = 0;
  while (i < in.rank() || j < out.rank()) {
    CompoundFactor c;
    int64_t pi = 1, pj = 1;
    if (i < in.rank()) pi *= in.dimensions(i), c.operand_dims.push_back(i++);
    if (j < out.rank()) pj *= out.dimensions(j), c.result_dims.push_back(j++);
    while (pi != pj) {
      if (pi < pj && i < in.rank()) pi *= in.dimensions(i), c.operand_dims.push_back(i++);
      else if (pj < pi && j < out.rank()) pj *= out.dimensions(j), c.result_dims.push_back(j++);
      else break;
    }
    r.compound.push_back(c);
    if (pi != pj) break;
  }
  return r;
}

OpShardingRule WithFactors(const Instruction& instr, RuleKind kind,
                           Partitionable p, Representative rep, int min_aggr,
                           const char* name) {
  OpShardingRule r;
  r.kind = kind;
  r.partitionable = p;
  r.representative = rep;
  r.min_aggressiveness = min_aggr;
  r.name = name;
  AddIdentityFactors(instr, &r);
  return r;
}

// dynamic-slice / dynamic-update-slice: sliced dims must be replicated.
OpShardingRule DynamicSlicing(const Instruction& instr) {
  OpShardingRule r;
  r.kind = RuleKind::kFactors;
  r.min_aggressiveness = 0;
  r.partitionable = Partitionable::kYes;
  const bool dus = instr.opcode() == Opcode::kDynamicUpdateSlice;
  r.name = dus ? "dynamic-update-slice" : "dynamic-slice";
  const Instruction* sliced = dus ? instr.operand(1) : instr.operand(0);
  if (!instr.shape().IsArray() || !sliced->shape().IsArray()) return r;
  for (int64_t d = 0; d < instr.shape().rank(); ++d) {
    Factor f;
    f.result_dim = d;
    f.size = instr.shape().dimensions(d);
    f.operand_dims.assign(instr.operand_count(), -1);
    if (dus) f.operand_dims[0] = d;
    if (d < sliced->shape().rank()) {
      f.operand_dims[dus ? 1 : 0] = d;
      if (sliced->shape().dimensions(d) != instr.shape().dimensions(d)) {
        if (dus) {
          Factor g = f;  // the update's dim is only part of the result's
          g.kind = FactorKind::kNeedReplication;
          g.operand_dims.assign(instr.operand_count(), -1);
          g.operand_dims[1] = d;
          g.result_dim = -1;
          f.operand_dims[1] = -1;
          r.factors.push_back(g);
        } else {
          f.kind = FactorKind::kNeedReplication;
        }
      }
    }
    r.factors.push_back(f);
  }
  return r;
}

}  // namespace

bool IsCustomCall(const Instruction& instr, const char* target) {
  return instr.opcode() == Opcode::kCustomCall &&
         instr.attrs().custom_call_target == target;
}

OpShardingRule GetOpShardingRule(const Instruction& instr) {
  using R = Representative;
  using P = Partitionable;
  switch (instr.opcode()) {
    case Opcode::kParameter:
      return Leaf(P::kContext, "parameter");
    case Opcode::kConstant:
      return Leaf(P::kYes, "constant");
    case Opcode::kIota:
      return Leaf(P::kYes, "iota");
    case Opcode::kInfeed:
      return Leaf(P::kYes, "infeed");
    case Opcode::kRngBitGenerator:
      return Leaf(P::kYes, "rng-bit-generator");
    case Opcode::kPartitionId:
    case Opcode::kReplicaId:
    case Opcode::kAfterAll:
    case Opcode::kRngGetAndUpdateState:
      return Leaf(P::kNo, "leaf");

    case Opcode::kPower:
    case Opcode::kShiftLeft:
    case Opcode::kShiftRightArithmetic:
    case Opcode::kShiftRightLogical:
      return Elementwise(instr, R::kFirstIfSharded);
    case Opcode::kAbs: case Opcode::kCbrt: case Opcode::kCeil:
    case Opcode::kClz: case Opcode::kCos: case Opcode::kErf:
    case Opcode::kExp: case Opcode::kExpm1: case Opcode::kFloor:
    case Opcode::kImag: case Opcode::kIsFinite: case Opcode::kLog:
    case Opcode::kLog1p: case Opcode::kLogistic: case Opcode::kNegate:
    case Opcode::kNot: case Opcode::kPopcnt: case Opcode::kReal:
    case Opcode::kRoundNearestAfz: case Opcode::kRoundNearestEven:
    case Opcode::kRsqrt: case Opcode::kSign: case Opcode::kSin:
    case Opcode::kSqrt: case Opcode::kTan: case Opcode::kTanh:
    case Opcode::kCopy: case Opcode::kConvert: case Opcode::kReducePrecision:
    case Opcode::kStochasticConvert: case Opcode::kAdd: case Opcode::kAnd:
    case Opcode::kAtan2: case Opcode::kComplex: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum: case Opcode::kMultiply:
    case Opcode::kOr: case Opcode::kRemainder: case Opcode::kSubtract:
    case Opcode::kXor: case Opcode::kCompare: case Opcode::kSelect:
    case Opcode::kClamp:
      return Elementwise(instr, R::kMostSpecific);
    case Opcode::kMap: {
      OpShardingRule r = Elementwise(instr, R::kFirstIfSharded);
      r.name = "map";
      return r;
    }
    case Opcode::kRng: {
      // Elementwise in XLA's sense, but its operands are distribution
      // parameters: only the subgroups of their shardings carry over.
      OpShardingRule r = Elementwise(instr, R::kNone);
      r.partitionable = P::kSpmdOnly;
      r.name = "rng";
      return r;
    }
    case Opcode::kBitcastConvert: {
      if (instr.operand(0)->shape().IsArray() && instr.shape().IsArray() &&
          instr.operand(0)->shape().rank() == instr.shape().rank()) {
        OpShardingRule r = Elementwise(instr, R::kMostSpecific);
        r.name = "bitcast-convert";
        return r;
      }
      return NoRule("bitcast-convert changing rank");
    }

    case Opcode::kBitcast:
      return NoRule("bitcast");
    case Opcode::kBroadcast:
      return Broadcast(instr);
    case Opcode::kReshape:
      return Reshape(instr);
    case Opcode::kTranspose:
      return Transpose(instr);
    case Opcode::kSlice:
      return SameAsOperand0(instr, P::kYes, R::kFirstIfSharded, 1, "slice");
    case Opcode::kPad:
      return SameAsOperand0(instr, P::kYes, R::kFirstIfSharded, 1, "pad");
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice:
      return DynamicSlicing(instr);
    case Opcode::kConcatenate:
      return WithFactors(instr, RuleKind::kFactors, P::kYes, R::kMostSpecific, 0,
                         "concatenate");
    case Opcode::kReverse:
      return WithFactors(instr, RuleKind::kFactors, P::kSpmdOnly,
                         R::kFirstIfSharded, 1, "reverse");
    case Opcode::kGather: {
      OpShardingRule r;
      r.kind = RuleKind::kGather;
      r.partitionable = P::kYes;
      r.name = "gather";
      return r;
    }
    case Opcode::kScatter: {
      OpShardingRule r;
      r.kind = RuleKind::kScatter;
      r.partitionable = P::kYes;
      r.name = "scatter";
      return r;
    }

    case Opcode::kReduce:
      return Reduce(instr);
    case Opcode::kReduceWindow:
      return WithFactors(instr, RuleKind::kFactors, P::kYes, R::kNone, 1,
                         "reduce-window");
    case Opcode::kSelectAndScatter:
      return SameAsOperand0(instr, P::kYes, R::kFirstIfSharded, 1,
                            "select-and-scatter");
    case Opcode::kSort:
      return WithFactors(instr, RuleKind::kFactors, P::kYes, R::kMostSpecific, 1,
                         "sort");

    case Opcode::kDot:
      return Dot(instr);
    case Opcode::kConvolution:
      return Convolution(instr);
    case Opcode::kRaggedDot:
      return NotPartitioned("ragged-dot (not spatially partitioned)");
    case Opcode::kFft:
      return NotPartitioned("fft (not spatially partitioned)");
    case Opcode::kCholesky:
    case Opcode::kTriangularSolve:
      return NotPartitioned("linear algebra (not spatially partitioned)");
    case Opcode::kBatchNormTraining:
    case Opcode::kBatchNormInference:
    case Opcode::kBatchNormGrad:
      return NotPartitioned("batch-norm (not spatially partitioned)");

    case Opcode::kTuple: {
      OpShardingRule r;
      r.kind = RuleKind::kTuple;
      r.min_aggressiveness = 0;
      r.partitionable = P::kYes;
      r.name = "tuple";
      return r;
    }
    case Opcode::kGetTupleElement: {
      OpShardingRule r;
      r.kind = RuleKind::kGetTupleElement;
      r.min_aggressiveness = 0;
      r.partitionable = P::kYes;
      r.name = "get-tuple-element";
      return r;
    }
    case Opcode::kWhile: {
      OpShardingRule r;
      r.kind = RuleKind::kControlFlow;
      r.min_aggressiveness = 0;
      r.partitionable = P::kYes;
      r.representative = R::kMostSpecific;
      r.name = "while";
      return r;
    }
    case Opcode::kConditional: {
      OpShardingRule r;
      r.kind = RuleKind::kControlFlow;
      r.partitionable = P::kYes;
      r.name = "conditional";
      return r;
    }
    case Opcode::kCall: {
      OpShardingRule r;
      r.kind = RuleKind::kControlFlow;
      r.min_aggressiveness = 0;
      r.partitionable = P::kNo;
      r.name = "call";
      return r;
    }
    case Opcode::kCustomCall: {
      OpShardingRule r;
      r.kind = RuleKind::kCustomCall;
      r.partitionable = P::kContext;
      r.min_aggressiveness = IsCustomCall(instr, "Sharding") ? 0 : 1;
      r.name = "custom-call " + instr.attrs().custom_call_target;
      AddIdentityFactors(instr, &r, 1);
      return r;
    }
    case Opcode::kOptimizationBarrier:
      return SameAsOperand0(instr, P::kYes, R::kFirstIfSharded, 0, "opt-barrier");
    case Opcode::kDomain:
      return NoRule("domain");
    case Opcode::kOutfeed:
      return NoRule("outfeed");
    // XLA's propagation gives these no sharding of their own (no
    // representative operand, not spatially partitioned).
    case Opcode::kTopK:
      return NotPartitioned("topk (not spatially partitioned)");
    case Opcode::kGetDimensionSize:
      return NotPartitioned("get-dimension-size (not spatially partitioned)");
    case Opcode::kAddDependency:
      return NotPartitioned("add-dependency (not spatially partitioned)");
    // Nor fusion, the async wrappers or the async halves of collectives and
    // copies: XLA picks no representative operand for them and does not
    // propagate into fused or wrapped computations.
    case Opcode::kFusion:
      return NotPartitioned("fusion (not spatially partitioned)");
    case Opcode::kAsyncStart:
    case Opcode::kAsyncUpdate:
    case Opcode::kAsyncDone:
      return NotPartitioned("async op (not spatially partitioned)");
    case Opcode::kAllReduceStart:
    case Opcode::kAllReduceDone:
    case Opcode::kAllGatherStart:
    case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteStart:
    case Opcode::kCollectivePermuteDone:
      return NotPartitioned("async collective (not spatially partitioned)");
    case Opcode::kCopyStart:
    case Opcode::kCopyDone:
      return NotPartitioned("async copy (not spatially partitioned)");
    // XLA's SupportSpatialPartitioning is false for these too: no sharding
    // of their own is inferred; only a replicated operand sharding passes.
    case Opcode::kSend:
    case Opcode::kSendDone:
    case Opcode::kRecv:
    case Opcode::kRecvDone:
      return NotPartitioned("send / recv (not spatially partitioned)");
    case Opcode::kCollectiveBroadcast:
    case Opcode::kRaggedAllToAll:
      return NotPartitioned("collective (not spatially partitioned)");
    case Opcode::kSetDimensionSize:
      return NotPartitioned("set-dimension-size (not spatially partitioned)");
    case Opcode::kDynamicReshape:
      return NotPartitioned("dynamic-reshape (not spatially partitioned)");

    case Opcode::kAllReduce:
    case Opcode::kCollectivePermute:
    case Opcode::kReduceScatter:
      return SameAsOperand0(instr, P::kYes, R::kMostSpecific, 1, "collective");
    case Opcode::kAllGather:
    case Opcode::kAllToAll:
      return SameAsOperand0(instr, P::kNo, R::kMostSpecific, 1, "collective");
  }
  return NoRule("unknown opcode");
}

std::vector<int64_t> FactorDimMapping(const OpShardingRule& rule, int from, int to,
                                      int64_t from_rank) {
  std::vector<int64_t> map(from_rank, -1);
  auto dim_of = [](const Factor& f, int which) -> int64_t {
    if (which < 0) return f.result_dim;
    return which < (int)f.operand_dims.size() ? f.operand_dims[which] : -1;
  };
  for (const Factor& f : rule.factors) {
    if (f.kind != FactorKind::kPassThrough) continue;
    int64_t a = dim_of(f, from), b = dim_of(f, to);
    if (a >= 0 && b >= 0 && a < from_rank) map[a] = b;
  }
  return map;
}

std::string RuleToString(const OpShardingRule& rule) {
  std::ostringstream os;
  os << rule.name << ":";
  static const char* kKinds[] = {"", "reduction", "replicated", "windowed"};
  for (size_t i = 0; i < rule.factors.size(); ++i) {
    const Factor& f = rule.factors[i];
    os << " f" << i;
    if (f.kind != FactorKind::kPassThrough) os << "[" << kKinds[(int)f.kind] << "]";
    for (size_t o = 0; o < f.operand_dims.size(); ++o)
      if (f.operand_dims[o] >= 0) os << " op" << o << ":" << f.operand_dims[o];
    if (f.result_dim >= 0) os << " -> " << f.result_dim;
    os << ";";
  }
  for (const CompoundFactor& c : rule.compound) {
    os << " (";
    for (size_t k = 0; k < c.operand_dims.size(); ++k)
      os << (k ? "," : "") << c.operand_dims[k];
    os << ") -> (";
    for (size_t k = 0; k < c.result_dims.size(); ++k)
      os << (k ? "," : "") << c.result_dims[k];
    os << ");";
  }
  os << " aggressiveness>=" << rule.min_aggressiveness;
  return os.str();
}

}  // namespace meshsplit
