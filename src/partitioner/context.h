// SpmdContext: the state of partitioning one computation — the partitioned
// value of every input instruction, the builder of the output computation
// and the fallback policy — plus the declarations of the op handlers
// (handlers/*.cc), one per opcode family.
#pragma once

#include <map>
#include <memory>
#include <utility>
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

// State shared by the contexts of every computation partitioned in one
// module: output computations in creation order (callees first), the
// verbatim and partitioned copies made so far, and the names already taken.
struct SpmdShared {
  SpmdModuleState* state = nullptr;
  std::vector<std::unique_ptr<Computation>> computations;
  std::map<const Computation*, Computation*> verbatim;
  // Keyed by input computation and the parameter/root shardings.
  std::map<std::pair<const Computation*, std::string>, Computation*> partitioned;
  std::unordered_set<const Instruction*> named;
  std::unordered_set<std::string> computation_names;
  // A name for an output computation derived from `name`, unique so far.
  std::string ComputationName(const std::string& name);
};

class SpmdContext {
 public:
  SpmdContext(SpmdBuilder* builder, const PartitionOptions& options,
              int64_t num_partitions, SpmdShared* shared,
              const std::vector<Sharding>* param_shardings = nullptr)
      : b(*builder), options(options), num_partitions(num_partitions),
        shared_(shared), param_shardings_(param_shardings) {}

  SpmdBuilder& b;
  const PartitionOptions& options;
  const int64_t num_partitions;

  // The sharding the partitioned program gives `instr`'s value: its
  // annotation (maximal -> replicated), or replicated when unannotated. A
  // non-tuple sharding on a tuple-shaped instruction applies to each leaf.
  // Parameters of a called computation take the sharding their caller
  // imposes.
  Sharding ShardingOf(const Instruction& instr) const;
  // True when partitioning a called computation whose parameter shardings
  // come from the caller.
  bool has_param_shardings() const { return param_shardings_ != nullptr; }

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
  // Like Clone, but calling the given (already partitioned) computations.
  Instruction* CloneWithCalled(const Instruction& instr, Shape shape,
                               std::vector<Instruction*> operands,
                               std::vector<Computation*> called);
  // `c` partitioned with its parameters laid out by `param_shardings` and
  // its root resharded to `root_sharding` (made once per combination).
  StatusOr<Computation*> PartitionCalled(const Computation* c,
                                         const std::vector<Sharding>& param_shardings,
                                         const Sharding& root_sharding);
  // A verbatim (unpartitioned) copy of a called computation, made once;
  // Sharding custom-calls become copies and annotations are dropped, since
  // the copy runs on whole values.
  Computation* CloneCalled(const Computation* c);

  // The fallback for ops without a partitioning rule: operands made
  // replicated, the op run on whole values, the result sliced to the
  // instruction's sharding. Warns (strict: fails) when that moved data.
  Status Fallback(const Instruction& instr, const std::string& why = "");

  SpmdShared& shared() { return *shared_; }

 private:
  std::unordered_map<const Instruction*, PartitionedValue> values_;
  SpmdShared* shared_;
  const std::vector<Sharding>* param_shardings_;
};

// Partitions every instruction of `in` into `ctx`'s builder and returns the
// partitioned root resharded to `root_sharding` (the driver, for the entry
// and for called computations).
StatusOr<Instruction*> PartitionComputationBody(SpmdContext& ctx, const Computation& in,
                                                const Sharding& root_sharding);

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
// reverse, dynamic-slice, dynamic-update-slice, sort, map): map, and the
// general fallback of those ops' own handlers.
Status HandlePassThrough(SpmdContext& ctx, const Instruction& instr);
// handlers/data_movement.cc: halo exchange / masked local updates instead of
// making the moved dims whole.
Status HandlePad(SpmdContext& ctx, const Instruction& instr);
Status HandleReverse(SpmdContext& ctx, const Instruction& instr);
Status HandleDynamicSlice(SpmdContext& ctx, const Instruction& instr);
Status HandleDynamicUpdateSlice(SpmdContext& ctx, const Instruction& instr);
Status HandleSort(SpmdContext& ctx, const Instruction& instr);
Status HandleRng(SpmdContext& ctx, const Instruction& instr);
Status HandleRngBitGenerator(SpmdContext& ctx, const Instruction& instr);
Status HandleReduce(SpmdContext& ctx, const Instruction& instr);
Status HandleDot(SpmdContext& ctx, const Instruction& instr);
// handlers/convolution.cc: batch / feature partitioning, and spatial dims
// partitioned with halo exchange (halo.h) when the window allows.
Status HandleConvolution(SpmdContext& ctx, const Instruction& instr);
// handlers/block_scaled_dot.cc: the "__op$block_scaled_dot" custom-call as a
// dot whose scale operands follow their operands' shardings.
bool IsBlockScaledDot(const Instruction& instr);
Status HandleBlockScaledDot(SpmdContext& ctx, const Instruction& instr);
// handlers/fft.cc: fft partitioned along its batch (non-transformed) dims.
Status HandleFft(SpmdContext& ctx, const Instruction& instr);
// handlers/window.cc: windowed dims tiled in the result by halo exchange.
Status HandleReduceWindow(SpmdContext& ctx, const Instruction& instr);
Status HandleSelectAndScatter(SpmdContext& ctx, const Instruction& instr);
// handlers/reduce_variadic.cc: a variadic reduce whose first input
// (`in_sharding`, tiled, no manual subgroup) tiles reduced dims: local
// reduce, partial results gathered, reduced again.
Status HandleVariadicReducePartial(SpmdContext& ctx, const Instruction& instr,
                                   const Sharding& in_sharding);
