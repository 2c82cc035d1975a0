// A sharding-mutation fuzzer for the partitioner: takes real modules (a
// partitioning corpus laid out like conformance/xla/partitioning, or one
// file), rewrites the `sharding=` annotations of some instructions with other
// valid shardings for the device count (replicated, maximal, tiled with tile
// counts that need not divide the dims, partially replicated, iota,
// transposed-iota and permuted device orders), drops some so that
// propagation must fill them, and verifies each variant through the
// partitioning conformance runner (verify/conformance_partitioning.h): same
// header semantics, same fork isolation, time and memory limits. Everything
// is a pure function of the seed, the case name and the variant index.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/module.h"
#include "verify/conformance_partitioning.h"
#include "support/status.h"

namespace meshsplit {

// One rewritten (or dropped) annotation of a variant.
struct ShardingMutation {
  std::string instruction;  // name without '%'
  std::string before;       // sharding text, "" when it had none
  std::string after;        // sharding text, "" when dropped
};

// Rewrites shardings of `module` in place for `num_partitions` devices
// (which may differ from the module's own count; then every annotation is
// rewritten) with the generator seeded by `seed`. Never touches manual
// regions' boundaries, shard groups or token values. Returns what changed
// (at least one annotation when any instruction qualifies).
std::vector<ShardingMutation> MutateShardings(Module& module, int64_t num_partitions,
                                              uint64_t seed);

// "" when `module` can be mutated; else why not (manual regions,
// collectives, partition-id: values whose meaning depends on the original
// shardings).
std::string UnmutableReason(const Module& module);

// A failed variant that ran out of time (CPU or wall clock).
bool IsTimeout(const PartitioningCaseResult& r);

// The seed of variant `variant` of case `name` under the run seed `seed`
// (so that one case reproduces alone, with --filter).
uint64_t VariantSeed(uint64_t seed, const std::string& name, int64_t variant);

struct ShardingFuzzOptions {
  uint64_t seed = 0;
  int64_t count = 4;           // variants per case
  int64_t num_partitions = 0;  // > 0: mutate every case to this device count
  // Cases whose name contains one of these (comma-separated; empty = all).
  std::string filter;
  // Where the mutated modules go: every failing variant stays there as
  // <case>.s<seed>.v<variant>.hlo; passing ones are removed unless
  // keep_passing.
  std::string out_dir = "fuzz-shardings-out";
  bool keep_passing = false;
  // Also keep variants whose partitioning fell back to gathering all.
  bool keep_fallbacks = false;
  // Cases whose original needs more than this to run on one device times
  // (devices + 1) (the cost of a fully replicated variant) are shrunk
  // first (transforms/shrink_shapes.h), or skipped when that is not enough.
  int64_t max_case_bytes = int64_t{256} << 20;
  // Per variant, as in the conformance runner: CPU seconds, estimated run
  // bytes (larger variants run at reduced shapes), address-space limit.
  PartitioningConformanceOptions run;
};

struct FuzzVariantResult {
  std::string case_name;
  int64_t variant = 0;
  uint64_t variant_seed = 0;
  std::string file;  // the mutated module (kept when it failed)
  std::vector<ShardingMutation> mutations;
  PartitioningCaseResult result;
  // Reshards of the variant's partitioning that gathered every tiled dim
  // and then sliced (partitioner/reshard.h kFallbackGatherAll), or the
  // differing dims (kFallbackGatherSome): more data moved than the layouts
  // need. Counted when the variant partitioned.
  int64_t gather_all = 0, gather_some = 0;
  // The error of partitioning the variant with strict = true (an op with no
  // rule for its shardings, replicated with a warning otherwise); "" if none.
  std::string strict_error;
};

struct ShardingFuzzSummary {
  int64_t cases = 0;            // cases fuzzed
  int64_t shrunk_cases = 0;     // of those, shrunk first (too large as written)
  int64_t skipped_cases = 0;    // cases not fuzzed (see skipped_case_reasons)
  std::vector<std::pair<std::string, std::string>> skipped_cases_detail;  // name, why
  // Variants. Timeouts (the runner's CPU or wall-clock limit) are counted
  // apart from failures: most are slow interpreter runs of big windows on
  // a loaded machine, not wrong answers; they are listed like failures.
  int64_t passed = 0, failed = 0, skipped = 0, timed_out = 0;
  std::vector<FuzzVariantResult> variants;
};

// Fuzzes one file or every *.hlo case of a directory. A file without a
// `// num_partitions=` header uses options.num_partitions, else its module
// header's num_partitions, and runs propagation. `on_variant` (optional)
// sees each result as soon as it is known.
StatusOr<ShardingFuzzSummary> RunShardingFuzz(
    const std::string& file_or_dir, const ShardingFuzzOptions& options,
    const std::function<void(const FuzzVariantResult&)>& on_variant = nullptr);

}  // namespace meshsplit
