// Elementwise kernels: unary and binary arithmetic, compare, select, clamp,
// convert, bitcast-convert, reduce-precision and iota. Each op is a typed
// loop over contiguous buffers; f16/bf16 operands are widened to f32, computed
// and rounded back to nearest even.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "runtime/kernels.h"
#include "runtime/streaming.h"

namespace meshsplit::interp {
namespace {

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

// The typed loops. An output larger than the cache is streamed (see
// runtime/streaming.h); `o` may alias an operand either way.
template <typename T, typename F>
void Map1(const T* a, T* o, int64_t n, F f) {
  if (n * static_cast<int64_t>(sizeof(T)) >= StreamingBytes()) {
    StreamChunks(o, n, [&](int64_t s, int64_t e, T* out) {
      for (int64_t i = s; i < e; ++i) out[i - s] = f(a[i]);
    });
    return;
  }
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}

template <typename T, typename F>
void Map2(const T* a, const T* b, T* o, int64_t n, F f) {
  if (n * static_cast<int64_t>(sizeof(T)) >= StreamingBytes()) {
    StreamChunks(o, n, [&](int64_t s, int64_t e, T* out) {
      for (int64_t i = s; i < e; ++i) out[i - s] = f(a[i], b[i]);
    });
    return;
  }
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}

template <typename T>
bool UnaryFloat(Opcode op, const T* a, T* o, int64_t n) {
  switch (op) {
    case Opcode::kAbs: Map1(a, o, n, [](T x) { return std::fabs(x); }); return true;
    case Opcode::kCbrt: Map1(a, o, n, [](T x) { return std::cbrt(x); }); return true;
    case Opcode::kCeil: Map1(a, o, n, [](T x) { return std::ceil(x); }); return true;
    case Opcode::kCos: Map1(a, o, n, [](T x) { return std::cos(x); }); return true;
    case Opcode::kErf: Map1(a, o, n, [](T x) { return std::erf(x); }); return true;
    case Opcode::kExp: Map1(a, o, n, [](T x) { return std::exp(x); }); return true;
    case Opcode::kExpm1: Map1(a, o, n, [](T x) { return std::expm1(x); }); return true;
    case Opcode::kFloor: Map1(a, o, n, [](T x) { return std::floor(x); }); return true;
    case Opcode::kLog: Map1(a, o, n, [](T x) { return std::log(x); }); return true;
    case Opcode::kLog1p: Map1(a, o, n, [](T x) { return std::log1p(x); }); return true;
    case Opcode::kLogistic:
      Map1(a, o, n, [](T x) { return static_cast<T>(1) / (static_cast<T>(1) + std::exp(-x)); });
      return true;
    case Opcode::kNegate: Map1(a, o, n, [](T x) { return -x; }); return true;
    case Opcode::kRoundNearestAfz: Map1(a, o, n, [](T x) { return std::round(x); }); return true;
    case Opcode::kRoundNearestEven:
      // The default floating-point environment rounds to nearest even.
      Map1(a, o, n, [](T x) { return std::nearbyint(x); });
      return true;
    case Opcode::kRsqrt:
      Map1(a, o, n, [](T x) { return static_cast<T>(1) / std::sqrt(x); });
      return true;
    case Opcode::kSign:
      // sign keeps +-0 and NaN as they are.
      Map1(a, o, n, [](T x) { return x > 0 ? T(1) : x < 0 ? T(-1) : x; });
      return true;
    case Opcode::kSin: Map1(a, o, n, [](T x) { return std::sin(x); }); return true;
    case Opcode::kSqrt: Map1(a, o, n, [](T x) { return std::sqrt(x); }); return true;
    case Opcode::kTan: Map1(a, o, n, [](T x) { return std::tan(x); }); return true;
    case Opcode::kTanh: Map1(a, o, n, [](T x) { return std::tanh(x); }); return true;
    default: return false;
  }
}

template <typename T>
bool UnaryInt(Opcode op, const T* a, T* o, int64_t n) {
  using U = Unsigned<T>;
  constexpr int kBits = sizeof(T) * 8;
  switch (op) {
    case Opcode::kAbs:
      if constexpr (std::is_signed_v<T>)
        Map1(a, o, n, [](T x) { return x < 0 ? static_cast<T>(U(0) - U(x)) : x; });
      else
        Map1(a, o, n, [](T x) { return x; });
      return true;
    case Opcode::kNegate: Map1(a, o, n, [](T x) { return static_cast<T>(U(0) - U(x)); }); return true;
    case Opcode::kNot: Map1(a, o, n, [](T x) { return static_cast<T>(~x); }); return true;
    case Opcode::kPopcnt:
      Map1(a, o, n, [](T x) { return static_cast<T>(std::popcount(static_cast<U>(x))); });
      return true;
    case Opcode::kClz:
      Map1(a, o, n, [](T x) {
        return static_cast<T>(std::countl_zero(static_cast<U>(x)) - (std::numeric_limits<U>::digits - kBits));
      });
      return true;
    case Opcode::kSign:
      if constexpr (std::is_signed_v<T>)
        Map1(a, o, n, [](T x) { return static_cast<T>(x > 0 ? 1 : x < 0 ? -1 : 0); });
      else
        Map1(a, o, n, [](T x) { return static_cast<T>(x > 0 ? 1 : 0); });
      return true;
    default: return false;
  }
}

template <typename T>
T IntPow(T base, T exp) {
  using U = Unsigned<T>;
  if constexpr (std::is_signed_v<T>) {
    // XLA: a negative exponent gives 1 for base 1, else 0 (integer 1/x^n).
    if (exp < 0) return base == 1 ? 1 : 0;
  }
  U result = 1, b = static_cast<U>(base);
  U e = static_cast<U>(exp);
  while (e) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

template <typename T>
bool BinaryFloat(Opcode op, const T* a, const T* b, T* o, int64_t n) {
  switch (op) {
    case Opcode::kAdd: Map2(a, b, o, n, [](T x, T y) { return x + y; }); return true;
    case Opcode::kSubtract: Map2(a, b, o, n, [](T x, T y) { return x - y; }); return true;
    case Opcode::kMultiply: Map2(a, b, o, n, [](T x, T y) { return x * y; }); return true;
    case Opcode::kDivide: Map2(a, b, o, n, [](T x, T y) { return x / y; }); return true;
    case Opcode::kMaximum:
      Map2(a, b, o, n, [](T x, T y) { return ApplyReducerKind(ReducerKind::kMax, x, y); });
      return true;
    case Opcode::kMinimum:
      Map2(a, b, o, n, [](T x, T y) { return ApplyReducerKind(ReducerKind::kMin, x, y); });
      return true;
    case Opcode::kPower: Map2(a, b, o, n, [](T x, T y) { return std::pow(x, y); }); return true;
    case Opcode::kRemainder: Map2(a, b, o, n, [](T x, T y) { return std::fmod(x, y); }); return true;
    case Opcode::kAtan2: Map2(a, b, o, n, [](T x, T y) { return std::atan2(x, y); }); return true;
    default: return false;
  }
}

template <typename T>
bool BinaryInt(Opcode op, const T* a, const T* b, T* o, int64_t n) {
  using U = Unsigned<T>;
  constexpr U kBits = sizeof(T) * 8;
  constexpr T kMin = std::numeric_limits<T>::min();
  switch (op) {
    case Opcode::kAdd: Map2(a, b, o, n, [](T x, T y) { return static_cast<T>(U(x) + U(y)); }); return true;
    case Opcode::kSubtract: Map2(a, b, o, n, [](T x, T y) { return static_cast<T>(U(x) - U(y)); }); return true;
    case Opcode::kMultiply: Map2(a, b, o, n, [](T x, T y) { return static_cast<T>(U(x) * U(y)); }); return true;
    case Opcode::kDivide:
      Map2(a, b, o, n, [](T x, T y) -> T {
        if (y == 0) return static_cast<T>(-1);  // all ones for unsigned
        if constexpr (std::is_signed_v<T>)
          if (x == kMin && y == -1) return kMin;
        return static_cast<T>(x / y);
      });
      return true;
    case Opcode::kRemainder:
      Map2(a, b, o, n, [](T x, T y) -> T {
        if (y == 0) return x;
        if constexpr (std::is_signed_v<T>)
          if (x == kMin && y == -1) return 0;
        return static_cast<T>(x % y);
      });
      return true;
    case Opcode::kMaximum: Map2(a, b, o, n, [](T x, T y) { return x > y ? x : y; }); return true;
    case Opcode::kMinimum: Map2(a, b, o, n, [](T x, T y) { return x < y ? x : y; }); return true;
    case Opcode::kAnd: Map2(a, b, o, n, [](T x, T y) { return static_cast<T>(x & y); }); return true;
    case Opcode::kOr: Map2(a, b, o, n, [](T x, T y) { return static_cast<T>(x | y); }); return true;
    case Opcode::kXor: Map2(a, b, o, n, [](T x, T y) { return static_cast<T>(x ^ y); }); return true;
    case Opcode::kPower: Map2(a, b, o, n, [](T x, T y) { return IntPow(x, y); }); return true;
    case Opcode::kShiftLeft:
      Map2(a, b, o, n, [](T x, T y) {
        return U(y) >= kBits ? T(0) : static_cast<T>(U(x) << U(y));
      });
      return true;
    case Opcode::kShiftRightLogical:
      Map2(a, b, o, n, [](T x, T y) {
        return U(y) >= kBits ? T(0) : static_cast<T>(U(x) >> U(y));
      });
      return true;
    case Opcode::kShiftRightArithmetic:
      Map2(a, b, o, n, [](T x, T y) {
        using S = std::make_signed_t<T>;
        S sx = static_cast<S>(x);
        if (U(y) >= kBits) return static_cast<T>(sx < 0 ? S(-1) : S(0));
        return static_cast<T>(sx >> U(y));
      });
      return true;
    default: return false;
  }
}

bool BinaryPred(Opcode op, const uint8_t* a, const uint8_t* b, uint8_t* o, int64_t n) {
  switch (op) {
    case Opcode::kAnd: case Opcode::kMinimum: case Opcode::kMultiply:
      Map2(a, b, o, n, [](uint8_t x, uint8_t y) -> uint8_t { return x & y; });
      return true;
    case Opcode::kOr: case Opcode::kMaximum: case Opcode::kAdd:
      Map2(a, b, o, n, [](uint8_t x, uint8_t y) -> uint8_t { return x | y; });
      return true;
    case Opcode::kXor: case Opcode::kSubtract:
      Map2(a, b, o, n, [](uint8_t x, uint8_t y) -> uint8_t { return x ^ y; });
      return true;
    default: return false;
  }
}

Status OpTypeError(const Instruction& instr, PrimitiveType t) {
  return InstrError(instr, std::string(OpcodeName(instr.opcode())) + " is not defined for " +
                               std::string(PrimitiveTypeName(t)));
}

template <typename T>
void CompareLoop(ComparisonDirection dir, const T* a, const T* b, uint8_t* o, int64_t n) {
  switch (dir) {
    case ComparisonDirection::kEq: for (int64_t i = 0; i < n; ++i) o[i] = a[i] == b[i]; break;
    case ComparisonDirection::kNe: for (int64_t i = 0; i < n; ++i) o[i] = a[i] != b[i]; break;
    case ComparisonDirection::kGe: for (int64_t i = 0; i < n; ++i) o[i] = a[i] >= b[i]; break;
    case ComparisonDirection::kGt: for (int64_t i = 0; i < n; ++i) o[i] = a[i] > b[i]; break;
    case ComparisonDirection::kLe: for (int64_t i = 0; i < n; ++i) o[i] = a[i] <= b[i]; break;
    case ComparisonDirection::kLt: for (int64_t i = 0; i < n; ++i) o[i] = a[i] < b[i]; break;
  }
}

template <typename T>
void CompareTotalOrder(ComparisonDirection dir, const T* a, const T* b, uint8_t* o, int64_t n) {
  using K = decltype(TotalOrderKey(T{}));
  constexpr int64_t kChunk = 1024;
  K ka[kChunk], kb[kChunk];
  for (int64_t s = 0; s < n; s += kChunk) {
    int64_t m = std::min(kChunk, n - s);
    for (int64_t i = 0; i < m; ++i) {
      ka[i] = TotalOrderKey(a[s + i]);
      kb[i] = TotalOrderKey(b[s + i]);
    }
    CompareLoop(dir, ka, kb, o + s, m);
  }
}

template <typename From>
void ConvertFrom(const From* in, Literal& out, int64_t n) {
  PrimitiveType to = out.element_type();
  if (to == PrimitiveType::PRED) {
    uint8_t* o = out.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] != 0;
    return;
  }
  DispatchCompute(to, [&]<typename To>() {
    To* o = out.data<To>();
    for (int64_t i = 0; i < n; ++i) o[i] = SaturatingConvert<To>(in[i]);
  });
}

// Rounds `v` (an IEEE float with kMant mantissa and kExp exponent bits,
// stored as U) to mant_bits / exp_bits: mantissa to nearest even, exponent
// overflow to infinity, underflow to signed zero; NaN stays NaN.
template <typename F, typename U, int kMant, int kExp>
F ReducePrecisionBits(F v, int exp_bits, int mant_bits) {
  static_assert(sizeof(F) == sizeof(U) && kMant + kExp + 1 == 8 * sizeof(U));
  if (v != v) return v;
  U x;
  std::memcpy(&x, &v, sizeof x);
  if (mant_bits < kMant) {
    U last = U{1} << (kMant - mant_bits);
    U bias = (last >> 1) - 1 + ((x & last) >> (kMant - mant_bits));
    x = (x + bias) & ~(last - 1);
  }
  if (exp_bits < kExp) {
    using S = std::make_signed_t<U>;
    const S own_bias = (S{1} << (kExp - 1)) - 1;  // 127 for f32, 1023 for f64
    S exp_bias = (S{1} << (exp_bits - 1)) - 1;
    U max_exp = static_cast<U>(own_bias + exp_bias) << kMant;
    U min_exp = static_cast<U>(own_bias - exp_bias) << kMant;
    const U exp_mask = ((U{1} << kExp) - 1) << kMant;
    U e = x & exp_mask;
    U sign = x & (U{1} << (kMant + kExp));
    if (e > max_exp) x = sign | exp_mask;
    else if (e <= min_exp) x = sign;
  }
  F out;
  std::memcpy(&out, &x, sizeof out);
  return out;
}

float ReducePrecisionF32(float v, int exp_bits, int mant_bits) {
  return ReducePrecisionBits<float, uint32_t, 23, 8>(v, exp_bits, mant_bits);
}

double ReducePrecisionF64(double v, int exp_bits, int mant_bits) {
  return ReducePrecisionBits<double, uint64_t, 52, 11>(v, exp_bits, mant_bits);
}

}  // namespace

StatusOr<Literal> EvalUnary(KernelArgs& k) {
  const Instruction& instr = k.instr;
  Opcode op = instr.opcode();
  PrimitiveType t = k.op(0).element_type();
  int64_t n = k.op(0).element_count();
  if (op == Opcode::kIsFinite) {
    if (!IsFloatingPoint(t)) return OpTypeError(instr, t);
    Literal a32 = IsStagedFloat(t) ? WidenToF32(k.op(0)) : Literal();
    const Literal& a = IsStagedFloat(t) ? a32 : k.op(0);
    Literal out(k.shape());
    uint8_t* o = out.data<uint8_t>();
    if (a.element_type() == PrimitiveType::F64) {
      const double* p = a.data<double>();
      for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(p[i]);
    } else {
      const float* p = a.data<float>();
      for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(p[i]);
    }
    return out;
  }
  if (IsStagedFloat(t)) {
    Literal a32 = WidenToF32(k.op(0));
    float* p = a32.data<float>();
    if (!UnaryFloat<float>(op, p, p, n)) return OpTypeError(instr, t);
    return NarrowFromF32(a32, t);
  }
  if (t == PrimitiveType::PRED) {
    if (op != Opcode::kNot) return OpTypeError(instr, t);
    const uint8_t* a = k.op(0).data<uint8_t>();
    Literal out = k.TakeOrAllocate(0);
    Map1(a, out.data<uint8_t>(), n, [](uint8_t x) -> uint8_t { return !x; });
    return out;
  }
  bool ok = false;
  Literal out;
  DispatchCompute(t, [&]<typename T>() {
    const T* a = k.op(0).data<T>();
    out = k.TakeOrAllocate(0);
    if constexpr (std::is_floating_point_v<T>) ok = UnaryFloat<T>(op, a, out.data<T>(), n);
    else ok = UnaryInt<T>(op, a, out.data<T>(), n);
  });
  if (!ok) return OpTypeError(instr, t);
  return out;
}

StatusOr<Literal> EvalBinary(KernelArgs& k) {
  const Instruction& instr = k.instr;
  Opcode op = instr.opcode();
  PrimitiveType t = k.op(0).element_type();
  if (k.op(1).element_type() != t || k.op(0).element_count() != k.op(1).element_count())
    return InstrError(instr, "operands " + k.op(0).shape().ToString(false) + " and " +
                                 k.op(1).shape().ToString(false) + " differ");
  int64_t n = k.op(0).element_count();
  if (IsStagedFloat(t)) {
    Literal a32 = WidenToF32(k.op(0));
    Literal b32 = WidenToF32(k.op(1));
    float* p = a32.data<float>();
    if (!BinaryFloat<float>(op, p, b32.data<float>(), p, n)) return OpTypeError(instr, t);
    return NarrowFromF32(a32, t);
  }
  const uint8_t* a_raw = k.op(0).raw();
  const uint8_t* b_raw = k.op(1).raw();
  // Reuse whichever operand's buffer is free; elementwise loops allow the
  // output to alias an input.
  Literal out = k.donatable[0] ? k.TakeOrAllocate(0) : k.TakeOrAllocate(1);
  if (t == PrimitiveType::PRED) {
    if (!BinaryPred(op, a_raw, b_raw, out.data<uint8_t>(), n)) return OpTypeError(instr, t);
    return out;
  }
  bool ok = false;
  DispatchCompute(t, [&]<typename T>() {
    const T* a = reinterpret_cast<const T*>(a_raw);
    const T* b = reinterpret_cast<const T*>(b_raw);
    if constexpr (std::is_floating_point_v<T>) ok = BinaryFloat<T>(op, a, b, out.data<T>(), n);
    else ok = BinaryInt<T>(op, a, b, out.data<T>(), n);
  });
  if (!ok) return OpTypeError(instr, t);
  return out;
}

StatusOr<Literal> EvalCompare(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (!instr.attrs().comparison_direction)
    return InstrError(instr, "compare needs a direction");
  ComparisonDirection dir = *instr.attrs().comparison_direction;
  PrimitiveType t = k.op(0).element_type();
  if (k.op(1).element_type() != t || k.op(0).element_count() != k.op(1).element_count())
    return InstrError(instr, "operands " + k.op(0).shape().ToString(false) + " and " +
                                 k.op(1).shape().ToString(false) + " differ");
  int64_t n = k.op(0).element_count();
  Literal out = Literal::Uninitialized(k.shape());
  uint8_t* o = out.data<uint8_t>();
  bool total = instr.attrs().comparison_type == "TOTALORDER";
  if (IsStagedFloat(t)) {
    Literal a32 = WidenToF32(k.op(0)), b32 = WidenToF32(k.op(1));
    if (total) CompareTotalOrder(dir, a32.data<float>(), b32.data<float>(), o, n);
    else CompareLoop(dir, a32.data<float>(), b32.data<float>(), o, n);
    return out;
  }
  DispatchStorage(t, [&]<typename T>() {
    const T* a = k.op(0).data<T>();
    const T* b = k.op(1).data<T>();
    if constexpr (std::is_floating_point_v<T>) {
      if (total) {
        CompareTotalOrder(dir, a, b, o, n);
        return;
      }
    }
    CompareLoop(dir, a, b, o, n);
  });
  return out;
}

StatusOr<Literal> EvalSelect(KernelArgs& k) {
  const Literal& pred = k.op(0);
  const Literal& on_true = k.op(1);
  const Literal& on_false = k.op(2);
  if (pred.element_type() != PrimitiveType::PRED)
    return InstrError(k.instr, "select predicate must be pred");
  int64_t n = on_true.element_count();
  if (on_false.element_count() != n || (pred.element_count() != n && pred.element_count() != 1))
    return InstrError(k.instr, "select operand shapes differ");
  const uint8_t* p = pred.data<uint8_t>();
  bool scalar_pred = pred.element_count() == 1 && n != 1;
  const uint8_t* t_raw = on_true.raw();
  const uint8_t* f_raw = on_false.raw();
  Literal out = k.donatable[1] ? k.TakeOrAllocate(1) : k.TakeOrAllocate(2);
  if (IsF8Type(out.element_type()) || IsComplex(out.element_type())) {
    // No storage type: copy elements as bytes (the output may alias either
    // value operand, so copy element by element).
    const int64_t w = ByteWidth(out.element_type());
    uint8_t* o = out.raw();
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* src = (scalar_pred ? p[0] : p[i]) ? t_raw : f_raw;
      if (src + i * w != o + i * w) std::memmove(o + i * w, src + i * w, w);
    }
    return out;
  }
  DispatchStorage(out.element_type(), [&]<typename T>() {
    const T* a = reinterpret_cast<const T*>(t_raw);
    const T* b = reinterpret_cast<const T*>(f_raw);
    T* o = out.data<T>();
    if (scalar_pred) {
      const T* src = p[0] ? a : b;
      if (src != o) std::memcpy(o, src, n * sizeof(T));
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = p[i] ? a[i] : b[i];
    }
  });
  return out;
}

