// SpmdBuilder: appends the instructions of the partitioned program to one
// output computation — arithmetic on partition-id, pads, slices, masks and
// the collectives that Reshard emits. Shapes are computed here, so callers
// never spell a local shape by hand.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/computation.h"
#include "ir/module.h"
#include "sharding/sharding.h"
#include "support/status.h"

namespace meshsplit {

// One level of "why is this code being emitted": the input instruction being
// partitioned, the op rule a handler applies, or a reshard from one sharding
// to another. Frames only point at their data (nothing is formatted unless a
// collective is emitted), so opening one costs a push and a pop.
struct CauseFrame {
  enum class Kind { kInstruction, kRule, kReshard };
  Kind kind = Kind::kInstruction;
  const Instruction* instr = nullptr;  // kInstruction (input module), kRule: the op
  const char* rule = nullptr;          // kRule: static text
  const Instruction* value = nullptr;  // kReshard: the partitioned value moved
  const Sharding* from = nullptr;      // kReshard
  const Sharding* to = nullptr;        // kReshard
};

// The frontend attributes under which every collective the builder emits
// records its cause (innermost frame of each kind); they survive
// print -> parse. Read by src/cost/collective_cause.cc.
inline constexpr char kCauseInstrAttr[] = "ms_instr";      // input instruction
inline constexpr char kCauseOpAttr[] = "ms_op";            // its opcode
inline constexpr char kCauseRuleAttr[] = "ms_rule";        // "dot: contracting dims ..."
inline constexpr char kCauseReshardAttr[] = "ms_reshard";  // "FROM -> TO"
inline constexpr char kCauseValueAttr[] = "ms_value";      // output value resharded

// Module-wide state shared by the builders of every computation: reducer
// computations (one per opcode and type) and channel ids.
struct SpmdModuleState {
  Module* module = nullptr;
  int64_t next_channel_id = 1;
  std::map<std::string, Computation*> reducers;
  // Reducers made while partitioning; the driver adds them to the module
  // before the computations that call them.
  std::vector<std::unique_ptr<Computation>> new_computations;
  // The first error found while emitting code that cannot fail loudly at
  // its call site (e.g. a reshard with no path); the driver reports it.
  Status error;
  // Open provenance scopes, outermost first (shared across computations, so
  // a loop body's collectives sit inside the while's scope).
  std::vector<CauseFrame> causes;
};

class SpmdBuilder {
 public:
  SpmdBuilder(SpmdModuleState* state, Computation* comp)
      : state_(state), comp_(comp) {}

  Computation* computation() const { return comp_; }
  // Records an error (the first one wins); see SpmdModuleState::error.
  void SetError(Status s) {
    if (state_->error.ok()) state_->error = std::move(s);
  }
  const Status& error() const { return state_->error; }
  Module* module() const { return state_->module; }
  // The module-wide state (builders of called computations share it).
  SpmdModuleState& state() const { return *state_; }

  // Appends an instruction with a fresh name derived from `name`.
  Instruction* Add(Opcode op, Shape shape, std::vector<Instruction*> operands,
                   const std::string& name = "");
  // Appends a fully built instruction (its name must be unique already).
  Instruction* AddInstruction(std::unique_ptr<Instruction> instr);

  // Scalars and constants.
  Instruction* ConstantLiteral(Literal literal, const std::string& name = "constant");
  Instruction* ScalarConstant(PrimitiveType type, double value);
  // s32 scalar constants are shared within a computation.
  Instruction* ScalarS32(int64_t value);
  // The additive identity / zero of `type` (false for pred).
  Instruction* Zero(PrimitiveType type) { return ScalarConstant(type, 0); }

  // partition-id() as s32, created once per computation.
  Instruction* PartitionIdS32();