// handlers/shape_ops.cc: bitcast-convert, elementwise or with its
// element-piece dim whole.
Status HandleBitcastConvert(SpmdContext& ctx, const Instruction& instr);
// handlers/annotations.cc: opt-barrier and the host-offloading custom-calls
// run on each partition's piece.
Status HandleOptimizationBarrier(SpmdContext& ctx, const Instruction& instr);
bool IsMemoryAnnotation(const Instruction& instr);
Status HandleMemoryAnnotation(SpmdContext& ctx, const Instruction& instr);
Status HandleTuple(SpmdContext& ctx, const Instruction& instr);
Status HandleGetTupleElement(SpmdContext& ctx, const Instruction& instr);
Status HandleCustomCall(SpmdContext& ctx, const Instruction& instr);
// handlers/linalg.cc: cholesky and triangular-solve per matrix of the batch
// (batch dims tiled, matrix dims whole); ragged-dot with its batch and free
// dims tiled as the result, the dims its groups reach across whole.
Status HandleCholesky(SpmdContext& ctx, const Instruction& instr);
Status HandleTriangularSolve(SpmdContext& ctx, const Instruction& instr);
Status HandleRaggedDot(SpmdContext& ctx, const Instruction& instr);
// handlers/ragged_experts.cc: a ragged-dot (ragged non-contracting mode, no
// batch dims) whose rhs tiles its group dim keeps the experts where they
// are; returns false when the op is not of that shape.
bool TryRaggedDotExpertParallel(SpmdContext& ctx, const Instruction& instr, int64_t ragged_dim,
                                int64_t group_dim, Status* status);
// The TopK custom-call (handlers/linalg.cc): rows tiled, last dim whole.
Status HandleTopK(SpmdContext& ctx, const Instruction& instr);
// handlers/dependency_size.cc
Status HandleAddDependency(SpmdContext& ctx, const Instruction& instr);
Status HandleGetDimensionSize(SpmdContext& ctx, const Instruction& instr);
// handlers/feeds.cc: each partition outfeeds its piece of the data.
Status HandleOutfeed(SpmdContext& ctx, const Instruction& instr);
Status HandleInfeed(SpmdContext& ctx, const Instruction& instr);
// handlers/collectives.cc: collectives written in the input; rejects those
// that mix manual subgroups.
Status HandleInputCollective(SpmdContext& ctx, const Instruction& instr);
// Control flow: bodies, branches and callees partitioned recursively.
Status HandleWhile(SpmdContext& ctx, const Instruction& instr);
Status HandleConditional(SpmdContext& ctx, const Instruction& instr);
Status HandleCall(SpmdContext& ctx, const Instruction& instr);
// handlers/async_fusion.cc: fusion as a call; async-start partitions its
// wrapped computation; update / done forward the start's tuple; the
// collective starts run as written; copy-start keeps its operand's layout.
Status HandleFusion(SpmdContext& ctx, const Instruction& instr);
Status HandleAsyncStart(SpmdContext& ctx, const Instruction& instr);
Status HandleAsyncUpdate(SpmdContext& ctx, const Instruction& instr);
Status HandleDone(SpmdContext& ctx, const Instruction& instr);
Status HandleCopyStart(SpmdContext& ctx, const Instruction& instr);
// handlers/p2p_dynamic.cc: send / recv (and -done) on whole values;
// set-dimension-size keeps its operand's layout but the sized dimension;
// dynamic-reshape on whole values.
Status HandleSendRecv(SpmdContext& ctx, const Instruction& instr);
// collective-broadcast / ragged-all-to-all: as written in a manual region,
// else as the collectives written in the input.
Status HandleGroupCollective(SpmdContext& ctx, const Instruction& instr);
Status HandleSetDimensionSize(SpmdContext& ctx, const Instruction& instr);
Status HandleDynamicReshape(SpmdContext& ctx, const Instruction& instr);
Status HandleAsyncCollective(SpmdContext& ctx, const Instruction& instr);

}  // namespace meshsplit::spmd
