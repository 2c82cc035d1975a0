// The per-opcode sharding rules (see op_rules.h). Every opcode of
// ir/opcodes.def has a case below; -Werror=switch makes a new opcode fail to
// compile until it gets one.
#include "rules/op_rules.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "ir/computation.h"
#include "support/small_helpers.h"

namespace meshsplit {
namespace {

int64_t Rank(const Instruction* i) {
  return i->shape().IsArray() ? i->shape().rank() : 0;
}

}  // namespace

RuleBuilder::RuleBuilder(RuleKind kind, std::string name) {
  rule_.kind = kind;
  rule_.name = std::move(name);
}

RuleBuilder& RuleBuilder::MinAggressiveness(int level) {
  rule_.min_aggressiveness = level;
  return *this;
}

RuleBuilder& RuleBuilder::Partitioning(Partitionable p) {
  rule_.partitionable = p;
  return *this;
}

RuleBuilder& RuleBuilder::RepresentedBy(Representative r) {
  rule_.representative = r;
  return *this;
}

RuleBuilder& RuleBuilder::AddFactor(std::vector<int64_t> operand_dims, int64_t result_dim,
                                    int64_t size, FactorKind kind, DotRole role) {
  Factor f;
  f.kind = kind;
  f.dot_role = role;
  f.operand_dims = std::move(operand_dims);
  f.result_dim = result_dim;
  f.size = size;
  rule_.factors.push_back(std::move(f));
  return *this;
}

RuleBuilder& RuleBuilder::AddIdentityFactors(const Instruction& instr, int num_operands) {
  if (!instr.shape().IsArray()) return *this;
  const int64_t rank = instr.shape().rank();
  // A custom-call may have no operands at all (valid HLO), so the "first
  // operand" of SameAsOperand0-style rules may not exist.
  if (num_operands < 0 || num_operands > instr.operand_count())
    num_operands = instr.operand_count();
  for (int64_t d = 0; d < rank; ++d) {
    std::vector<int64_t> dims(instr.operand_count(), -1);
    for (int i = 0; i < num_operands; ++i)
      if (Rank(instr.operand(i)) == rank) dims[i] = d;
    AddFactor(std::move(dims), d, instr.shape().dimensions(d));
  }
  return *this;
}

RuleBuilder& RuleBuilder::AddCompound(std::vector<int64_t> operand_dims,
                                      std::vector<int64_t> result_dims) {
  rule_.compound.push_back({std::move(operand_dims), std::move(result_dims)});
  return *this;
}

namespace {

using P = Partitionable;
using R = Representative;

OpShardingRule Elementwise(const Instruction& instr, R rep, const char* name = "elementwise",
                           P p = P::kYes) {
  return RuleBuilder(RuleKind::kElementwise, name)
      .MinAggressiveness(0)
      .Partitioning(p)
      .RepresentedBy(rep)
      .AddIdentityFactors(instr)
      .Build();
}

OpShardingRule NoRule(const char* why) { return RuleBuilder(RuleKind::kNoRule, why).Build(); }

// Ops XLA's propagation does not partition spatially (fft, the linear-algebra
// ops, ragged-dot, batch-norm): an array result takes a replicated operand's
// sharding, and nothing else passes through them in either direction.
OpShardingRule NotPartitioned(const char* name) {
  return RuleBuilder(RuleKind::kNotPartitioned, name).Partitioning(P::kNo).Build();
}

OpShardingRule Leaf(P p, const char* name) {
  return RuleBuilder(RuleKind::kLeaf, name).Partitioning(p).Build();
}

// A rule without factors: tuples and control flow pass shardings through
// their elements and bodies, not through dims.
OpShardingRule Structural(RuleKind kind, const char* name, int min_aggr, P p,
                          R rep = R::kNone) {
  return RuleBuilder(kind, name).MinAggressiveness(min_aggr).Partitioning(p).RepresentedBy(rep)
      .Build();
}

// The result shares every dim with the first `num_operands` operands (all
// when -1) of its rank.
OpShardingRule WithFactors(const Instruction& instr, RuleKind kind, P p, R rep, int min_aggr,
                           const char* name, int num_operands = -1) {
  return RuleBuilder(kind, name)
      .MinAggressiveness(min_aggr)
      .Partitioning(p)
      .RepresentedBy(rep)
      .AddIdentityFactors(instr, num_operands)
      .Build();
}

OpShardingRule SameAsOperand0(const Instruction& instr, P p, R rep, int min_aggr,
                              const char* name) {
  return WithFactors(instr, RuleKind::kSameAsOperand0, p, rep, min_aggr, name, 1);
}

OpShardingRule Transpose(const Instruction& instr) {
  RuleBuilder b(RuleKind::kFactors, "transpose");
  b.MinAggressiveness(0).Partitioning(P::kYes);
  const auto& perm = instr.attrs().dimensions;
  for (size_t i = 0; i < perm.size(); ++i)
    b.AddFactor({perm[i]}, i, instr.shape().dimensions(i));
  return b.Build();
}

OpShardingRule Broadcast(const Instruction& instr) {
  RuleBuilder b(RuleKind::kFactors, "broadcast");
  b.MinAggressiveness(2).Partitioning(P::kYes);
  const auto& dims = instr.attrs().dimensions;
  for (int64_t d = 0; d < instr.shape().rank(); ++d) {
    auto it = std::find(dims.begin(), dims.end(), d);
    b.AddFactor({it == dims.end() ? -1 : int64_t(it - dims.begin())}, d,
                instr.shape().dimensions(d));
  }
  return b.Build();
}

OpShardingRule Reduce(const Instruction& instr) {
  RuleBuilder b(RuleKind::kFactors, "reduce");
  b.Partitioning(P::kYes);
  const int n = instr.operand_count() / 2;
  const auto& reduced = instr.attrs().dimensions;
  const Shape& in = instr.operand(0)->shape();
  if (!in.IsArray()) return b.Build();
  int64_t out = 0;
  for (int64_t d = 0; d < in.rank(); ++d) {
    std::vector<int64_t> dims(instr.operand_count(), -1);
    for (int i = 0; i < n; ++i) dims[i] = d;
    if (std::find(reduced.begin(), reduced.end(), d) != reduced.end())
      b.AddFactor(std::move(dims), -1, in.dimensions(d), FactorKind::kReduction);
    else
      b.AddFactor(std::move(dims), out++, in.dimensions(d));
  }
  return b.Build();
}

// Batch factors first, then each side's free dims, then the contracting
// dims (DotDims and the partitioner's iteration space keep this order).
OpShardingRule Dot(const Instruction& instr) {
  if (!instr.attrs().dot_dnums) return NoRule("dot without dimension numbers");
  RuleBuilder b(RuleKind::kDot, "dot");
  b.Partitioning(P::kYes);
  const auto& dn = *instr.attrs().dot_dnums;
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  int64_t out = 0;
  for (size_t i = 0; i < dn.lhs_batch_dimensions.size(); ++i)
    b.AddFactor({dn.lhs_batch_dimensions[i], dn.rhs_batch_dimensions[i]}, out++,
                ls.dimensions(dn.lhs_batch_dimensions[i]), FactorKind::kPassThrough,
                DotRole::kBatch);
  for (int64_t d = 0; d < Rank(instr.operand(0)); ++d)
    if (!Contains(dn.lhs_batch_dimensions, d) && !Contains(dn.lhs_contracting_dimensions, d))
      b.AddFactor({d, -1}, out++, ls.dimensions(d), FactorKind::kPassThrough,
                  DotRole::kLhsNonContracting);
  for (int64_t d = 0; d < Rank(instr.operand(1)); ++d)
    if (!Contains(dn.rhs_batch_dimensions, d) && !Contains(dn.rhs_contracting_dimensions, d))
      b.AddFactor({-1, d}, out++, rs.dimensions(d), FactorKind::kPassThrough,
                  DotRole::kRhsNonContracting);
  for (size_t i = 0; i < dn.lhs_contracting_dimensions.size(); ++i)
    b.AddFactor({dn.lhs_contracting_dimensions[i], dn.rhs_contracting_dimensions[i]}, -1,
                ls.dimensions(dn.lhs_contracting_dimensions[i]), FactorKind::kReduction,
                DotRole::kContracting);
  return b.Build();
}

// Reads a convolution as a dot where it can: batch and output feature are
// non-contracting, input feature is contracting, and trivial spatial dims
// (window 1 without padding, or window covering the input) become
// non-contracting or contracting dims; the rest are windowed.
// The first three factors are always batch, output feature and input
// feature (the partitioner's whole-spatial path reads only those).
OpShardingRule Convolution(const Instruction& instr) {
  if (!instr.attrs().conv_dnums) return NoRule("convolution without dim_labels");
  RuleBuilder b(RuleKind::kConvolution, "convolution");
  b.Partitioning(P::kYes);
  const auto& cd = *instr.attrs().conv_dnums;
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  auto add = [&](FactorKind k, DotRole role, int64_t l, int64_t rr, int64_t o) {
    b.AddFactor({l, rr}, o, o >= 0 ? instr.shape().dimensions(o) : ls.dimensions(l), k, role);
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
  return b.Build();
}

// Compound factors: consecutive dim groups with equal element counts.
OpShardingRule Reshape(const Instruction& instr) {
  RuleBuilder b(RuleKind::kReshape, "reshape");
  b.MinAggressiveness(0).Partitioning(P::kYes);
  const Shape& in = instr.operand(0)->shape();
  const Shape& out = instr.shape();
  if (!in.IsArray() || !out.IsArray()) return b.Build();
  int64_t i = 0, j = 0;
  while (i < in.rank() || j < out.rank()) {
    std::vector<int64_t> from, to;
    int64_t pi = 1, pj = 1;
    if (i < in.rank()) pi *= in.dimensions(i), from.push_back(i++);
    if (j < out.rank()) pj *= out.dimensions(j), to.push_back(j++);
    while (pi != pj) {
      if (pi < pj && i < in.rank()) pi *= in.dimensions(i), from.push_back(i++);
      else if (pj < pi && j < out.rank()) pj *= out.dimensions(j), to.push_back(j++);
      else break;
    }
    b.AddCompound(std::move(from), std::move(to));
    if (pi != pj) break;
  }
  return b.Build();
}

// dynamic-slice / dynamic-update-slice: sliced dims must be replicated.
OpShardingRule DynamicSlicing(const Instruction& instr) {
  const bool dus = instr.opcode() == Opcode::kDynamicUpdateSlice;
  RuleBuilder b(RuleKind::kFactors, dus ? "dynamic-update-slice" : "dynamic-slice");
  b.MinAggressiveness(0).Partitioning(P::kYes);
  const Instruction* sliced = dus ? instr.operand(1) : instr.operand(0);
  if (!instr.shape().IsArray() || !sliced->shape().IsArray()) return b.Build();
  const int n = instr.operand_count();
  for (int64_t d = 0; d < instr.shape().rank(); ++d) {
    const int64_t size = instr.shape().dimensions(d);
    std::vector<int64_t> dims(n, -1);
    FactorKind kind = FactorKind::kPassThrough;
    if (dus) dims[0] = d;
    if (d < sliced->shape().rank()) {
      dims[dus ? 1 : 0] = d;
      if (sliced->shape().dimensions(d) != size) {
        if (dus) {
          // The update's dim is only part of the result's: its own factor.
          std::vector<int64_t> update(n, -1);
          update[1] = d;
          b.AddFactor(std::move(update), -1, size, FactorKind::kNeedReplication);
          dims[1] = -1;
        } else {
          kind = FactorKind::kNeedReplication;
        }
      }
    }
    b.AddFactor(std::move(dims), d, size, kind);
  }
  return b.Build();
}

}  // namespace

bool IsCustomCall(const Instruction& instr, const char* target) {
  return instr.opcode() == Opcode::kCustomCall &&
         instr.attrs().custom_call_target == target;
}

OpShardingRule GetOpShardingRule(const Instruction& instr) {
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
    case Opcode::kMap:
      return Elementwise(instr, R::kFirstIfSharded, "map");
    case Opcode::kRng: {
      // Elementwise in XLA's sense, but its operands are distribution
      // parameters: only the subgroups of their shardings carry over.
      return Elementwise(instr, R::kNone, "rng", P::kSpmdOnly);
    }
    case Opcode::kBitcastConvert: {
      if (instr.operand(0)->shape().IsArray() && instr.shape().IsArray() &&
          instr.operand(0)->shape().rank() == instr.shape().rank())
        return Elementwise(instr, R::kMostSpecific, "bitcast-convert");
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
    case Opcode::kGather:
      return Structural(RuleKind::kGather, "gather", 1, P::kYes);
    case Opcode::kScatter:
      return Structural(RuleKind::kScatter, "scatter", 1, P::kYes);

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

    case Opcode::kTuple:
      return Structural(RuleKind::kTuple, "tuple", 0, P::kYes);
    case Opcode::kGetTupleElement:
      return Structural(RuleKind::kGetTupleElement, "get-tuple-element", 0, P::kYes);
    case Opcode::kWhile:
      return Structural(RuleKind::kControlFlow, "while", 0, P::kYes, R::kMostSpecific);
    case Opcode::kConditional:
      return Structural(RuleKind::kControlFlow, "conditional", 1, P::kYes);
    case Opcode::kCall:
      return Structural(RuleKind::kControlFlow, "call", 0, P::kNo);
    case Opcode::kCustomCall:
      return RuleBuilder(RuleKind::kCustomCall, "custom-call " + instr.attrs().custom_call_target)
          .MinAggressiveness(IsCustomCall(instr, "Sharding") ? 0 : 1)
          .Partitioning(P::kContext)
          .AddIdentityFactors(instr, 1)
          .Build();
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
