// Shape rules of the point-to-point and dynamic-size opcodes (send, recv,
// send-done, recv-done, collective-broadcast, ragged-all-to-all,
// set-dimension-size, dynamic-reshape), used by InferShape. Also the readers
// of their attributes kept as text. Errors carry no location and no op
// prefix; InferShape adds both.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ir/instruction.h"
#include "ir/shape.h"
#include "support/status.h"

namespace meshsplit {

// Whether `op` is one of the opcodes above.
bool IsP2POrDynamicSizeOpcode(Opcode op);

// Result shape of an instruction whose opcode IsP2POrDynamicSizeOpcode.
// send: (data, u32[] context, token); recv: the declared (data, u32[],
// token); send-done: token; recv-done: (data, token); collective-broadcast:
// its operand; ragged-all-to-all: its output operand (operand 1);
// set-dimension-size: the operand with dimension d marked dynamic (bounded
// by its static size, `<=N`); dynamic-reshape: the declared shape, whose
// static bounds must hold as many elements as the operand.
StatusOr<Shape> InferP2POrDynamicSizeShape(const Instruction& instr);

// is_host_transfer=true on a send / recv (XLA's default: false).
bool IsHostTransfer(const Instruction& instr);

// The pairs of the frontend attribute _xla_send_recv_source_target_pairs
// ("{{0,1},{1,2}}") of a send / recv: nullopt when the attribute is absent;
// an error when it is present but malformed.
StatusOr<std::optional<std::vector<std::pair<int64_t, int64_t>>>> SendRecvSourceTargetPairs(
    const Instruction& instr);

}  // namespace meshsplit
