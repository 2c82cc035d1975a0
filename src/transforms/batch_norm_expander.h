// Batch-norm expansion: rewrites batch-norm-training, -inference and -grad
// into reductions, broadcasts and elementwise ops (XLA's BatchNormExpander
// does the same before partitioning on CPU and GPU). Neither sharding
// propagation nor the partitioner has a rule for the fused ops, so without
// this a batch-sharded network would be gathered whole at every batch norm.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/module.h"
#include "support/status.h"

namespace meshsplit {

// Elements per feature of a batch-norm operand of shape `s`: the product of
// every dim but `feature` (what the statistics average over).
double ElementsPerFeature(const Shape& s, int64_t feature);

// The constant holding the element count per feature that an expanded op
// divides by, with the operand it counts: a transform that changes the
// operand's shape afterwards (batch shrinking) must update the constant.
struct BatchNormDivisor {
  Instruction* constant = nullptr;
  Instruction* operand = nullptr;
  int64_t feature_index = 0;
};

// Expands every batch-norm op of `module` in place; returns how many. The
// replacement of each op keeps its name and sharding. `divisors`, if given,
// receives one entry per expanded op.
StatusOr<int64_t> ExpandBatchNorm(Module& module,
                                  std::vector<BatchNormDivisor>* divisors = nullptr);

}  // namespace meshsplit
