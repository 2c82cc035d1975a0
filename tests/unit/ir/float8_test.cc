// f8 codec (ir/float8.h): every code of every f8 type decodes to the value the
// text parser's independent table-free decoder gives and encodes back to
// itself; selected f32 values round as the formats' rules say (worked out by
// hand from the bit layouts).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/float8.h"
#include "text/minifloat.h"

namespace meshsplit {
namespace {

const PrimitiveType kF8Types[] = {
    PrimitiveType::F8E4M3FN,   PrimitiveType::F8E5M2,     PrimitiveType::F8E4M3,
    PrimitiveType::F8E3M4,     PrimitiveType::F8E4M3FNUZ, PrimitiveType::F8E5M2FNUZ,
    PrimitiveType::F8E4M3B11FNUZ, PrimitiveType::F8E8M0FNU};

TEST(Float8, ExhaustiveRoundTripThroughF32) {
  for (PrimitiveType t : kF8Types) {
    int nan_codes = 0;
    for (int c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      const float v = F8ToF32(t, code);
      const double independent = text_internal::DecodeMiniFloat(t, code);
      if (std::isnan(v)) {
        ++nan_codes;
        EXPECT_TRUE(std::isnan(independent)) << PrimitiveTypeName(t) << " code " << c;
        EXPECT_TRUE(std::isnan(F8ToF32(t, F32ToF8(t, v)))) << PrimitiveTypeName(t) << " " << c;
        continue;
      }
      EXPECT_EQ(static_cast<double>(v), independent) << PrimitiveTypeName(t) << " code " << c;
      EXPECT_EQ(F32ToF8(t, v), code) << PrimitiveTypeName(t) << " code " << c << " value " << v;
    }
    // NaN codes per format: IEEE-like 2 * (2^m - 1), fn 2, fnuz 1, e8m0 1.
    const int want_nans = t == PrimitiveType::F8E5M2 ? 6
                          : t == PrimitiveType::F8E4M3 ? 14
                          : t == PrimitiveType::F8E3M4 ? 30
                          : t == PrimitiveType::F8E4M3FN ? 2
                                                          : 1;
    EXPECT_EQ(nan_codes, want_nans) << PrimitiveTypeName(t);
  }
}

TEST(Float8, E4M3FnRounding) {
  const PrimitiveType t = PrimitiveType::F8E4M3FN;
  EXPECT_EQ(F8MaxFinite(t), 448.0);
  EXPECT_EQ(F32ToF8(t, 1.0f), 0x38);
  EXPECT_EQ(F32ToF8(t, 448.0f), 0x7e);
  EXPECT_EQ(F32ToF8(t, 464.0f), 0x7e);  // halfway to 480: ties to the even code 0x7e
  EXPECT_TRUE(std::isnan(F8ToF32(t, F32ToF8(t, 464.5f))));  // no infinity: NaN
  EXPECT_TRUE(std::isnan(F8ToF32(t, F32ToF8(t, INFINITY))));
  EXPECT_EQ(F32ToF8(t, -448.0f), 0xfe);
  EXPECT_EQ(F32ToF8(t, 1.0625f), 0x38);  // halfway between 1 and 1.125: even (1)
  EXPECT_EQ(F32ToF8(t, 1.1875f), 0x3a);  // halfway between 1.125 and 1.25: even (1.25)
  EXPECT_EQ(F32ToF8(t, std::ldexp(1.0f, -9)), 0x01);         // smallest subnormal
  EXPECT_EQ(F32ToF8(t, std::ldexp(1.0f, -10)), 0x00);        // half of it: ties to 0
  EXPECT_EQ(F32ToF8(t, std::ldexp(1.5f, -9)), 0x02);         // 1.5 quanta: ties to 2
  EXPECT_EQ(F32ToF8(t, -std::ldexp(1.0f, -11)), 0x80);       // -0 kept
}

TEST(Float8, E5M2Overflow) {
  const PrimitiveType t = PrimitiveType::F8E5M2;
  EXPECT_EQ(F8MaxFinite(t), 57344.0);
  EXPECT_EQ(F32ToF8(t, 61439.0f), 0x7b);  // below the midpoint to 2^16
  EXPECT_EQ(F32ToF8(t, 61440.0f), 0x7c);  // the midpoint: ties to even, i.e. infinity
  EXPECT_EQ(F32ToF8(t, -INFINITY), 0xfc);
}

TEST(Float8, FnuzHasNoNegativeZero) {
  for (PrimitiveType t : {PrimitiveType::F8E4M3FNUZ, PrimitiveType::F8E5M2FNUZ}) {
    EXPECT_EQ(F32ToF8(t, -0.0f), 0x00);
    EXPECT_EQ(F32ToF8(t, -1e-30f), 0x00);
    EXPECT_EQ(F32ToF8(t, NAN), 0x80);
    EXPECT_TRUE(std::isnan(F8ToF32(t, 0x80)));
  }
  EXPECT_EQ(F8MaxFinite(PrimitiveType::F8E4M3FNUZ), 240.0);
}

TEST(Float8, E8M0ScaleType) {
  const PrimitiveType t = PrimitiveType::F8E8M0FNU;
  EXPECT_EQ(F32ToF8(t, 1.0f), 127);
  EXPECT_EQ(F8ToF32(t, 0), std::ldexp(1.0f, -127));
  EXPECT_EQ(F8ToF32(t, 254), std::ldexp(1.0f, 127));
  EXPECT_EQ(F32ToF8(t, 1.4f), 127);
  EXPECT_EQ(F32ToF8(t, 1.6f), 128);
  EXPECT_EQ(F32ToF8(t, 1.5f), 128);   // halfway between codes 127 and 128: even
  EXPECT_EQ(F32ToF8(t, 3.0f), 128);   // halfway between codes 128 and 129: even
  EXPECT_EQ(F32ToF8(t, 0.75f), 126);  // halfway between codes 126 and 127: even
  EXPECT_EQ(F32ToF8(t, -1.0f), 0xff);  // no sign: NaN
  EXPECT_EQ(F32ToF8(t, 0.0f), 0);      // no zero: the smallest value
  EXPECT_EQ(F64ToF8(t, std::ldexp(1.0, 128)), 0xff);  // overflow: NaN
}

TEST(Float8, RandomValuesMatchBruteForceNearest) {
  // Within range, the nearest code (ties to even) must agree with the text
  // parser's brute-force search over all codes.
  std::mt19937_64 rng(7);
  for (PrimitiveType t : kF8Types) {
    if (t == PrimitiveType::F8E8M0FNU) continue;  // the search assumes a signed format
    const double max = F8MaxFinite(t);
    std::uniform_real_distribution<double> d(-max, max);
    for (int i = 0; i < 2000; ++i) {
      const double v = std::ldexp(d(rng), -static_cast<int>(rng() % 12));
      const uint8_t got = F64ToF8(t, v), want = text_internal::EncodeMiniFloat(t, v);
      EXPECT_EQ(F8ToF32(t, got), F8ToF32(t, want)) << PrimitiveTypeName(t) << " " << v;
    }
  }
}

}  // namespace
}  // namespace meshsplit
