// 8-bit and 4-bit float formats (f8e5m2, f8e4m3fn, ..., f4e2m1fn) for
// constants in HLO text: Literal stores their elements as raw one-byte codes,
// the parser encodes decimal text to a code and the printer decodes it back.
#pragma once

#include <cstdint>

#include "ir/shape.h"

namespace meshsplit::text_internal {

// The value of `code` in format `type` (NaN for NaN codes).
// REQUIRES: type is an f8 or f4 type.
double DecodeMiniFloat(PrimitiveType type, uint8_t code);
// The code nearest to `value` (ties to even); NaN maps to the format's NaN,
// values beyond the largest finite one to infinity where the format has it,
// else to NaN (or the largest value for formats with neither).
uint8_t EncodeMiniFloat(PrimitiveType type, double value);

}  // namespace meshsplit::text_internal
