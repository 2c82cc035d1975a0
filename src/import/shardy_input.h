// Reads the shardings of Shardy-era HLO (JAX with the Shardy partitioner,
// the default since JAX 0.7): XLA's sdy round-trip export leaves them as
// `xla.sdy.*` frontend attributes and custom-calls, which this pass lowers to
// the GSPMD form the rest of meshsplit reads (docs/inputs.md has the table).
// LoadModule runs it on every HLO text, before the verifier, so every command
// sees the lowered module.
#pragma once

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

// Lowers every `xla.sdy.*` attribute and custom-call of `module` in place:
//  - the module's `xla.sdy.meshes` give the meshes; num_partitions becomes
//    their device count, and a single named mesh is kept as the `mesh=`
//    header (the named mesh of hand-written HLO, which the report reads);
//  - `xla.sdy.sharding` on an instruction becomes its `sharding=` (an
//    existing `sharding=` must agree);
//  - `xla.sdy.FuncResultSharding` becomes the entry result's sharding;
//  - `Sharding` custom-calls take their sharding from `xla.sdy.sharding`,
//    open dims without axes becoming `unspecified_dims`;
//  - `xla.sdy.GlobalToLocalShape` / `xla.sdy.LocalToGlobalShape` around a
//    call of a shard_map body become Sharding + SPMDFullToShardShape /
//    SPMDShardToFullShape custom-calls with manual (subgroup) shardings,
//    and the body is inlined.
// Returns whether anything changed. Anything it does not understand (an
// unknown `xla.sdy.*` key or target, unreduced axes, a malformed text, a
// sharding whose rank or mesh does not fit) is an error located at the
// instruction (or the module header) naming the attribute; nothing is
// dropped silently.
StatusOr<bool> ImportShardy(Module& module);

}  // namespace meshsplit
