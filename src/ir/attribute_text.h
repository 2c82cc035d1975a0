// Reading the value text of uninterpreted attributes (Attributes::extra),
// which the parser keeps verbatim: the integer lists of ragged-dot's
// lhs_ragged_dims / rhs_group_dims and fft's fft_length, read by shape
// inference, the interpreter and the partitioner alike. The text can come
// from a user's file, so every malformation is an error, never an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <string_view>
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

// The key="value" pairs of a frontend_attributes text `{k="v", k2="v2"}`
// in order, the values unescaped (a backslash takes the next character
// literally, as for `\"` and `\\`); nullopt when the text has another form.
using FrontendAttributePairs = std::vector<std::pair<std::string, std::string>>;
std::optional<FrontendAttributePairs> ParseFrontendAttributes(std::string_view text);
// The inverse: `{k="v",...}` with quotes and backslashes escaped.
std::string FormatFrontendAttributes(const FrontendAttributePairs& pairs);

}  // namespace meshsplit
