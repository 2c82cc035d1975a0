// Small float formats, described by a few parameters rather than one routine
// each. Encoding searches all codes: these formats have at most 256.
#include "text/minifloat.h"

#include <cmath>

namespace meshsplit::text_internal {

namespace {

enum class NanStyle {
  kIeee,      // all-ones exponent: inf (mantissa 0) or NaN
  kFn,        // no inf; all-ones exponent and mantissa is NaN
  kFnuz,      // no inf, no -0; the code 0x80 is NaN
  kE8M0,      // unsigned exponent only; 0xff is NaN
  kNone,      // no inf, no NaN (f4e2m1fn)
};

struct Format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  NanStyle nan;
};

Format GetFormat(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::F8E5M2: return {5, 2, 15, NanStyle::kIeee};
    case PrimitiveType::F8E4M3: return {4, 3, 7, NanStyle::kIeee};
    case PrimitiveType::F8E3M4: return {3, 4, 3, NanStyle::kIeee};
    case PrimitiveType::F8E4M3FN: return {4, 3, 7, NanStyle::kFn};
    case PrimitiveType::F8E4M3FNUZ: return {4, 3, 8, NanStyle::kFnuz};
    case PrimitiveType::F8E5M2FNUZ: return {5, 2, 16, NanStyle::kFnuz};
    case PrimitiveType::F8E4M3B11FNUZ: return {4, 3, 11, NanStyle::kFnuz};
    case PrimitiveType::F8E8M0FNU: return {8, 0, 127, NanStyle::kE8M0};
    case PrimitiveType::F4E2M1FN: return {2, 1, 1, NanStyle::kNone};
    default: return {4, 3, 7, NanStyle::kFn};
  }
}

int CodeCount(const Format& f) {
  int bits = f.exponent_bits + f.mantissa_bits + (f.nan == NanStyle::kE8M0 ? 0 : 1);
  return 1 << bits;
}

}  // namespace

double DecodeMiniFloat(PrimitiveType type, uint8_t code) {
  Format f = GetFormat(type);
  if (f.nan == NanStyle::kE8M0) {
    if (code == 0xff) return NAN;
    return std::ldexp(1.0, static_cast<int>(code) - f.bias);
  }
  const int sign_shift = f.exponent_bits + f.mantissa_bits;
  code &= static_cast<uint8_t>(CodeCount(f) - 1);
  bool negative = (code >> sign_shift) & 1;
  int exp_max = (1 << f.exponent_bits) - 1;
  int exponent = (code >> f.mantissa_bits) & exp_max;
  int mantissa = code & ((1 << f.mantissa_bits) - 1);
  if (f.nan == NanStyle::kFnuz && code == (1 << sign_shift)) return NAN;
  if (f.nan == NanStyle::kIeee && exponent == exp_max)
    return mantissa == 0 ? (negative ? -INFINITY : INFINITY) : NAN;
  if (f.nan == NanStyle::kFn && exponent == exp_max &&
      mantissa == (1 << f.mantissa_bits) - 1)
    return NAN;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa + (1 << f.mantissa_bits)),
                           exponent - f.bias - f.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

uint8_t EncodeMiniFloat(PrimitiveType type, double value) {
  Format f = GetFormat(type);
  const int n = CodeCount(f);
  int nan_code = -1;
  for (int c = n - 1; c >= 0 && nan_code < 0; --c)
    if (std::isnan(DecodeMiniFloat(type, static_cast<uint8_t>(c)))) nan_code = c;
  if (std::isnan(value)) return static_cast<uint8_t>(nan_code < 0 ? 0 : nan_code);
  int best = -1;
  double best_err = INFINITY;
  double largest = 0;
  for (int c = 0; c < n; ++c) {
    double d = DecodeMiniFloat(type, static_cast<uint8_t>(c));
    if (std::isnan(d)) continue;
    if (std::isfinite(d)) largest = std::max(largest, std::fabs(d));
    if (std::isinf(d) || std::isinf(value)) {
      if (d == value) return static_cast<uint8_t>(c);
      continue;
    }
    double err = std::fabs(d - value);
    // Ties go to the even code; prefer +0 over -0 unless the value is -0.
    bool better = err < best_err ||
                  (err == best_err && best >= 0 && (c & 1) == 0 && (best & 1) == 1) ||
                  (err == best_err && d == 0 && std::signbit(d) == std::signbit(value));
    if (better) {
      best = c;
      best_err = err;
    }
  }
  // Values up to half a step above the largest finite value round down to it.
  double below_largest = 0;
  for (int c = 0; c < n; ++c) {
    double d = std::fabs(DecodeMiniFloat(type, static_cast<uint8_t>(c)));
    if (std::isfinite(d) && d < largest) below_largest = std::max(below_largest, d);
  }
  if (best >= 0 && std::fabs(value) < largest + (largest - below_largest) / 2)
    return static_cast<uint8_t>(best);
  // Out of range: infinity if the format has one, else NaN, else saturate.
  if (f.nan == NanStyle::kIeee) {
    for (int c = 0; c < n; ++c) {
      double d = DecodeMiniFloat(type, static_cast<uint8_t>(c));
      if (std::isinf(d) && (d < 0) == (value < 0)) return static_cast<uint8_t>(c);
    }
  }
  if (nan_code >= 0) return static_cast<uint8_t>(nan_code);
  return static_cast<uint8_t>(best < 0 ? 0 : best);
}

}  // namespace meshsplit::text_internal