StatusOr<Literal> EvalClamp(KernelArgs& k) {
  PrimitiveType t = k.op(1).element_type();
  int64_t n = k.op(1).element_count();
  const Literal *lo = &k.op(0), *x = &k.op(1), *hi = &k.op(2);
  if (lo->element_type() != t || hi->element_type() != t ||
      (lo->element_count() != n && lo->element_count() != 1) ||
      (hi->element_count() != n && hi->element_count() != 1))
    return InstrError(k.instr, "clamp operand shapes differ");
  Literal lo32, x32, hi32;
  if (IsStagedFloat(t)) {
    lo32 = WidenToF32(*lo), x32 = WidenToF32(*x), hi32 = WidenToF32(*hi);
    lo = &lo32, x = &x32, hi = &hi32;
  }
  Shape s = x->shape();
  Literal out = Literal::Uninitialized(s);
  int64_t lo_step = lo->element_count() == n ? 1 : 0;
  int64_t hi_step = hi->element_count() == n ? 1 : 0;
  DispatchCompute(x->element_type(), [&]<typename T>() {
    const T* l = lo->data<T>();
    const T* v = x->data<T>();
    const T* h = hi->data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      T a = ApplyReducerKind(ReducerKind::kMax, v[i], l[i * lo_step]);
      o[i] = ApplyReducerKind(ReducerKind::kMin, a, h[i * hi_step]);
    }
  });
  if (IsStagedFloat(t)) return NarrowFromF32(out, t);
  return out;
}

