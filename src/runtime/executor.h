// The SPMD executor: runs a partitioned module (one program, per-partition
// shapes, collectives over partition ids) on N virtual devices, one
// interpreter per device on its own thread, collectives through the threads
// backend. Full (global) tensors go in and come out: SplitByShardings cuts an
// input into per-device tiles by the entry parameter's sharding and Assemble
// stitches per-device results back by the root's sharding.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ir/literal.h"
#include "collectives/collectives.h"
#include "ir/module.h"
#include "runtime/collective_ops.h"
#include "runtime/interpreter.h"
#include "sharding/sharding.h"
#include "support/status.h"

namespace meshsplit {

// Padding of uneven tiles (elements of a per-device buffer past the end of
// the global array) is filled with a poison value so that a partitioned
// program that forgets to mask padding produces visibly wrong results: NaN
// for floats, a fixed garbage pattern for integers, true for pred.
void FillPoison(Literal& literal);

// Copies the block [offset, limit) of `full` into `local` at its origin;
// nothing when the block is empty (the last tiles of an uneven dim).
void CopyTileOut(const Literal& full, const std::vector<int64_t>& offset,
                 const std::vector<int64_t>& limit, Literal& local);
// The reverse: the block of `local` from its origin goes to [offset, limit)
// of `full`.
void CopyTileIn(const Literal& local, const std::vector<int64_t>& offset,
                const std::vector<int64_t>& limit, Literal& full);
// The block of `local` from its origin to `extent`, packed row-major (to
// compare replicas byte for byte).
std::vector<uint8_t> PackedBlock(const Literal& local, const std::vector<int64_t>& extent);

// Cuts `full` (global shape) into one literal per device (0..num_devices-1)
// of shape `local_shape` by `sharding`:
//  - replicated / manual: every device gets `full` (REQUIRES local == global);
//  - maximal device=k: device k gets `full`, the others poison;
//  - tiled (incl. partial replication): device d gets its tile at offset 0 of
//    `local_shape`; the rest of the buffer (padding) is poison when
//    `poison_padding`, zero otherwise;
//  - tuple shardings apply element-wise to tuple literals (a non-tuple
//    sharding applies to every leaf).
// Errors (never crashes) when shapes and sharding disagree, e.g. a local
// shape that is not the sharding's tile shape.
StatusOr<std::vector<Literal>> SplitByShardings(const Literal& full, const Shape& local_shape,
                                                const Sharding& sharding,
                                                int64_t num_devices,
                                                bool poison_padding = true);

struct AssembleOptions {
  // Check that devices holding the same data (replicated values, replicas of
  // a partially replicated tile) hold bitwise-identical values; a
  // disagreement is an error naming the devices.
  bool check_replicas = true;
};

// Stitches per-device values (one per device, local shapes) into a value of
// `global_shape` by `sharding`: replicated takes device 0's; tiled copies
// each tile from the first device holding it (dropping padding); maximal
// takes that device's. Tuples element-wise.
StatusOr<Literal> Assemble(const std::vector<Literal>& per_device, const Shape& global_shape,
                           const Sharding& sharding, const AssembleOptions& options = {});

struct SpmdRunOptions {
  // Fill the padding of uneven input tiles with poison (NaN / garbage).
  bool poison_padding = true;
  AssembleOptions assemble;
  // OpenBLAS threads per device while the devices run (restored
  // afterwards). -1: the cores split between the devices, at least one each
  // (one device on 2 cores gets 2; N devices never oversubscribe more than
  // N threads can). 0: leave alone.
  int blas_threads_per_device = -1;
  // XLA's single-replica reading of collectives without channel_id
  // (CollectiveAdapter::set_single_replica).
  bool single_replica_collectives = false;
  // EvalContext::stub_opaque_custom_calls on every device.
  bool stub_opaque_custom_calls = false;
  // EvalContext::max_while_iterations on every device.
  int64_t max_while_iterations = kDefaultMaxWhileIterations;
  // Makes device d's hooks (custom-calls, infeed, outfeed) for RunOnDevices;
  // none when empty.
  std::function<std::unique_ptr<DeviceHooks>(int64_t device, Communicator& comm)> make_hooks;
  // When set, resized to the devices; device d's conditionals are traced
  // into (*branch_traces)[d] (EvalContext::branch_trace).
  std::vector<std::vector<BranchRun>>* branch_traces = nullptr;
};

// Runs `partitioned`'s entry on `num_devices` devices with per-device
// arguments (args[d] = device d's parameters) and returns each device's
// result. The first device error (the root cause) is returned.
StatusOr<std::vector<Literal>> RunOnDevices(const Module& partitioned,
                                            std::vector<std::vector<Literal>> args,
                                            int64_t num_devices,
                                            const SpmdRunOptions& options = {});

// Splits full inputs by the partitioned entry's parameter shardings, runs
// on N devices, assembles the result by the root sharding. Parameters or
// root without a sharding are treated as replicated.
StatusOr<Literal> RunSpmd(const Module& partitioned, const std::vector<Literal>& full_inputs,
                          const Shape& global_result_shape, int64_t num_devices,
                          const SpmdRunOptions& options = {});

// Sharding an entry value of the partitioned module is laid out by
// (replicated when it has none).
Sharding ShardingOrReplicated(const Instruction& instr);

}  // namespace meshsplit