  // Elementwise on equal shapes (result type of `a`, pred for compare).
  Instruction* Binary(Opcode op, Instruction* a, Instruction* b);
  Instruction* Compare(Instruction* a, Instruction* b, ComparisonDirection dir);
  Instruction* Select(Instruction* pred, Instruction* on_true, Instruction* on_false);
  Instruction* Convert(Instruction* x, PrimitiveType type);

  // Shape ops.
  Instruction* Broadcast(Instruction* x, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& broadcast_dims);
  // Broadcast of a scalar to `dims`.
  Instruction* BroadcastScalar(Instruction* scalar, const std::vector<int64_t>& dims) {
    return Broadcast(scalar, dims, {});
  }
  Instruction* Reshape(Instruction* x, const std::vector<int64_t>& dims);
  Instruction* Transpose(Instruction* x, const std::vector<int64_t>& perm);
  Instruction* Slice(Instruction* x, const std::vector<int64_t>& starts,
                     const std::vector<int64_t>& limits);
  // Pads the end of each dim with `high[i]` copies of a zero of x's type.
  Instruction* PadHigh(Instruction* x, const std::vector<int64_t>& high);
  Instruction* DynamicSlice(Instruction* x, const std::vector<Instruction*>& starts,
                            const std::vector<int64_t>& sizes);
  Instruction* Iota(PrimitiveType type, const std::vector<int64_t>& dims, int64_t dim);

  // Collectives over partitions. `groups` come from Sharding::GroupsAlongDims
  // and stay in iota form when they are.
  Instruction* AllReduce(Instruction* x, const DeviceGroups& groups, Computation* reducer);
  Instruction* AllGather(Instruction* x, int64_t dim, const DeviceGroups& groups);
  Instruction* AllToAll(Instruction* x, int64_t dim, const DeviceGroups& groups);
  Instruction* ReduceScatter(Instruction* x, int64_t dim, const DeviceGroups& groups,
                             Computation* reducer);
  Instruction* CollectivePermute(Instruction* x,
                                 std::vector<std::pair<int64_t, int64_t>> pairs);

  // Provenance scope (RAII): while it lives, every collective emitted records
  // it (see CauseFrame). Scopes must nest (destroyed in reverse order).
  class ScopedCause {
   public:
    // The input instruction being partitioned (the driver).
    ScopedCause(SpmdBuilder& b, const Instruction& input);
    // An op rule of a handler, e.g. (dot, "contracting dims sharded -> partial
    // sums"). REQUIRES: `rule` outlives the scope (a literal).
    ScopedCause(SpmdBuilder& b, const Instruction& op, const char* rule);
    // A reshard of `value` (this partition's piece) from `from` to `to`.
    // REQUIRES: the shardings outlive the scope.
    ScopedCause(SpmdBuilder& b, const Instruction* value, const Sharding& from,
                const Sharding& to);
    ~ScopedCause() { causes_->pop_back(); }
    ScopedCause(const ScopedCause&) = delete;
    ScopedCause& operator=(const ScopedCause&) = delete;

   private:
    std::vector<CauseFrame>* causes_;
  };

  // A scalar reducer computation `op` over `type` in the module (created once).
  Computation* Reducer(Opcode op, PrimitiveType type);

  // Tile-assignment index of this partition along every dim of `ta`, as s32
  // scalars computed from partition-id: divide/remainder by the mixed radix
  // of the iota form (O(rank) instructions, whatever the device count), or a
  // table lookup for explicit arrays. Cached per computation.
  const std::vector<Instruction*>& TileIndices(const TileAssignment& ta);

 private:
  // Writes the open provenance scopes onto a collective just emitted.
  void RecordCause(Instruction* collective) const;

  SpmdModuleState* state_;
  Computation* comp_;
  Instruction* partition_id_ = nullptr;
  std::map<std::string, std::vector<Instruction*>> tile_index_cache_;
  std::map<int64_t, Instruction*> s32_constants_;
};

// replica_groups of a collective over the rows of `groups`.
ReplicaGroups ToReplicaGroups(const DeviceGroups& groups);

}  // namespace meshsplit
