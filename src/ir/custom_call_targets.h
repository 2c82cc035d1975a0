// custom_call_target strings that more than one module gives a meaning to
// (the interpreter runs the op, the partitioner shards it), kept here once so
// the two cannot drift apart. The partition-invariant rng targets live with
// their record in ir/partitioned_rng.h.
#pragma once

namespace meshsplit {

// The block-scaled dot (lhs, rhs, lhs_scale, rhs_scale): a dot of the
// operands after each is multiplied by its per-block scale; see
// runtime/kernels_block_scaled_dot.cc and partitioner/handlers/block_scaled_dot.cc.
inline constexpr char kBlockScaledDotTarget[] = "__op$block_scaled_dot";

}  // namespace meshsplit