Literal ConvertLiteral(const Literal& in, PrimitiveType to) {
  PrimitiveType from = in.element_type();
  Shape s = in.shape();
  s.set_element_type(to);
  if (from == to) return in;
  int64_t n = in.element_count();
  if (IsComplex(from) || IsComplex(to)) return ConvertComplex(in, to);  // kernels_complex.cc
  if (IsStagedFloat(from)) return ConvertLiteral(WidenToF32(in), to);
  if (IsF8Type(to)) {
    // Round once, from the exact f64 value (no double rounding through f32).
    Literal wide = ConvertLiteral(in, PrimitiveType::F64);
    Literal out = Literal::Uninitialized(s);
    const double* p = wide.data<double>();
    uint8_t* o = out.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) o[i] = F64ToF8(to, p[i]);
    return out;
  }
  if (Is16BitFloat(to)) {
    if (from == PrimitiveType::F64) {
      // Round once, straight from f64, so no double rounding through f32.
      Literal out = Literal::Uninitialized(s);
      const double* p = in.data<double>();
      uint16_t* o = out.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) {
        float f = static_cast<float>(p[i]);
        // f is round-to-nearest of p; if it landed exactly on a tie of the
        // 16-bit grid, nudge it towards p so the second rounding is exact.
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint32_t tie_mask = to == PrimitiveType::BF16 ? 0xffffu : 0x1fffu;
        uint32_t half = to == PrimitiveType::BF16 ? 0x8000u : 0x1000u;
        if ((bits & tie_mask) == half && static_cast<double>(f) != p[i] &&
            std::isfinite(f)) {
          bits += (std::fabs(p[i]) > std::fabs(static_cast<double>(f))) ? 1 : -1;
          std::memcpy(&f, &bits, 4);
        }
        o[i] = to == PrimitiveType::BF16 ? F32ToBf16(f) : F32ToF16(f);
      }
      return out;
    }
    return NarrowFromF32(ConvertLiteral(in, PrimitiveType::F32), to);
  }
  Literal out = Literal::Uninitialized(s);
  DispatchCompute(from, [&]<typename From>() { ConvertFrom<From>(in.data<From>(), out, n); });
  return out;
}

