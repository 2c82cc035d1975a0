// The instruction and module attributes XLA's HLO parser accepts
// (xla/hlo/parser/hlo_parser.cc: ParseHloModule, ParseInstructionRhs and
// CreateInstruction's per-opcode tables), for `--xla-strict` parsing. Our
// parser reads more (it keeps unknown attributes verbatim); strict mode
// refuses what XLA would.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/opcode.h"

namespace meshsplit::text_internal {

// True when XLA's parser takes attribute `name` on an instruction of `op`:
// the attributes every instruction may carry (sharding, metadata,
// frontend_attributes, backend_config, control-predecessors, ...) or one of
// `op`'s own. `async_sugar`: the instruction is the `<op>` of an
// `<op>-start`, which also takes the async-start attributes.
bool XlaAcceptsAttribute(Opcode op, std::string_view name, bool async_sugar = false);

// `op`'s own attributes as XLA spells them, for the error message
// ("" when it has none beyond the common ones).
std::string XlaOpcodeAttributeList(Opcode op);

// True when XLA's parser takes `key=` in the `HloModule name, ...` header.
bool XlaAcceptsModuleAttribute(std::string_view key);

}  // namespace meshsplit::text_internal
