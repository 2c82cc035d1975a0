// The sharding rule of every opcode, in one table (GetOpShardingRule). A rule
// names the op's factors, Shardy style: each factor is a dimension that some
// operands and the result share (pass-through), that operands share but the
// result lacks (reduction / contracting), or that forces replication. Reshape
// uses compound factors (a group of source dims equal in size to a group of
// target dims). The rule also carries the propagation facts XLA attaches to
// opcodes: how early the op may pass shardings (aggressiveness), whether it
// can be spatially partitioned, and which operand represents it.
// Propagation, the partitioner (dot and convolution iteration spaces),
// shrink-shapes and the planner read these rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/instruction.h"

namespace meshsplit {

enum class FactorKind {
  kPassThrough,      // present in the result: sharding flows both ways
  kReduction,        // contracted / reduced: absent from the result
  kNeedReplication,  // must be replicated (e.g. sort dim, fft dims)
  kWindowed,         // convolution spatial / window dims (halo-exchanged)
};

// Role of a factor in a dot-like op (dot, or convolution read as a dot).
enum class DotRole { kNone, kBatch, kContracting, kLhsNonContracting,
                     kRhsNonContracting, kConvSpatial };

struct Factor {
  FactorKind kind = FactorKind::kPassThrough;
  DotRole dot_role = DotRole::kNone;
  // Dim of each operand (indexed by operand number) this factor maps to, or -1.
  std::vector<int64_t> operand_dims;
  int64_t result_dim = -1;
  int64_t size = 1;
};

// A group of source dims whose product equals a group of target dims.
struct CompoundFactor {
  std::vector<int64_t> operand_dims;
  std::vector<int64_t> result_dims;
};

enum class RuleKind {
  kElementwise,     // every operand and the result share all dims
  kFactors,         // generic factor mapping (transpose, broadcast, reduce, ...)
  kSameAsOperand0,  // the result takes operand 0's sharding (pad, slice, ...)
  kDot,             // factors with dot roles
  kConvolution,     // factors with dot roles, some spatial
  kReshape,         // compound factors
  kGather,
  kScatter,
  kTuple,
  kGetTupleElement,
  kControlFlow,     // while / conditional / call: through the bodies
  kCustomCall,      // by target (Sharding, SPMD*, barriers, pass-through)
  kLeaf,            // no operands to propagate from
  kNotPartitioned,  // not spatially partitioned (XLA): only a replicated
                    // operand sharding passes forward, nothing flows back
  kNoRule,          // no meaningful rule: replicated, with a warning
};

// When an op supports spatial partitioning (XLA's SupportSpatialPartitioning
// by opcode; root and parameter context is added by the driver).
enum class Partitionable { kYes, kSpmdOnly, kNo, kContext };

// Which operand decides the result sharding in the generic forward rule.
enum class Representative { kNone, kFirstIfSharded, kMostSpecific };

struct OpShardingRule {
  RuleKind kind = RuleKind::kNoRule;
  std::vector<Factor> factors;
  std::vector<CompoundFactor> compound;  // reshape only
  // Lowest aggressiveness (0..3) at which shardings pass through this op.
  int min_aggressiveness = 1;
  Partitionable partitionable = Partitionable::kNo;
  Representative representative = Representative::kNone;
  std::string name;  // rule family, for --explain and debug output
};

// Builds a rule in one expression: its kind and name, the propagation facts
// that differ from the defaults, then the factors in order (factor i of the
// rule is the i-th one added). For example the transpose by {1,0} of an
// f32[4,8]:
//   RuleBuilder(RuleKind::kFactors, "transpose")
//       .MinAggressiveness(0).Partitioning(Partitionable::kYes)
//       .AddFactor({1}, 0, 8).AddFactor({0}, 1, 4).Build();
class RuleBuilder {
 public:
  RuleBuilder(RuleKind kind, std::string name);
  RuleBuilder& MinAggressiveness(int level);
  RuleBuilder& Partitioning(Partitionable p);
  RuleBuilder& RepresentedBy(Representative r);
  // A factor of `size` that is dim operand_dims[i] of operand i (-1: the
  // operand lacks it) and dim `result_dim` of the result (-1: reduced away).
  RuleBuilder& AddFactor(std::vector<int64_t> operand_dims, int64_t result_dim, int64_t size,
                         FactorKind kind = FactorKind::kPassThrough,
                         DotRole role = DotRole::kNone);
  // One pass-through factor per dim of `instr`'s array result, shared with
  // each of its first `num_operands` operands (all when -1) of equal rank.
  RuleBuilder& AddIdentityFactors(const Instruction& instr, int num_operands = -1);
  RuleBuilder& AddCompound(std::vector<int64_t> operand_dims, std::vector<int64_t> result_dims);
  OpShardingRule Build() const { return rule_; }

 private:
  OpShardingRule rule_;
};

// The rule for `instr`. One switch over every opcode, no default.
OpShardingRule GetOpShardingRule(const Instruction& instr);

// Maps operand `from` (-1 = result) dims to operand `to` (-1 = result) dims
// through the pass-through factors: result[i] = dim of `to` sharing a factor
// with dim i of `from`, or -1.
std::vector<int64_t> FactorDimMapping(const OpShardingRule& rule, int from, int to,
                                      int64_t from_rank);

// Human-readable rule, e.g. "dot: f0[batch] op0:0 op1:0 -> 0; ...".
std::string RuleToString(const OpShardingRule& rule);

// Whether `instr` is a custom-call with this target.
bool IsCustomCall(const Instruction& instr, const char* target);

}  // namespace meshsplit
