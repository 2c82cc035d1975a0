// The SPMD partitioner: turns a module whose values carry shardings into ONE
// program that every partition runs, with per-partition shapes, collectives
// for the data that must move, and per-device behaviour only through
// partition-id(). Semantics follow XLA's SpmdPartitioner (see DESIGN.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "ir/module.h"
#include "ir/pass.h"
#include "support/status.h"

namespace meshsplit {

struct PartitionOptions {
  // Number of partitions (devices); 0 takes num_partitions from the module
  // header.
  int64_t num_partitions = 0;
  // Turn every fallback (an op partitioned by replicating it) into an error.
  bool strict = false;
  // Print a warning on stderr for every fallback (strict mode errors instead).
  bool warn_on_fallback = true;
  // Windowed einsum (collective matmul): a dot operand whose all-gather
  // would move more than this many bytes per partition is instead passed
  // around its device ring by collective-permute inside a loop, one shard
  // per iteration. Negative: off (the CLI's --windowed-einsum-threshold).
  int64_t windowed_einsum_threshold_bytes = -1;
  // A windowed loop that would run more iterations than this is not used
  // (the operand is gathered / the partial sums reduce-scattered as usual);
  // XLA's max_windowed_einsum_iteration. Default 32, as XLA.
  int64_t max_windowed_einsum_iterations = 32;
  // Windowed loops pass shards (all-gather loop) or running sums
  // (reduce-scatter loop) both ways around the ring, two per iteration
  // (half the iterations); rings of odd size stay one-way. XLA's
  // bidirectional_windowed_einsum.
  bool bidirectional_windowed_einsum = false;
  // Also window a dot whose partial sums would be reduce-scattered: the
  // result blocks' running sums travel around the ring instead (the
  // "reduce-scatter loop"). Applies with the same byte threshold, measured
  // on the partial result.
  bool windowed_einsum_reduce_scatter = false;
};

// REQUIRES: shardings already assigned (propagation ran, or an unannotated
// instruction is taken as replicated). Returns the partitioned module; the
// input is not modified. Errors: shardings that do not fit the shapes or the
// number of partitions, and (strict) ops that would need a fallback.
StatusOr<std::unique_ptr<Module>> PartitionModule(const Module& input,
                                                  const PartitionOptions& options);

// The "partition" pass: replaces the module's computations by the
// partitioned ones.
class PartitionPass : public Pass {
 public:
  explicit PartitionPass(PartitionOptions options = {}) : options_(options) {}
  std::string_view name() const override { return "partition"; }
  StatusOr<bool> Run(Module& module) override;

 private:
  PartitionOptions options_;
};

}  // namespace meshsplit
