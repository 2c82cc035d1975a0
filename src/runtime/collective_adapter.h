// CollectiveAdapter: the runtime's CollectiveOps (what the interpreter calls
// for all-reduce, all-gather, reduce-scatter, all-to-all and
// collective-permute) implemented on one device's Communicator. It turns the
// instruction's attributes (replica_groups, dimensions, source_target_pairs,
// to_apply) into the Communicator's raw-buffer calls.
//
// Group ids are partition ids: the partitioned programs we run have
// replica_count=1, so XLA's cross-partition and flattened-id modes name the
// same devices, and we read cross-replica groups (no channel_id) the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "runtime/collective_ops.h"

namespace meshsplit {

// Classifies a reduction computation (two scalar parameters combined by one
// add / multiply / minimum / maximum / and / or / xor) into a ReductionKind.
// nullopt when the computation is anything else.
std::optional<ReductionKind> ClassifyReduction(const Computation* computation);

// The communication groups of a collective: replica_groups expanded (iota or
// explicit); an absent or empty list means all devices.
CommGroups GroupsOf(const Instruction& instr);

class CollectiveAdapter : public CollectiveOps {
 public:
  explicit CollectiveAdapter(Communicator& comm) : comm_(comm) {}

  // XLA's reading of a collective without channel_id (and, for the
  // reductions and gathers, without use_global_device_ids): it runs across
  // replicas, and with one replica each group has this device alone, so it
  // returns its operand (collective-permute: its operand if the pairs send
  // replica 0 to itself, else zeros). Off by default: hand-written
  // partitioned modules in tests omit channel ids and mean partitions. The
  // partitioner always sets channel ids on the collectives it emits.
  void set_single_replica(bool on) { single_replica_ = on; }

  StatusOr<Literal> AllReduce(const Instruction& instr,
                              const std::vector<const Literal*>& operands,
                              const EvalContext& ctx) override;
  StatusOr<Literal> AllGather(const Instruction& instr,
                              const std::vector<const Literal*>& operands,
                              const EvalContext& ctx) override;
  StatusOr<Literal> ReduceScatter(const Instruction& instr,
                                  const std::vector<const Literal*>& operands,
                                  const EvalContext& ctx) override;
  StatusOr<Literal> AllToAll(const Instruction& instr,
                             const std::vector<const Literal*>& operands,
                             const EvalContext& ctx) override;
  StatusOr<Literal> CollectivePermute(const Instruction& instr,
                                      const std::vector<const Literal*>& operands,
                                      const EvalContext& ctx) override;

 private:
  // Size of this device's group (checking the groups on the way).
  StatusOr<int64_t> GroupSize(const Instruction& instr, const CommGroups& groups,
                              bool require_equal_sizes);

  // The single-replica result of a cross-replica collective (see
  // set_single_replica); nullopt when the collective is cross-partition.
  std::optional<StatusOr<Literal>> SingleReplica(const Instruction& instr,
                                                 const std::vector<const Literal*>& operands);

  Communicator& comm_;
  bool single_replica_ = false;
};

}  // namespace meshsplit
