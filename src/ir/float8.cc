// f8 formats described by four numbers (exponent bits, mantissa bits, bias,
// special-value style); decoding goes through a 256-entry table per type and
// encoding rounds in double, which holds every f32 and f8 value exactly.
#include "ir/float8.h"

#include <array>
#include <cmath>
#include <limits>

namespace meshsplit {
namespace {

enum class Specials {
  kIeee,  // all-ones exponent: infinity (mantissa 0) or NaN
  kFn,    // no infinity; all-ones exponent and mantissa is NaN
  kFnuz,  // no infinity, no -0; the code 0x80 is NaN
  kE8M0,  // exponent only, no sign: 2^(code - 127); 0xff is NaN
};

struct Format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  Specials specials;
};

constexpr int kNumF8 = 8;

int F8Index(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::F8E4M3FN: return 0;
    case PrimitiveType::F8E5M2: return 1;
    case PrimitiveType::F8E4M3: return 2;
    case PrimitiveType::F8E3M4: return 3;
    case PrimitiveType::F8E4M3FNUZ: return 4;
    case PrimitiveType::F8E5M2FNUZ: return 5;
    case PrimitiveType::F8E4M3B11FNUZ: return 6;
    case PrimitiveType::F8E8M0FNU: return 7;
    default: return -1;
  }
}

constexpr Format kFormats[kNumF8] = {
    {4, 3, 7, Specials::kFn},     {5, 2, 15, Specials::kIeee}, {4, 3, 7, Specials::kIeee},
    {3, 4, 3, Specials::kIeee},   {4, 3, 8, Specials::kFnuz},  {5, 2, 16, Specials::kFnuz},
    {4, 3, 11, Specials::kFnuz},  {8, 0, 127, Specials::kE8M0},
};

double Decode(const Format& f, uint8_t code) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (f.specials == Specials::kE8M0) return code == 0xff ? nan : std::ldexp(1.0, code - f.bias);
  const int sign_shift = f.exponent_bits + f.mantissa_bits;
  const bool negative = (code >> sign_shift) & 1;
  const int exp_max = (1 << f.exponent_bits) - 1;
  const int exponent = (code >> f.mantissa_bits) & exp_max;
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  if (f.specials == Specials::kFnuz && code == 0x80) return nan;
  if (f.specials == Specials::kIeee && exponent == exp_max) {
    if (mantissa != 0) return nan;
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  }
  if (f.specials == Specials::kFn && exponent == exp_max &&
      mantissa == (1 << f.mantissa_bits) - 1)
    return nan;
  double magnitude =
      exponent == 0
          ? std::ldexp(mantissa, 1 - f.bias - f.mantissa_bits)
          : std::ldexp(mantissa + (1 << f.mantissa_bits), exponent - f.bias - f.mantissa_bits);
  return negative ? -magnitude : magnitude;
}

struct Tables {
  std::array<std::array<float, 256>, kNumF8> value;
  std::array<double, kNumF8> max_finite;
};

const Tables& GetTables() {
  static const Tables tables = [] {
    Tables t;
    for (int i = 0; i < kNumF8; ++i) {
      t.max_finite[i] = 0;
      for (int c = 0; c < 256; ++c) {
        double v = Decode(kFormats[i], static_cast<uint8_t>(c));
        t.value[i][c] = static_cast<float>(v);
        if (std::isfinite(v)) t.max_finite[i] = std::max(t.max_finite[i], v);
      }
    }
    return t;
  }();
  return tables;
}

uint8_t NanCode(const Format& f) {
  switch (f.specials) {
    case Specials::kIeee: return static_cast<uint8_t>(0x7f);  // all-ones exponent, mantissa != 0
    case Specials::kFn: return 0x7f;
    case Specials::kFnuz: return 0x80;
    case Specials::kE8M0: return 0xff;
  }
  return 0xff;
}

uint8_t EncodeE8M0(double v) {
  if (std::isnan(v) || std::isinf(v)) return 0xff;
  if (v == 0) return 0;  // no zero: the nearest value is the smallest
  if (v < 0) return 0xff;
  int e;
  double frac = std::frexp(v, &e);  // v = frac * 2^e, frac in [0.5, 1)
  int exponent = e - 1;             // v = (2 * frac) * 2^exponent
  double m = 2 * frac;              // in [1, 2)
  if (exponent < -127) return 0;
  int code = exponent + 127;
  // Between 2^x and 2^(x+1) the midpoint is 1.5 * 2^x; ties go to the even code.
  if (m > 1.5 || (m == 1.5 && (code & 1))) ++code;
  if (code > 254) return 0xff;
  return static_cast<uint8_t>(code);
}

}  // namespace

bool IsF8Type(PrimitiveType t) { return F8Index(t) >= 0; }

float F8ToF32(PrimitiveType t, uint8_t code) { return GetTables().value[F8Index(t)][code]; }

double F8MaxFinite(PrimitiveType t) { return GetTables().max_finite[F8Index(t)]; }

uint8_t F64ToF8(PrimitiveType t, double v) {
  const int index = F8Index(t);
  const Format& f = kFormats[index];
  if (f.specials == Specials::kE8M0) return EncodeE8M0(v);
  const uint8_t sign_bit = static_cast<uint8_t>(1u << (f.exponent_bits + f.mantissa_bits));
  if (std::isnan(v)) return NanCode(f);
  const bool negative = std::signbit(v);
  const double a = std::fabs(v);
  const double max_finite = GetTables().max_finite[index];
  auto overflow = [&]() -> uint8_t {
    if (f.specials != Specials::kIeee) return NanCode(f);
    uint8_t inf = static_cast<uint8_t>(((1 << f.exponent_bits) - 1) << f.mantissa_bits);
    return negative ? static_cast<uint8_t>(inf | sign_bit) : inf;
  };
  if (std::isinf(a)) return overflow();
  // Quantum (spacing of representable values) at a's binade, or the
  // subnormal spacing below the smallest normal.
  const int min_exponent = 1 - f.bias;
  int e;
  std::frexp(a, &e);
  int exponent = a == 0 ? min_exponent : std::max(e - 1, min_exponent);
  const double quantum = std::ldexp(1.0, exponent - f.mantissa_bits);
  // a / quantum is exact (power-of-two scaling); nearbyint rounds half to
  // even in the default floating-point environment.
  const double steps = std::nearbyint(a / quantum);
  const double rounded = steps * quantum;
  if (rounded > max_finite) return overflow();
  uint8_t code;
  if (rounded == 0) {
    code = 0;
    if (f.specials == Specials::kFnuz) return 0;  // no negative zero
  } else {
    int re;
    std::frexp(rounded, &re);
    int r_exponent = re - 1;
    if (r_exponent < min_exponent) {
      code = static_cast<uint8_t>(rounded / std::ldexp(1.0, min_exponent - f.mantissa_bits));
    } else {
      const int mantissa = static_cast<int>(rounded / std::ldexp(1.0, r_exponent - f.mantissa_bits)) -
                           (1 << f.mantissa_bits);
      code = static_cast<uint8_t>(((r_exponent + f.bias) << f.mantissa_bits) | mantissa);
    }
  }
  return negative ? static_cast<uint8_t>(code | sign_bit) : code;
}

}  // namespace meshsplit
