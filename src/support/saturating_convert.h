// Element conversion as XLA's convert: float -> integer saturates at the
// integer's range and maps NaN to 0 (a plain cast of an out-of-range float is
// undefined behaviour); every other pair is a plain cast. The interpreter's
// convert kernel, the compiled scalar programs and Literal::SetDouble use it.
#pragma once

#include <limits>
#include <type_traits>

namespace meshsplit {

template <typename To, typename From>
inline To SaturatingConvert(From x) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (x != x) return 0;
    constexpr From kLo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From kHi = static_cast<From>(std::numeric_limits<To>::max());
    if (x <= kLo) return std::numeric_limits<To>::min();
    if (x >= kHi) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

}  // namespace meshsplit
