// A seeded generator of random, well-typed HLO modules with random shardings,
// for differential testing of propagation + partitioning against the
// single-device interpreter (verify/verify.h). Modules are small DAGs of
// elementwise, broadcast, reshape, transpose, reduce, dot, iota, constant,
// select, compare, convert, slice, concatenate, gather and scatter ops (and
// more, see kKinds) over shapes that often
// do not divide by the tile counts; shardings are tiled on random dims,
// partially replicated, replicated or maximal, on meshes of 1..16 devices
// with iota, transposed-iota (two- and three-way) or permuted device orders.
// The generator emits
// HLO text, which is what a failing test prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "verify/verify.h"

namespace meshsplit {

struct RandomModuleOptions {
  int64_t min_ops = 4;
  int64_t max_ops = 14;
  int64_t max_rank = 3;
  int64_t max_dim = 7;        // dims are 1..max_dim (non-divisible on purpose)
  int64_t max_devices = 16;   // meshes of 1..max_devices devices
  // Probability that a non-parameter instruction gets a sharding annotation.
  double annotate_probability = 0.3;
};

struct RandomCase {
  uint64_t seed = 0;
  std::string text;            // the HLO module (header has num_partitions)
  int64_t num_partitions = 1;
  bool propagate = true;       // run sharding propagation before partitioning
  std::vector<std::string> ops;  // op kinds used, for failure triage
};

// One op kind of the generator. Kinds can be switched off (with a reason)
// when the partitioner is known to mishandle them, so the remaining ones keep
// being tested; see kRandomOpKinds in random_module.cc.
struct RandomOpKind {
  const char* name;
  bool enabled;
  const char* disabled_reason;  // why it is off (empty when enabled)
};
const std::vector<RandomOpKind>& RandomOpKinds();

// The case for `seed`: a pure function of seed and options.
RandomCase GenerateRandomCase(uint64_t seed, const RandomModuleOptions& options = {});

// The VerifyOptions that check case `c` (a RandomCase, or a corpus case such
// as PartitioningCase: anything with num_partitions and propagate) on inputs
// drawn from `seed`; every other field keeps its default.
template <typename Case>
VerifyOptions VerifyOptionsFor(const Case& c, uint64_t seed) {
  VerifyOptions options;
  options.num_partitions = c.num_partitions;
  options.seed = seed;
  options.propagate = c.propagate;
  return options;
}

}  // namespace meshsplit
