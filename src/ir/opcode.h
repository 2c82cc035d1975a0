// The Opcode enum and its per-opcode facts, generated from opcodes.def.
#pragma once

#include <optional>
#include <string_view>

namespace meshsplit {

enum class Opcode {
#define MS_OPCODE(e, s, a, f) e,
#include "ir/opcodes.def"
#undef MS_OPCODE
};

enum class OpcodeFamily {
  kLeaf,
  kElementwiseUnary,
  kElementwiseBinary,
  kElementwiseTernary,
  kDataMovement,
  kReduction,
  kContraction,
  kControl,
  kCollective,
};

std::string_view OpcodeName(Opcode op);  // "get-tuple-element"
std::optional<Opcode> ParseOpcode(std::string_view name);
int OpcodeArity(Opcode op);  // -1 = variadic
OpcodeFamily GetOpcodeFamily(Opcode op);
bool IsElementwise(Opcode op);  // unary, binary or ternary family
inline constexpr int kNumOpcodes = 0
#define MS_OPCODE(e, s, a, f) +1
#include "ir/opcodes.def"
#undef MS_OPCODE
    ;

}  // namespace meshsplit
