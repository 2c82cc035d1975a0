// Elementwise kernels: unary and binary arithmetic, compare, select, clamp,
// convert, bitcast-convert, reduce-precision and iota. Each op is a typed
// loop over contiguous buffers; f16/bf16 (and f8) operands are widened to f32
// a few hundred elements at a time, computed and rounded back to nearest
// even. Arithmetic, compare, select, clamp and convert run through one
// span-level entry, ElementwiseSpan, which the fused loops (loop_fusion.cc)
// call on chunks of the same ops.
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

// The typed loops, compiled twice: for the baseline instruction set and for
// AVX2, where GCC vectorises them 8 floats (4 doubles) wide instead of 4 (2);
// a fused f32 chain on one core ran at 0.59x of memcpy with the baseline
// loops. Only the vector width changes: "avx2" implies neither FMA nor any
// reassociation, so every lane computes exactly what the scalar code does
// and results do not depend on the machine. The lambdas are inlined into
// either copy (their instruction set is a subset of both).

template <typename T, typename F>
__attribute__((target("avx2"))) void Loop1Avx2(const T* a, T* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}

template <typename T, typename F>
__attribute__((target("avx2"))) void Loop2Avx2(const T* a, const T* b, T* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}

template <typename T, typename F>
void Loop1(const T* a, T* o, int64_t n, F f) {
  if (HaveAvx2()) return Loop1Avx2(a, o, n, f);
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}

template <typename T, typename F>
void Loop2(const T* a, const T* b, T* o, int64_t n, F f) {
  if (HaveAvx2()) return Loop2Avx2(a, b, o, n, f);
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}

// An output larger than the cache is streamed (see runtime/streaming.h),
// unless it is an operand's buffer (its lines were just read, so ordinary
// stores cost no extra read).
template <typename T, typename F>
void Map1(const T* a, T* o, int64_t n, F f) {
  if (o != a && n * static_cast<int64_t>(sizeof(T)) >= StreamingBytes()) {
    StreamChunks(o, n, [&](int64_t s, int64_t e, T* out) { Loop1(a + s, out, e - s, f); });
    return;
  }
  Loop1(a, o, n, f);
}

template <typename T, typename F>
void Map2(const T* a, const T* b, T* o, int64_t n, F f) {
  if (o != a && o != b && n * static_cast<int64_t>(sizeof(T)) >= StreamingBytes()) {
    StreamChunks(o, n, [&](int64_t s, int64_t e, T* out) { Loop2(a + s, b + s, out, e - s, f); });
    return;
  }
  Loop2(a, b, o, n, f);
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
void ConvertFromSpan(const From* in, PrimitiveType to, uint8_t* out, int64_t n) {
  if (to == PrimitiveType::PRED) {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] != 0;
    return;
  }
  DispatchCompute(to, [&]<typename To>() {
    To* o = reinterpret_cast<To*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = SaturatingConvert<To>(in[i]);
  });
}

// Staged floats (f16, bf16, f8) are computed kStage elements at a time in
// f32 scratch: widened, computed, rounded back on store. Per element this is
// exactly the widen-compute-narrow of whole arrays, without whole-array
// temporaries.
constexpr int64_t kStage = 512;

