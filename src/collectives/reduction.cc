// Fixed-order element-wise reductions for the collectives backends. The
// kernel works on L1-sized chunks: it combines the first two inputs into a
// local buffer, folds in the others one at a time, then stores the chunk, so
// that each step is a simple vectorisable loop and `out` may alias an input.
#include "collectives/reduction.h"

#include <algorithm>
#include <complex>
#include <cstring>
#include <memory>
#include <type_traits>

#include "ir/float8.h"
#include "support/check.h"
#include "support/float16.h"

namespace meshsplit {
namespace {

// Storage type S in memory, compute type C in registers. Round() maps a C
// value to the nearest value representable in S (a no-op unless S is
// narrower), which makes every step round to the element type.
template <typename T>
struct PlainTraits {
  using S = T;
  using C = T;
  static C Load(S v) { return v; }
  static S Store(C v) { return v; }
  static C Round(C v) { return v; }
};

struct Bf16Traits {
  using S = uint16_t;
  using C = float;
  static C Load(S v) { return Bf16ToF32(v); }
  static S Store(C v) { return F32ToBf16(v); }
  static C Round(C v) { return Bf16ToF32(F32ToBf16(v)); }
};

struct F16Traits {
  using S = uint16_t;
  using C = float;
  static C Load(S v) { return F16ToF32(v); }
  static S Store(C v) { return F32ToF16(v); }
  static C Round(C v) { return F16ToF32(F32ToF16(v)); }
};

// The f8 types compute in f32 and round every step to the format.
template <PrimitiveType T>
struct F8Traits {
  using S = uint8_t;
  using C = float;
  static C Load(S v) { return F8ToF32(T, v); }
  static S Store(C v) { return F32ToF8(T, v); }
  static C Round(C v) { return F8ToF32(T, F32ToF8(T, v)); }
};

// pred is one byte holding 0 or 1; nonzero bytes are read as true.
struct PredTraits {
  using S = uint8_t;
  using C = uint8_t;
  static C Load(S v) { return v != 0; }
  static S Store(C v) { return v; }
  static C Round(C v) { return v; }
};

// Bytes of the chunk buffer: L1-sized, for every compute type.
constexpr int64_t kChunkBytes = 16384;

// The calling thread's chunk buffer (kChunkBytes, 64-byte aligned), on the
// heap and reused by every reduction the thread runs (none nests another).
// It used to be a local array of each ReduceChunked instantiation; where
// the compiler inlines them all into ReduceInOrder's switch without
// sharing their stack slots (AddressSanitizer keeps every local apart to
// catch use after scope), that frame was ~1.5 MiB (clang-15 -O1 ASan,
// -fstack-usage), past the 1 MiB stacks of a big mesh's device threads
// (ThreadsBigMeshTest overflowed into a neighbour's stack).
void* ChunkBuffer() {
  struct alignas(64) Line {
    unsigned char bytes[64];
  };
  thread_local std::unique_ptr<Line[]> buffer;
  if (buffer == nullptr) buffer = std::make_unique<Line[]>(kChunkBytes / sizeof(Line));
  return buffer.get();
}

template <typename Tr, typename Op>
void ReduceChunked(std::span<const void* const> inputs,
                   std::span<void* const> outputs, int64_t count, Op op) {
  using S = typename Tr::S;
  using C = typename Tr::C;
  constexpr int64_t kChunk = kChunkBytes / static_cast<int64_t>(sizeof(C));
  static_assert(kChunk >= 256 && alignof(C) <= 64);
  C* __restrict const tmp = static_cast<C*>(ChunkBuffer());
  const size_t n_in = inputs.size();
  for (int64_t base = 0; base < count; base += kChunk) {
    const int64_t n = std::min(kChunk, count - base);
    const S* a = static_cast<const S*>(inputs[0]) + base;
    if (n_in == 1) {
      for (int64_t i = 0; i < n; ++i) tmp[i] = Tr::Load(a[i]);
    } else {
      const S* b = static_cast<const S*>(inputs[1]) + base;
      for (int64_t i = 0; i < n; ++i)
        tmp[i] = Tr::Round(op(Tr::Load(a[i]), Tr::Load(b[i])));
      for (size_t k = 2; k < n_in; ++k) {
        const S* c = static_cast<const S*>(inputs[k]) + base;
        for (int64_t i = 0; i < n; ++i)
          tmp[i] = Tr::Round(op(tmp[i], Tr::Load(c[i])));
      }
    }
    for (void* out : outputs) {
      S* dst = static_cast<S*>(out) + base;
      if constexpr (std::is_same_v<S, C>) {
        std::memcpy(dst, tmp, n * sizeof(S));
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = Tr::Store(tmp[i]);
      }
    }
  }
}

// Integer arithmetic that wraps instead of overflowing (signed overflow is
// undefined in C++; XLA defines it as two's complement wrap-around). Types
// narrower than int are widened to an unsigned type first so that the usual
// promotion to int cannot overflow either.
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

template <typename T>
T WrapAdd(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) +
                        static_cast<WrapType<T>>(b));
}
template <typename T>
T WrapMul(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) *
                        static_cast<WrapType<T>>(b));
}