StatusOr<Literal> EvalConvert(KernelArgs& k) {
  return ConvertLiteral(k.op(0), k.shape().element_type());
}

StatusOr<Literal> EvalBitcastConvert(KernelArgs& k) {
  const Literal& in = k.op(0);
  Literal out(k.shape());
  if (out.size_bytes() != in.size_bytes())
    return InstrError(k.instr, "bitcast-convert from " + in.shape().ToString(false) + " to " +
                                   k.shape().ToString(false) + " changes the byte size");
  if (in.size_bytes() > 0) std::memcpy(out.raw(), in.raw(), in.size_bytes());
  if (out.element_type() == PrimitiveType::PRED) {
    uint8_t* p = out.data<uint8_t>();
    for (int64_t i = 0; i < out.element_count(); ++i) p[i] = p[i] != 0;
  }
  return out;
}

StatusOr<Literal> EvalReducePrecision(KernelArgs& k) {
  PrimitiveType t = k.op(0).element_type();
  int eb = static_cast<int>(k.instr.attrs().exponent_bits);
  int mb = static_cast<int>(k.instr.attrs().mantissa_bits);
  if (eb < 1 || mb < 0) return InstrError(k.instr, "reduce-precision needs exponent_bits >= 1 and mantissa_bits >= 0");
  int64_t n = k.op(0).element_count();
  if (t == PrimitiveType::F64) {
    const double* a = k.op(0).data<double>();
    Literal out = k.TakeOrAllocate(0);  // may take operand 0's buffer
    double* p = out.data<double>();
    if (p != a && n > 0) std::memcpy(p, a, n * 8);
    for (int64_t i = 0; i < n; ++i) p[i] = ReducePrecisionF64(p[i], eb, mb);
    return out;
  }
  if (!IsFloatingPoint(t)) return OpTypeError(k.instr, t);
  Literal f32 = t == PrimitiveType::F32 ? k.op(0) : WidenToF32(k.op(0));
  float* p = f32.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = ReducePrecisionF32(p[i], eb, mb);
  if (t == PrimitiveType::F32) return f32;
  return NarrowFromF32(f32, t);
}

StatusOr<Literal> EvalIota(KernelArgs& k) {
  const Shape& s = k.shape();
  if (!s.IsArray()) return InstrError(k.instr, "iota needs an array shape");
  int64_t d = k.instr.attrs().iota_dimension;
  if (s.rank() == 0 || d < 0 || d >= s.rank())
    return InstrError(k.instr, "iota_dimension " + std::to_string(d) + " out of range");
  PrimitiveType t = s.element_type();
  Shape s32 = s;
  if (IsStagedFloat(t)) s32.set_element_type(PrimitiveType::F32);
  Literal out(s32);
  int64_t n = out.element_count();
  int64_t inner = 1;
  for (int i = static_cast<int>(d) + 1; i < s.rank(); ++i) inner *= s.dimensions(i);
  int64_t dim = s.dimensions(d);
  DispatchCompute(s32.element_type(), [&]<typename T>() {
    T* o = out.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = (i / inner) % dim;
      o[i] = t == PrimitiveType::PRED ? static_cast<T>(v != 0) : static_cast<T>(v);
    }
  });
  if (IsStagedFloat(t)) return NarrowFromF32(out, t);
  return out;
}

}  // namespace meshsplit::interp
