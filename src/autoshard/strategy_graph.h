// The strategy graph of the exact planner (`autoshard --solver ilp|lp`),
// after Alpa's intra-op pass (Zheng et al. 2022): one node per instruction
// of the entry computation that matters, each with a list of strategies; a
// strategy is one assignment of mesh axes to the factors of the op's sharding
// rule (rules/op_rules.h), which fixes the sharding of its result, the
// shardings its operands must be read in, and its cost per device: compute
// and memory time, plus the all-reduce of partial sums when an axis is on a
// reduction factor. Edges carry the reshard cost from a producer's result
// sharding to the sharding its consumer reads (EstimateReshardSeconds).
//
// Shrinking, so that a 24-layer training step stays small:
// - followers (elementwise ops with one operand that is not a free source,
//   convert, copy) join their producer: same strategy variable, no edge; so
//   does a get-tuple-element of a tuple that only get-tuple-elements read
//   (batch-norm expansion makes them), which is itself no node;
// - free sources (broadcasts of scalars, iota, small constants, and
//   elementwise ops of those) are no nodes: they are built in whatever
//   sharding their consumer reads, costed at the consumer;
// - repeated layers are linked: instructions whose names (digit runs
//   ignored), opcode and operand/result shapes agree share one strategy
//   variable ("class"), and so do the members of one decision group of the
//   parameters (decision_space.h).
// Gathers split their batch dims (with the indices) and the operand dims
// they slice whole. Ops without a usable rule (while, call, conditional,
// scatter, sort, custom-calls, ...) are opaque: one strategy, operands and
// result replicated.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autoshard/decision_space.h"
#include "autoshard/objective.h"
#include "ir/module.h"
#include "support/status.h"

namespace meshsplit::autoshard {

struct NodeStrategy {
  std::string label;                  // "f0=data f3=model", for debugging
  DimsMapping result;                 // sharding of the result
  std::vector<DimsMapping> operands;  // per operand: the sharding it is read in
  double compute_seconds = 0;         // flops / tiles / rate
  double memory_seconds = 0;          // (operands + result) local bytes / bandwidth
  double comm_seconds = 0;            // all-reduce of partial sums
  int64_t result_bytes = 0;           // local result bytes per device
};

struct GraphNode {
  const Instruction* instr = nullptr;
  int cls = -1;  // strategy variable class
  // Indexed like the class's strategies (every member of a class has the
  // same number, with the same meaning).
  std::vector<NodeStrategy> strategies;
  bool opaque = false;
  bool follower = false;  // joined its producer's class
  bool sink = false;      // an entry output read by the caller (instr = root)
  int decision_group = -1;  // parameter / constant of this DecisionSpace group
};

struct StrategyClass {
  std::string label;
  int num_strategies = 0;
  std::vector<int> nodes;
  int decision_group = -1;
};

struct GraphEdge {
  int from = 0;     // producer node
  int to = 0;       // consumer node
  int operand = 0;  // operand index of the consumer
};

// A value of the memory estimate: node `node`'s result, or (operand >= 0)
// the free source it reads as that operand, in the sharding it reads it.
struct LiveValue {
  int node = -1;
  int operand = -1;
  bool operator==(const LiveValue& o) const { return node == o.node && operand == o.operand; }
  bool operator!=(const LiveValue& o) const { return !(*this == o); }
};

struct StrategyGraph {
  const Mesh* mesh = nullptr;
  std::vector<GraphNode> nodes;
  std::vector<StrategyClass> classes;
  std::vector<GraphEdge> edges;
  std::map<const Instruction*, int> node_of;
  // Sizes, for the report.
  int64_t instructions = 0;  // of the entry computation
  int64_t followers = 0;
  int64_t free_sources = 0;
  int64_t opaque = 0;
  int64_t strategies = 0;  // sum over classes
  // Entry outputs (root operands) with a node, for the memory estimate.
  std::vector<int> outputs;
  // The memory estimate's other term: per program point where a buffer dies
  // and at the end (the only points where the live set can be largest), the
  // values live there, in the cost model's ranges (ComputeBufferLiveness).
  // Entry parameters are left out: they live throughout and are counted
  // once. Views own no buffer; free sources count as their first reader
  // with a node reads them.
  std::vector<std::vector<LiveValue>> live_sets;
};

struct StrategyGraphOptions {
  bool link_layers = true;
  // Constants smaller than this that are not decided are free sources.
  int64_t free_constant_bytes = 1 << 20;
};

// Builds the graph of `module`'s entry computation. Decided parameters and
// constants (in `space`) take their group's options, in order, as strategies,
// so a solution maps back onto a Choice.
StatusOr<StrategyGraph> BuildStrategyGraph(const Module& module, const DecisionSpace& space,
                                           const MachineModel& machine,
                                           const StrategyGraphOptions& options = {});

// Local bytes of a value of `shape` laid out by `mapping` on `mesh`.
int64_t LocalBytes(const Shape& shape, const DimsMapping& mapping, const Mesh& mesh);

// Estimated seconds to move a value of `shape` from `from` to `to`: the
// collectives the partitioner's Reshard emits for that move (PlanReshard,
// the one reshard the program will run), each priced as the objective
// prices it (MachineModel::CollectiveSeconds: link bandwidth and latency, or
// a calibrated profile's rate for its kind and mesh axes). A move by local
// slices costs nothing; a move Reshard cannot make costs kNoReshardPath.
constexpr double kNoReshardPath = 1.0;
double EstimateReshardSeconds(const Shape& shape, const DimsMapping& from,
                              const DimsMapping& to, const Mesh& mesh,
                              const MachineModel& machine);

}  // namespace meshsplit::autoshard