void WidenSpan(PrimitiveType t, const uint8_t* in, float* out, int64_t n) {
  if (IsF8Type(t)) {
    for (int64_t i = 0; i < n; ++i) out[i] = F8ToF32(t, in[i]);
    return;
  }
  const uint16_t* p = reinterpret_cast<const uint16_t*>(in);
  if (t == PrimitiveType::BF16) {
    for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(p[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(p[i]);
  }
}

void NarrowSpan(const float* in, PrimitiveType t, uint8_t* out, int64_t n) {
  if (IsF8Type(t)) {
    for (int64_t i = 0; i < n; ++i) out[i] = F32ToF8(t, in[i]);
    return;
  }
  uint16_t* o = reinterpret_cast<uint16_t*>(out);
  if (t == PrimitiveType::BF16) {
    for (int64_t i = 0; i < n; ++i) o[i] = F32ToBf16(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = F32ToF16(in[i]);
  }
}

// Widens elements [s, s + m) of a staged operand (element 0 when scalar).
const float* WidenOperand(const SpanOperand& a, int64_t s, int64_t m, float* buf) {
  const int64_t w = ByteWidth(a.type);
  if (a.scalar) {
    WidenSpan(a.type, a.data, buf, 1);
  } else {
    WidenSpan(a.type, a.data + s * w, buf, m);
  }
  return buf;
}

bool UnarySpan(Opcode op, const SpanOperand& a, PrimitiveType ot, uint8_t* o, int64_t n) {
  const PrimitiveType t = a.type;
  if (a.scalar) return false;
  if (op == Opcode::kIsFinite) {
    if (!IsFloatingPoint(t) || IsComplex(t) || ot != PrimitiveType::PRED) return false;
    if (IsStagedFloat(t)) {
      alignas(64) float ta[kStage];
      for (int64_t s = 0; s < n; s += kStage) {
        const int64_t m = std::min(kStage, n - s);
        WidenOperand(a, s, m, ta);
        for (int64_t i = 0; i < m; ++i) o[s + i] = std::isfinite(ta[i]);
      }
    } else if (t == PrimitiveType::F64) {
      const double* p = reinterpret_cast<const double*>(a.data);
      for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(p[i]);
    } else {
      const float* p = reinterpret_cast<const float*>(a.data);
      for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(p[i]);
    }
    return true;
  }
  if (ot != t) return false;
  if (IsStagedFloat(t)) {
    if (!UnaryFloat<float>(op, nullptr, nullptr, 0)) return false;
    alignas(64) float ta[kStage];
    const int64_t w = ByteWidth(t);
    for (int64_t s = 0; s < n; s += kStage) {
      const int64_t m = std::min(kStage, n - s);
      WidenOperand(a, s, m, ta);
      UnaryFloat<float>(op, ta, ta, m);
      NarrowSpan(ta, t, o + s * w, m);
    }
    return true;
  }
  if (t == PrimitiveType::PRED) {
    if (op != Opcode::kNot) return false;
    Map1(a.data, o, n, [](uint8_t x) -> uint8_t { return !x; });
    return true;
  }
  bool ok = false;
  DispatchCompute(t, [&]<typename T>() {
    const T* x = reinterpret_cast<const T*>(a.data);
    T* out = reinterpret_cast<T*>(o);
    if constexpr (std::is_floating_point_v<T>) ok = UnaryFloat<T>(op, x, out, n);
    else ok = UnaryInt<T>(op, x, out, n);
  });
  return ok;
}

bool BinarySpan(Opcode op, const SpanOperand& a, const SpanOperand& b, PrimitiveType ot,
                uint8_t* o, int64_t n) {
  const PrimitiveType t = a.type;
  if (b.type != t || ot != t || a.scalar || b.scalar) return false;
  if (IsStagedFloat(t)) {
    if (!BinaryFloat<float>(op, nullptr, nullptr, nullptr, 0)) return false;
    alignas(64) float ta[kStage], tb[kStage];
    const int64_t w = ByteWidth(t);
    for (int64_t s = 0; s < n; s += kStage) {
      const int64_t m = std::min(kStage, n - s);
      WidenOperand(a, s, m, ta);
      WidenOperand(b, s, m, tb);
      BinaryFloat<float>(op, ta, tb, ta, m);
      NarrowSpan(ta, t, o + s * w, m);
    }
    return true;
  }
  if (t == PrimitiveType::PRED) return BinaryPred(op, a.data, b.data, o, n);
  bool ok = false;
  DispatchCompute(t, [&]<typename T>() {
    const T* x = reinterpret_cast<const T*>(a.data);
    const T* y = reinterpret_cast<const T*>(b.data);
    T* out = reinterpret_cast<T*>(o);
    if constexpr (std::is_floating_point_v<T>) ok = BinaryFloat<T>(op, x, y, out, n);
    else ok = BinaryInt<T>(op, x, y, out, n);
  });
  return ok;
}

bool CompareSpan(ComparisonDirection dir, bool total, const SpanOperand& a, const SpanOperand& b,
                 PrimitiveType ot, uint8_t* o, int64_t n) {
  const PrimitiveType t = a.type;
  if (b.type != t || ot != PrimitiveType::PRED || a.scalar || b.scalar) return false;
  if (IsStagedFloat(t)) {
    alignas(64) float ta[kStage], tb[kStage];
    for (int64_t s = 0; s < n; s += kStage) {
      const int64_t m = std::min(kStage, n - s);
      WidenOperand(a, s, m, ta);
      WidenOperand(b, s, m, tb);
      if (total) CompareTotalOrder(dir, ta, tb, o + s, m);
      else CompareLoop(dir, ta, tb, o + s, m);
    }
    return true;
  }
  return DispatchStorage(t, [&]<typename T>() {
    const T* x = reinterpret_cast<const T*>(a.data);
    const T* y = reinterpret_cast<const T*>(b.data);
    if constexpr (std::is_floating_point_v<T>) {
      if (total) {
        CompareTotalOrder(dir, x, y, o, n);
        return;
      }
    }
    CompareLoop(dir, x, y, o, n);
  });
}

bool SelectSpan(const SpanOperand& p, const SpanOperand& a, const SpanOperand& b,
                PrimitiveType ot, uint8_t* o, int64_t n) {
  if (p.type != PrimitiveType::PRED || a.type != ot || b.type != ot || a.scalar || b.scalar)
    return false;
  const uint8_t* pp = p.data;
  if (IsF8Type(ot) || IsComplex(ot)) {
    // No storage type: copy elements as bytes (the output may alias either
    // value operand, so copy element by element).
    const int64_t w = ByteWidth(ot);
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* src = (p.scalar ? pp[0] : pp[i]) ? a.data : b.data;
      if (src + i * w != o + i * w) std::memmove(o + i * w, src + i * w, w);
    }
    return true;
  }
  return DispatchStorage(ot, [&]<typename T>() {
    const T* x = reinterpret_cast<const T*>(a.data);
    const T* y = reinterpret_cast<const T*>(b.data);
    T* out = reinterpret_cast<T*>(o);
    if (p.scalar) {
      const T* src = pp[0] ? x : y;
      if (src != out && n > 0) std::memcpy(out, src, n * sizeof(T));
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = pp[i] ? x[i] : y[i];
    }
  });
}

template <typename T>
void ClampLoop(const T* l, int64_t lo_step, const T* v, const T* h, int64_t hi_step, T* o,
               int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T a = ApplyReducerKind(ReducerKind::kMax, v[i], l[i * lo_step]);
    o[i] = ApplyReducerKind(ReducerKind::kMin, a, h[i * hi_step]);
  }
}

bool ClampSpan(const SpanOperand& lo, const SpanOperand& x, const SpanOperand& hi,
               PrimitiveType ot, uint8_t* o, int64_t n) {
  const PrimitiveType t = x.type;
  if (lo.type != t || hi.type != t || ot != t || x.scalar) return false;
  const int64_t lo_step = lo.scalar ? 0 : 1, hi_step = hi.scalar ? 0 : 1;
  if (IsStagedFloat(t)) {
    alignas(64) float tl[kStage], tx[kStage], th[kStage];
    const int64_t w = ByteWidth(t);
    for (int64_t s = 0; s < n; s += kStage) {
      const int64_t m = std::min(kStage, n - s);
      WidenOperand(lo, s, m, tl);
      WidenOperand(x, s, m, tx);
      WidenOperand(hi, s, m, th);
      ClampLoop<float>(tl, lo_step, tx, th, hi_step, tx, m);
      NarrowSpan(tx, t, o + s * w, m);
    }
    return true;
  }
  return DispatchCompute(t, [&]<typename T>() {
    ClampLoop<T>(reinterpret_cast<const T*>(lo.data), lo_step, reinterpret_cast<const T*>(x.data),
                 reinterpret_cast<const T*>(hi.data), hi_step, reinterpret_cast<T*>(o), n);
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

bool ConvertSpan(PrimitiveType from, PrimitiveType to, const uint8_t* in, uint8_t* out,
                 int64_t n) {
  if (IsComplex(from) || IsComplex(to) || !IsSupportedType(from) || !IsSupportedType(to))
    return false;
  const int64_t wf = ByteWidth(from), wt = ByteWidth(to);
  if (from == to) {
    if (n > 0 && in != out) std::memcpy(out, in, n * wt);
    return true;
  }
  if (IsStagedFloat(from)) {
    alignas(64) float tmp[kStage];
    for (int64_t s = 0; s < n; s += kStage) {
      const int64_t m = std::min(kStage, n - s);
      WidenSpan(from, in + s * wf, tmp, m);
      ConvertSpan(PrimitiveType::F32, to, reinterpret_cast<const uint8_t*>(tmp), out + s * wt, m);
    }
    return true;
  }
  if (IsF8Type(to)) {
    // Round once, from the exact f64 value (no double rounding through f32).
    alignas(64) double tmp[kStage];
    for (int64_t s = 0; s < n; s += kStage) {
      const int64_t m = std::min(kStage, n - s);
      ConvertSpan(from, PrimitiveType::F64, in + s * wf, reinterpret_cast<uint8_t*>(tmp), m);
      for (int64_t i = 0; i < m; ++i) out[s + i] = F64ToF8(to, tmp[i]);
    }
    return true;
  }
  if (Is16BitFloat(to)) {
    uint16_t* o = reinterpret_cast<uint16_t*>(out);
    if (from == PrimitiveType::F64) {
      // Round once, straight from f64, so no double rounding through f32.
      const double* p = reinterpret_cast<const double*>(in);
      for (int64_t i = 0; i < n; ++i) {
        float f = static_cast<float>(p[i]);
        // f is round-to-nearest of p; if it landed exactly on a tie of the
        // 16-bit grid, nudge it towards p so the second rounding is exact.
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint32_t tie_mask = to == PrimitiveType::BF16 ? 0xffffu : 0x1fffu;
        uint32_t half = to == PrimitiveType::BF16 ? 0x8000u : 0x1000u;
        if ((bits & tie_mask) == half && static_cast<double>(f) != p[i] && std::isfinite(f)) {
          bits += (std::fabs(p[i]) > std::fabs(static_cast<double>(f))) ? 1 : -1;
          std::memcpy(&f, &bits, 4);
        }
        o[i] = to == PrimitiveType::BF16 ? F32ToBf16(f) : F32ToF16(f);
      }
      return true;
    }
    alignas(64) float tmp[kStage];
    for (int64_t s = 0; s < n; s += kStage) {
      const int64_t m = std::min(kStage, n - s);
      ConvertSpan(from, PrimitiveType::F32, in + s * wf, reinterpret_cast<uint8_t*>(tmp), m);
      NarrowSpan(tmp, to, out + s * wt, m);
    }
    return true;
  }
  return DispatchCompute(from, [&]<typename From>() {
    ConvertFromSpan<From>(reinterpret_cast<const From*>(in), to, out, n);
  });
}

bool ElementwiseSpan(const Instruction& instr, const SpanOperand* in, int n_in, PrimitiveType ot,
                     uint8_t* out, int64_t n) {
  const Opcode op = instr.opcode();
  switch (op) {
    case Opcode::kCopy:
      if (n_in != 1 || in[0].type != ot || in[0].scalar) return false;
      if (n > 0 && in[0].data != out) std::memcpy(out, in[0].data, n * ByteWidth(ot));
      return true;
    case Opcode::kConvert:
      return n_in == 1 && !in[0].scalar && ConvertSpan(in[0].type, ot, in[0].data, out, n);
    case Opcode::kCompare:
      if (n_in != 2 || !instr.attrs().comparison_direction) return false;
      return CompareSpan(*instr.attrs().comparison_direction,
                         instr.attrs().comparison_type == "TOTALORDER", in[0], in[1], ot, out, n);
    case Opcode::kSelect: return n_in == 3 && SelectSpan(in[0], in[1], in[2], ot, out, n);
    case Opcode::kClamp: return n_in == 3 && ClampSpan(in[0], in[1], in[2], ot, out, n);
    default: break;
  }
  switch (GetOpcodeFamily(op)) {
    case OpcodeFamily::kElementwiseUnary: return n_in == 1 && UnarySpan(op, in[0], ot, out, n);
    case OpcodeFamily::kElementwiseBinary:
      return n_in == 2 && BinarySpan(op, in[0], in[1], ot, out, n);
    default: return false;
  }
}

namespace {

// Runs k's elementwise op through ElementwiseSpan on whole arrays. The output
// takes operand `take`'s buffer when it may (else `alt`'s, else a fresh one):
// ElementwiseSpan allows same-index aliasing. An operand of one element
// feeding a larger result is read as a scalar (select's predicate, clamp's
// bounds).
StatusOr<Literal> RunSpan(KernelArgs& k, int take, int alt, PrimitiveType type_for_error) {
  const int n_in = static_cast<int>(k.ops.size());
  if (n_in > 3) return InstrError(k.instr, "too many operands");
  const int64_t n = k.shape().ElementCount();
  SpanOperand ops[3];
  // Views first: the output may be moved out of an operand below.
  for (int i = 0; i < n_in; ++i)
    ops[i] = {k.op(i).raw(), k.op(i).element_type(), k.op(i).element_count() == 1 && n != 1};
  Literal out = take >= 0 && k.donatable[take] ? k.TakeOrAllocate(take)
                : alt >= 0                     ? k.TakeOrAllocate(alt)
                                               : Literal::Uninitialized(k.shape());
  if (!ElementwiseSpan(k.instr, ops, n_in, out.element_type(), out.raw(), n))
    return OpTypeError(k.instr, type_for_error);
  return out;
}

}  // namespace

StatusOr<Literal> EvalUnary(KernelArgs& k) {
  return RunSpan(k, 0, -1, k.op(0).element_type());
}

StatusOr<Literal> EvalBinary(KernelArgs& k) {
  const Instruction& instr = k.instr;
  PrimitiveType t = k.op(0).element_type();
  if (k.op(1).element_type() != t || k.op(0).element_count() != k.op(1).element_count())
    return InstrError(instr, "operands " + k.op(0).shape().ToString(false) + " and " +
                                 k.op(1).shape().ToString(false) + " differ");
  return RunSpan(k, 0, 1, t);
}

StatusOr<Literal> EvalCompare(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (!instr.attrs().comparison_direction)
    return InstrError(instr, "compare needs a direction");
  PrimitiveType t = k.op(0).element_type();
  if (k.op(1).element_type() != t || k.op(0).element_count() != k.op(1).element_count())
    return InstrError(instr, "operands " + k.op(0).shape().ToString(false) + " and " +
                                 k.op(1).shape().ToString(false) + " differ");
  return RunSpan(k, 0, 1, t);
}

StatusOr<Literal> EvalSelect(KernelArgs& k) {
  const Literal& pred = k.op(0);
  if (pred.element_type() != PrimitiveType::PRED)
    return InstrError(k.instr, "select predicate must be pred");
  int64_t n = k.op(1).element_count();
  if (k.op(2).element_count() != n || (pred.element_count() != n && pred.element_count() != 1))
    return InstrError(k.instr, "select operand shapes differ");
  return RunSpan(k, 1, 2, k.op(1).element_type());
}

StatusOr<Literal> EvalClamp(KernelArgs& k) {
  PrimitiveType t = k.op(1).element_type();
  int64_t n = k.op(1).element_count();
  const Literal *lo = &k.op(0), *hi = &k.op(2);
  if (lo->element_type() != t || hi->element_type() != t ||
      (lo->element_count() != n && lo->element_count() != 1) ||
      (hi->element_count() != n && hi->element_count() != 1))
    return InstrError(k.instr, "clamp operand shapes differ");
  return RunSpan(k, 1, -1, t);
}

Literal ConvertLiteral(const Literal& in, PrimitiveType to) {
  PrimitiveType from = in.element_type();
  if (from == to) return in;
  if (IsComplex(from) || IsComplex(to)) return ConvertComplex(in, to);  // kernels_complex.cc
  Shape s = in.shape();
  s.set_element_type(to);
  Literal out = Literal::Uninitialized(s);
  // Sub-byte and other unsupported types have no conversion: zeros.
  if (!ConvertSpan(from, to, in.raw(), out.raw(), in.element_count())) return Literal(s);
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
