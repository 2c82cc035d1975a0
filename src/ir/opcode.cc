// Opcode facts from opcodes.def.
#include "ir/opcode.h"

namespace meshsplit {

std::string_view OpcodeName(Opcode op) {
  switch (op) {
#define MS_OPCODE(e, s, a, f) \
  case Opcode::e:             \
    return s;
#include "ir/opcodes.def"
#undef MS_OPCODE
  }
  return "?";
}

std::optional<Opcode> ParseOpcode(std::string_view name) {
#define MS_OPCODE(e, s, a, f) \
  if (name == s) return Opcode::e;
#include "ir/opcodes.def"
#undef MS_OPCODE
  // XLA also accepts the long spelling of the optimisation barrier.
  if (name == "optimization-barrier") return Opcode::kOptimizationBarrier;
  return std::nullopt;
}

int OpcodeArity(Opcode op) {
  switch (op) {
#define MS_OPCODE(e, s, a, f) \
  case Opcode::e:             \
    return a;
#include "ir/opcodes.def"
#undef MS_OPCODE
  }
  return -1;
}

OpcodeFamily GetOpcodeFamily(Opcode op) {
  switch (op) {
#define MS_OPCODE(e, s, a, f) \
  case Opcode::e:             \
    return OpcodeFamily::f;
#include "ir/opcodes.def"
#undef MS_OPCODE
  }
  return OpcodeFamily::kControl;
}

bool IsElementwise(Opcode op) {
  OpcodeFamily f = GetOpcodeFamily(op);
  return f == OpcodeFamily::kElementwiseUnary ||
         f == OpcodeFamily::kElementwiseBinary ||
         f == OpcodeFamily::kElementwiseTernary;
}

}  // namespace meshsplit
