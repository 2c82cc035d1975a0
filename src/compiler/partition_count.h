// How many partitions a module is compiled for, and whether its shardings fit
// that count. Compile() (compile.h) calls both, so every command and the
// planner settle the count by the same rule.
#pragma once

#include <cstdint>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

// The partition count the module's shardings name: the largest tile
// assignment (data and subgroup dims together), or one past the largest
// maximal device; 1 when no sharding names a device.
int64_t PartitionsNamedByShardings(const Module& module);

// Settles the module's num_partitions when neither the caller (`requested`
// > 0: --num-partitions) nor the header nor a mesh gave one (the module's
// count is still 1): the count its shardings name.
void DerivePartitionCount(Module& module, int64_t requested);

// Every tiled sharding must span exactly `n` partitions before the module is
// partitioned. One that
// spans fewer (a module sharded for 4 devices partitioned for 8) would leave
// the other devices computing values nobody defined; the error says how a
// spec lifts the shardings onto the bigger mesh (`existing_axes`,
// docs/shard_spec.md). Located at the first offending instruction.
Status CheckShardingsCoverPartitions(const Module& module, int64_t n);

}  // namespace meshsplit
