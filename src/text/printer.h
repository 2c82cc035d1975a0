// Module -> canonical HLO text. ParseModule(PrintModule(m)) prints the same
// text again (the round-trip fixed point the corpus test checks).
#pragma once

#include <optional>
#include <string>

#include "ir/module.h"

namespace meshsplit {

struct PrintOptions {
  // Print metadata={...} attributes (kept verbatim from the input).
  bool print_metadata = true;
  // Print operand shapes inline: `add(f32[2] %a, f32[2] %b)`.
  bool print_operand_shapes = false;
};

std::string PrintModule(const Module& module, const PrintOptions& options = {});
std::string PrintComputation(const Computation& computation,
                             const PrintOptions& options = {});
std::string PrintInstruction(const Instruction& instruction,
                             const PrintOptions& options = {});

// The one value of a constant array of more than 64 elements that are all
// equal, as a scalar (printed as a broadcast of it); nullopt otherwise.
std::optional<Literal> SplatValue(const Instruction& instr);

}  // namespace meshsplit
