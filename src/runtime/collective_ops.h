// The interface through which the interpreter performs cross-device
// collectives. The SPMD executor supplies an implementation (threads or MPI
// backend, src/collectives/); with none, the interpreter applies the
// single-device semantics itself (every group has one participant).
#pragma once

#include <optional>
#include <vector>

#include "ir/instruction.h"
#include "ir/literal.h"
#include "support/status.h"

namespace meshsplit {

struct EvalContext;

// Each call is made by one device (ctx.partition_id / ctx.replica_id) with
// its local operand values; implementations match up the calls of every
// device in the instruction's group and return this device's result. The
// instruction gives the replica groups, source-target pairs, dimensions,
// channel id and (for reductions) the to_apply computation. Variadic
// collectives (several operands) return a tuple literal.
class CollectiveOps {
 public:
  virtual ~CollectiveOps() = default;
  virtual StatusOr<Literal> AllReduce(const Instruction& instr,
                                      const std::vector<const Literal*>& operands,
                                      const EvalContext& ctx) = 0;
  virtual StatusOr<Literal> AllGather(const Instruction& instr,
                                      const std::vector<const Literal*>& operands,
                                      const EvalContext& ctx) = 0;
  virtual StatusOr<Literal> ReduceScatter(const Instruction& instr,
                                          const std::vector<const Literal*>& operands,
                                          const EvalContext& ctx) = 0;
  virtual StatusOr<Literal> AllToAll(const Instruction& instr,
                                     const std::vector<const Literal*>& operands,
                                     const EvalContext& ctx) = 0;
  virtual StatusOr<Literal> CollectivePermute(const Instruction& instr,
                                              const std::vector<const Literal*>& operands,
                                              const EvalContext& ctx) = 0;
};

// Optional per-device behaviour for ops whose meaning is not a pure
// function of their operands on one device: the SPMD custom-calls when an
// unpartitioned module runs as N virtual devices (runtime/reference.h), and
// infeed / outfeed. Without hooks the interpreter keeps its single-device
// semantics (SPMD custom-calls are identities, infeed / outfeed refuse).
class DeviceHooks {
 public:
  virtual ~DeviceHooks() = default;
  // A custom-call: nullopt lets the interpreter handle it as usual.
  virtual std::optional<StatusOr<Literal>> CustomCall(const Instruction& instr,
                                                      const std::vector<const Literal*>& operands,
                                                      const EvalContext& ctx) = 0;
  // The (data, token) tuple an infeed returns.
  virtual StatusOr<Literal> Infeed(const Instruction& instr, const EvalContext& ctx) = 0;
  // Receives the data operand of an outfeed.
  virtual Status Outfeed(const Instruction& instr, const Literal& data,
                         const EvalContext& ctx) = 0;
};

}  // namespace meshsplit
