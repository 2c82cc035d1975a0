// The element-wise reduction kernel every collectives backend uses, so that
// all backends combine contributions with the same arithmetic in the same
// order (see "Fixed reduction order" in collectives.h).
#pragma once

#include <cstdint>
#include <span>

#include "collectives/collectives.h"

namespace meshsplit {

// out[i] = ((in[0][i] op in[1][i]) op in[2][i]) ... op in[n-1][i] for i in
// [0, count), with the element arithmetic documented in collectives.h.
// `out` may alias any input exactly (same address); partial overlaps are not
// allowed. REQUIRES: CheckReduction(type, kind).ok(), !inputs.empty().
void ReduceInOrder(ReductionKind kind, PrimitiveType type,
                   std::span<const void* const> inputs, void* out,
                   int64_t count);

// The same, storing the result into every buffer of `outputs` (a reduction
// followed by a broadcast, in one pass over the inputs). Each output may
// alias an input exactly. REQUIRES: !outputs.empty().
void ReduceInOrder(ReductionKind kind, PrimitiveType type,
                   std::span<const void* const> inputs,
                   std::span<void* const> outputs, int64_t count);

}  // namespace meshsplit