template <typename T>
void ReduceInteger(ReductionKind kind, std::span<const void* const> inputs,
                   std::span<void* const> out, int64_t count) {
  using Tr = PlainTraits<T>;
  switch (kind) {
    case ReductionKind::kAdd:
      return ReduceChunked<Tr>(inputs, out, count, WrapAdd<T>);
    case ReductionKind::kMul:
      return ReduceChunked<Tr>(inputs, out, count, WrapMul<T>);
    case ReductionKind::kMin:
      return ReduceChunked<Tr>(inputs, out, count,
                               [](T a, T b) { return b < a ? b : a; });
    case ReductionKind::kMax:
      return ReduceChunked<Tr>(inputs, out, count,
                               [](T a, T b) { return b > a ? b : a; });
    case ReductionKind::kAnd:
      return ReduceChunked<Tr>(inputs, out, count,
                               [](T a, T b) { return static_cast<T>(a & b); });
    case ReductionKind::kOr:
      return ReduceChunked<Tr>(inputs, out, count,
                               [](T a, T b) { return static_cast<T>(a | b); });
    case ReductionKind::kXor:
      return ReduceChunked<Tr>(inputs, out, count,
                               [](T a, T b) { return static_cast<T>(a ^ b); });
  }
}

// Floating point in compute type C (f32 for the 16-bit types).
template <typename Tr>
void ReduceFloat(ReductionKind kind, std::span<const void* const> inputs,
                 std::span<void* const> out, int64_t count) {
  using C = typename Tr::C;
  switch (kind) {
    case ReductionKind::kAdd:
      return ReduceChunked<Tr>(inputs, out, count,
                               [](C a, C b) { return a + b; });
    case ReductionKind::kMul:
      return ReduceChunked<Tr>(inputs, out, count,
                               [](C a, C b) { return a * b; });
    case ReductionKind::kMin:
      // HLO minimum: NaN wins; on ties the earlier operand is kept.
      return ReduceChunked<Tr>(inputs, out, count, [](C a, C b) {
        return a != a ? a : (b != b ? b : (b < a ? b : a));
      });
    case ReductionKind::kMax:
      return ReduceChunked<Tr>(inputs, out, count, [](C a, C b) {
        return a != a ? a : (b != b ? b : (b > a ? b : a));
      });
    case ReductionKind::kAnd:
    case ReductionKind::kOr:
    case ReductionKind::kXor:
      break;
  }
  MS_CHECK_MSG(false, "bitwise reduction on a float type");
}

template <typename T>
void ReduceComplex(ReductionKind kind, std::span<const void* const> inputs,
                   std::span<void* const> out, int64_t count) {
  using Tr = PlainTraits<T>;
  if (kind == ReductionKind::kAdd)
    return ReduceChunked<Tr>(inputs, out, count, [](T a, T b) { return a + b; });
  MS_CHECK_MSG(kind == ReductionKind::kMul, "complex min/max/bitwise");
  ReduceChunked<Tr>(inputs, out, count, [](T a, T b) { return a * b; });
}

