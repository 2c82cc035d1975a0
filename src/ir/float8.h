// 8-bit float element types (f8e4m3fn, f8e5m2, f8e8m0fnu, ...): exact
// decoding of a one-byte code and round-to-nearest-even encoding, with each
// format's own rules for infinity, NaN, negative zero and overflow. Literals
// store these types as raw codes; the runtime computes in f32 and rounds back
// through these functions, as XLA does.
#pragma once

#include <cstdint>

#include "ir/shape.h"

namespace meshsplit {

// The f8 types (not f4e2m1fn, which is sub-byte).
bool IsF8Type(PrimitiveType t);

// The exact value of `code` (NaN codes give a quiet NaN).
// REQUIRES: IsF8Type(t).
float F8ToF32(PrimitiveType t, uint8_t code);

// The code nearest to `v`, ties to the even code. Beyond the largest finite
// value (after rounding) the result is infinity for the IEEE-like formats
// (f8e5m2, f8e4m3, f8e3m4) and NaN for the finite-only ones (fn, fnuz,
// f8e8m0fnu); infinities likewise. Formats without negative zero (fnuz)
// round tiny negatives to +0. f8e8m0fnu has no sign and no zero: negative
// values are NaN and values below its smallest power of two 2^-127 (zero
// included) round to that smallest value.
// REQUIRES: IsF8Type(t).
uint8_t F64ToF8(PrimitiveType t, double v);
inline uint8_t F32ToF8(PrimitiveType t, float v) { return F64ToF8(t, static_cast<double>(v)); }

// The largest finite value of `t`. REQUIRES: IsF8Type(t).
double F8MaxFinite(PrimitiveType t);

}  // namespace meshsplit
