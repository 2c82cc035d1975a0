// Analytical cost model: per-device FLOPs, memory traffic, collective traffic
// and peak live memory of a module, computed exactly from the program (no
// profiling). Works on partitioned modules (shapes are per device) and on
// unpartitioned ones (the whole program on one device). Rules: docs/report.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/module.h"
#include "sharding/mesh.h"

namespace meshsplit {

struct CostOptions {
  // When set, collectives are attributed to the mesh axes their replica
  // groups span. Only meshes of num_partitions devices are used.
  const Mesh* mesh = nullptr;
};

// One collective instruction of the program.
struct CollectiveCost {
  const Instruction* instr = nullptr;
  std::string kind;         // "all-reduce", "all-gather", ...
  std::string instruction;  // its name
  std::string computation;  // computation holding it
  int64_t operand_bytes = 0;
  int64_t result_bytes = 0;
  // Bytes one device sends per execution under a ring algorithm.
  double wire_bytes = 0;
  // Devices per replica group; collective-permute: number of
  // source->target pairs.
  int64_t group_size = 1;
  // Executions per program run (trip counts of enclosing loops).
  int64_t count = 1;
  // Mesh axes the group spans ("model", "data,model"); collective-permute:
  // the axes its pairs move along; "" when unknown.
  std::string mesh_axes;
};

// Bytes one member of a collective of `group_size` devices sends per
// execution under a ring algorithm: all-reduce 2(n-1)/n of its operand,
// all-gather (n-1)/n of its result, reduce-scatter and all-to-all (n-1)/n of
// the operand, anything else (collective-permute, broadcast) the operand once.
// `op` is the synchronous form (SyncCollectiveOf). The cost model and the
// partitioner's reshard estimate (partitioner/reshard.h) both count with it.
double CollectiveWireBytes(Opcode op, int64_t group_size, double operand_bytes,
                           double result_bytes);

// A value live at the point of peak memory.
struct MemoryHolder {
  std::string name;
  std::string shape;
  int64_t bytes = 0;
  bool is_parameter = false;
  bool is_output = false;  // a buffer the entry root returns (not a parameter)
};

struct ModuleCost {
  int64_t num_partitions = 1;
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  int64_t parameter_bytes = 0;   // entry parameters
  int64_t output_bytes = 0;      // entry root
  int64_t peak_memory_bytes = 0;
  std::vector<CollectiveCost> collectives;
  // Sum over collectives of wire_bytes * count.
  std::map<std::string, double> wire_bytes_by_kind;
  std::map<std::string, double> wire_bytes_by_axis;
  // Values live at the peak, largest first.
  std::vector<MemoryHolder> live_at_peak;
  // Loops whose trip count could not be derived (counted once) and other
  // approximations.
  std::vector<std::string> notes;
};

// FLOPs of one instruction alone (called computations not included).
double InstructionFlops(const Instruction& instr);

// The constant trip count of a while loop, or -1 when not recognisable:
// backend_config known_trip_count, or a condition `compare(gte(param, i),
// constant C)` with the counter starting at a constant and stepping by a
// constant in the body.
int64_t WhileTripCount(const Instruction& while_instr);

// Mesh axes spanned by the devices of `group` ("" when they do not form a
// sub-mesh of whole axes).
std::string MeshAxesOfGroup(const Mesh& mesh, const std::vector<int64_t>& group);

// Mesh axes along which some source->target pair of a collective-permute
// moves ("" when a device is not in the mesh or no pair moves).
std::string MeshAxesOfPairs(const Mesh& mesh,
                            const std::vector<std::pair<int64_t, int64_t>>& pairs);

// One collective instruction as the cost model counts it in a program of
// `num_partitions` partitions (one execution; `computation` left empty), its
// mesh axes named when `mesh` has num_partitions devices.
CollectiveCost CostOfCollective(const Instruction& i, int64_t num_partitions, const Mesh* mesh);

ModuleCost ComputeModuleCost(const Module& module, const CostOptions& options = {});

// When each buffer of a computation is live, in positions of its
// instruction list (inclusive): from its definition (parameters: 0) to its
// last read, through views, tuples and get-tuple-elements; the buffers the
// root returns, and an entry's parameters, to the end (the list's size).
// The cost model's peak is the largest sum of live sizes over positions;
// the exact planner estimates memory from the same ranges.
struct BufferLiveness {
  std::vector<bool> owns;      // per instruction: it defines a buffer (not a view)
  std::vector<int64_t> start;  // per instruction that owns one
  std::vector<int64_t> end;
  std::vector<int64_t> root_buffers;  // instruction indices
};
BufferLiveness ComputeBufferLiveness(const Computation& comp, bool is_entry);

}  // namespace meshsplit
