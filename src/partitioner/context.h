// SpmdContext: the state of partitioning one computation — the partitioned
// value of every input instruction, the builder of the output computation
// and the fallback policy — plus the declarations of the op handlers
// (handlers/*.cc), one per opcode family.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/instruction.h"
#include "partitioner/partitioner.h"
#include "partitioner/reshard.h"
#include "partitioner/sharding_helpers.h"
#include "partitioner/spmd_builder.h"

namespace meshsplit::spmd {

class SpmdContext {
 public:
  SpmdContext(SpmdBuilder* builder, const PartitionOptions& options,
              int64_t num_partitions,
              std::map<const Computation*, Computation*>* verbatim)
      : b(*builder), options(options), num_partitions(num_partitions),
        verbatim_(verbatim) {}

  SpmdBuilder& b;
  const PartitionOptions& options;
  const int64_t num_partitions;

  // The sharding the partitioned program gives `instr`'s value: its
  // annotation (maximal -> replicated), or replicated when unannotated. A
  // non-tuple sharding on a tuple-shaped instruction applies to each leaf.
  Sharding ShardingOf(const Instruction& instr) const;

  const PartitionedValue& Get(const Instruction* instr) const;
  void Set(const Instruction& instr, PartitionedValue v) { values_[&instr] = std::move(v); }
  // Operand i of `instr`, resharded to `s`.
  PartitionedValue OperandAs(const Instruction& instr, int i, const Sharding& s) {
    return Reshard(b, Get(instr.operand(i)), s);
  }

  // A copy of `instr` (attributes, literal, called computations cloned
  // verbatim) with new operands and result shape, appended to the output.
  Instruction* Clone(const Instruction& instr, Shape shape,
                     std::vector<Instruction*> operands);
  // A verbatim (unpartitioned) copy of a called computation, made once;
  // Sharding custom-calls become copies and annotations are dropped, since
  // the copy runs on whole values.
  Computation* CloneCalled(const Computation* c);

  // The fallback for ops without a partitioning rule: operands made
  // replicated, the op run on whole values, the result sliced to the
  // instruction's sharding. Warns (strict: fails) when that moved data.
  Status Fallback(const Instruction& instr, const std::string& why = "");

  // Computations cloned verbatim, in creation order (callees first).
  std::vector<std::unique_ptr<Computation>>& cloned_computations() { return cloned_; }

 private:
  std::unordered_map<const Instruction*, PartitionedValue> values_;
  std::map<const Computation*, Computation*>* verbatim_;
  std::vector<std::unique_ptr<Computation>> cloned_;
  std::unordered_set<const Instruction*> named_;
};

// True when a sharding moves no data away from any partition (replicated,
// maximal, or a tuple of those).
bool IsTriviallyReplicated(const Sharding& s);

// Handlers. Each reads `instr`'s operands from the context, emits the local
// program and records the instruction's partitioned value.
Status HandleElementwise(SpmdContext& ctx, const Instruction& instr);
Status HandleParameter(SpmdContext& ctx, const Instruction& instr);
Status HandleConstant(SpmdContext& ctx, const Instruction& instr);
Status HandleIota(SpmdContext& ctx, const Instruction& instr);
Status HandleBroadcast(SpmdContext& ctx, const Instruction& instr);
Status HandleReshape(SpmdContext& ctx, const Instruction& instr);
Status HandleTranspose(SpmdContext& ctx, const Instruction& instr);
Status HandleSlice(SpmdContext& ctx, const Instruction& instr);
Status HandleConcatenate(SpmdContext& ctx, const Instruction& instr);
// Ops that act independently along every dim except `full_dims` (pad,
// reverse, dynamic-slice, dynamic-update-slice, sort, reduce-window, map).
Status HandlePassThrough(SpmdContext& ctx, const Instruction& instr);
Status HandleReduce(SpmdContext& ctx, const Instruction& instr);
Status HandleDot(SpmdContext& ctx, const Instruction& instr);
// Batch / feature partitioning; spatial dims are made whole.
Status HandleConvolution(SpmdContext& ctx, const Instruction& instr);
Status HandleTuple(SpmdContext& ctx, const Instruction& instr);
Status HandleGetTupleElement(SpmdContext& ctx, const Instruction& instr);
Status HandleCustomCall(SpmdContext& ctx, const Instruction& instr);

}  // namespace meshsplit::spmd
