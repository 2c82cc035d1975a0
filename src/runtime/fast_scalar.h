// A compiled form of small scalar computations (sort comparators and the
// like) that evaluates them on raw element bits without allocating Literals
// or going through the interpreter's plan. Only a subset of elementwise ops is
// supported; Compile() refuses anything else so callers fall back to the
// interpreter. Results are bit-identical to the elementwise kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/computation.h"
#include "ir/shape.h"

namespace meshsplit::interp {

class ScalarProgram {
 public:
  // nullopt unless every instruction reachable from the root is a rank-0
  // array of a supported type computed by a supported op.
  static std::optional<ScalarProgram> Compile(const Computation& c);

  // Evaluates with args[i] pointing at the storage of parameter i (an element
  // of type param_type(i)); returns the root's bits, zero-extended.
  uint64_t Run(const void* const* args) const;

  PrimitiveType param_type(int i) const { return param_types_[i]; }
  int param_count() const { return static_cast<int>(param_types_.size()); }
  PrimitiveType root_type() const { return steps_.back().type; }

 private:
  struct Step {
    int op;  // a ScalarOp (fast_scalar.cc)
    PrimitiveType type;  // result type
    PrimitiveType in_type;  // operand 0 type
    int a = -1, b = -1, c = -1;  // operand registers (or parameter number)
    int aux = 0;  // comparison direction / total-order flag / opcode
    uint64_t imm = 0;  // constant bits
  };
  std::vector<Step> steps_;
  std::vector<PrimitiveType> param_types_;
  mutable std::vector<uint64_t> regs_;
};

// Test hook: when false, kernels never use ScalarProgram (the generic
// interpreter path runs instead). Default true.
void SetScalarProgramsEnabled(bool enabled);
bool ScalarProgramsEnabled();

}  // namespace meshsplit::interp
