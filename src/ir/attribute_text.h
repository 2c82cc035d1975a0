// Reading the value text of uninterpreted attributes (Attributes::extra),
// which the parser keeps verbatim: the integer lists of ragged-dot's
// lhs_ragged_dims / rhs_group_dims and fft's fft_length, read by shape
// inference, the interpreter and the partitioner alike, and frontend
// attributes (instructions' and the module's). The text can come from a
// user's file, so every malformation is an error, never an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/instruction.h"
#include "support/source_loc.h"
#include "support/status.h"

namespace meshsplit {

// Parses `{1,2,3}`: braces around comma-separated decimal integers (a
// leading '-' allowed), spaces anywhere between tokens, nothing after the
// closing brace; `{}` is the empty list. Every value must fit in int64; the
// caller checks ranges (dims against a rank, lengths positive). On bad text
// the error names the attribute `name` and the culprit, e.g. "lhs_ragged_dims=
// {1,,2}: expected a number (character 4)". It is located at the culprit in
// the source when `loc` is the location of an instruction whose source line
// spells `name=text`; otherwise at `loc` itself.
StatusOr<std::vector<int64_t>> ParseIntListAttribute(std::string_view name, std::string_view text,
                                                     const SourceLoc& loc = {});

// The integer list of `instr`'s uninterpreted attribute `name` (located at
// the instruction, the message naming it); an absent attribute is the empty
// list, as `{}` would be.
StatusOr<std::vector<int64_t>> ReadIntListAttribute(const Instruction& instr,
                                                    const std::string& name);

class Module;

// Frontend attributes, XLA's `{key="value", key2="value2"}` (on an
// instruction or in the module header): the pairs in text order, values
// unescaped. A value may also be a brace-balanced JSON dict (`key={...}`),
// which XLA keeps as its text; it is returned with its braces. nullopt when
// `text` does not have that form (XLA's parser would refuse it).
using FrontendAttributePairs = std::vector<std::pair<std::string, std::string>>;
std::optional<FrontendAttributePairs> ParseFrontendAttributes(std::string_view text);
// The inverse: every value quoted, with `"` and `\` escaped (a JSON dict
// value becomes a string holding the same text, which is what XLA stores).
std::string FormatFrontendAttributes(const FrontendAttributePairs& pairs);

// The module's frontend attribute `key` (the header's
// `frontend_attributes={...}`), or nullopt when absent.
std::optional<std::string> ModuleFrontendAttribute(const Module& module, std::string_view key);
// Sets (or replaces) the module's frontend attribute `key`, keeping the
// others and their order; creates the header attribute if needed.
void SetModuleFrontendAttribute(Module& module, std::string_view key, const std::string& value);

// The module frontend attribute that holds the device mesh named shardings
// and the report use ("data=2,model=4", sharding/mesh.h's text form). XLA's
// parser has no `mesh=` header attribute, so the mesh travels here.
inline constexpr char kModuleMeshAttribute[] = "meshsplit.mesh";

}  // namespace meshsplit
