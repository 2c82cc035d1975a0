// Shape rules of fusion and the asynchronous opcode pairs (async-start /
// async-update / async-done, all-reduce-, all-gather-, collective-permute-
// and copy- start / done), used by InferShape. Errors carry no location and
// no op prefix; InferShape adds both.
#pragma once

#include "ir/instruction.h"
#include "ir/shape.h"
#include "support/status.h"

namespace meshsplit {

// fusion, async-*, the collective and copy -done ops and copy-start.
StatusOr<Shape> InferAsyncOrFusionShape(const Instruction& instr);

// A collective start's shape given `sync_result`, the shape its sync
// collective would have: all-reduce-start has it as is; all-gather-start is
// (operand(s), result); collective-permute-start is (operand, result,
// context...).
StatusOr<Shape> InferCollectiveStartShape(const Instruction& instr, const Shape& sync_result);

// all-reduce for all-reduce-start, all-gather for all-gather-start,
// collective-permute for collective-permute-start; any other opcode as is.
Opcode SyncCollectiveOf(Opcode op);

// The part of a collective start's declared shape its sync collective
// would declare (element 1 of the all-gather / collective-permute start
// tuples; the whole shape otherwise).
const Shape& DeclaredStartResult(const Instruction& instr);

}  // namespace meshsplit