void ReducePred(ReductionKind kind, std::span<const void* const> inputs,
                std::span<void* const> out, int64_t count) {
  using C = uint8_t;
  auto and_op = [](C a, C b) -> C { return a & b; };
  auto or_op = [](C a, C b) -> C { return a | b; };
  switch (kind) {
    case ReductionKind::kAdd:  // bool + bool stored back into bool is or
    case ReductionKind::kOr:
    case ReductionKind::kMax:
      return ReduceChunked<PredTraits>(inputs, out, count, or_op);
    case ReductionKind::kMul:
    case ReductionKind::kAnd:
    case ReductionKind::kMin:
      return ReduceChunked<PredTraits>(inputs, out, count, and_op);
    case ReductionKind::kXor:
      return ReduceChunked<PredTraits>(inputs, out, count,
                                       [](C a, C b) -> C { return a ^ b; });
  }
}

}  // namespace

void ReduceInOrder(ReductionKind kind, PrimitiveType type,
                   std::span<const void* const> inputs, void* out,
                   int64_t count) {
  void* const outputs[] = {out};
  ReduceInOrder(kind, type, inputs, outputs, count);
}

void ReduceInOrder(ReductionKind kind, PrimitiveType type,
                   std::span<const void* const> inputs,
                   std::span<void* const> out, int64_t count) {
  MS_CHECK(!inputs.empty() && !out.empty());
  if (count <= 0) return;
  switch (type) {
    case PrimitiveType::PRED:
      return ReducePred(kind, inputs, out, count);
    case PrimitiveType::S8:
      return ReduceInteger<int8_t>(kind, inputs, out, count);
    case PrimitiveType::S16:
      return ReduceInteger<int16_t>(kind, inputs, out, count);
    case PrimitiveType::S32:
      return ReduceInteger<int32_t>(kind, inputs, out, count);
    case PrimitiveType::S64:
      return ReduceInteger<int64_t>(kind, inputs, out, count);
    case PrimitiveType::U8:
      return ReduceInteger<uint8_t>(kind, inputs, out, count);
    case PrimitiveType::U16:
      return ReduceInteger<uint16_t>(kind, inputs, out, count);
    case PrimitiveType::U32:
      return ReduceInteger<uint32_t>(kind, inputs, out, count);
    case PrimitiveType::U64:
      return ReduceInteger<uint64_t>(kind, inputs, out, count);
    case PrimitiveType::F16:
      return ReduceFloat<F16Traits>(kind, inputs, out, count);
    case PrimitiveType::BF16:
      return ReduceFloat<Bf16Traits>(kind, inputs, out, count);
    case PrimitiveType::F32:
      return ReduceFloat<PlainTraits<float>>(kind, inputs, out, count);
    case PrimitiveType::F64:
      return ReduceFloat<PlainTraits<double>>(kind, inputs, out, count);
#define MS_F8_CASE(T) \
  case PrimitiveType::T: return ReduceFloat<F8Traits<PrimitiveType::T>>(kind, inputs, out, count);
    MS_F8_CASE(F8E4M3FN) MS_F8_CASE(F8E5M2) MS_F8_CASE(F8E4M3) MS_F8_CASE(F8E3M4)
    MS_F8_CASE(F8E4M3FNUZ) MS_F8_CASE(F8E5M2FNUZ) MS_F8_CASE(F8E4M3B11FNUZ)
    MS_F8_CASE(F8E8M0FNU)
#undef MS_F8_CASE
    case PrimitiveType::C64:
      return ReduceComplex<std::complex<float>>(kind, inputs, out, count);
    case PrimitiveType::C128:
      return ReduceComplex<std::complex<double>>(kind, inputs, out, count);
    default:
      break;
  }
  MS_CHECK_MSG(false, "reduction over unsupported element type "
                          << PrimitiveTypeName(type));
}

}  // namespace meshsplit
