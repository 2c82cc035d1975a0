// A Literal is a dense, row-major array value (or a tuple of them): the value
// of a `constant` instruction in the IR and the tensor type of the runtime.
// Elements are stored in their own type (bf16 as 16-bit words, pred as one byte
// 0/1); typed access goes through Get/Set or the raw data<T>() pointer.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/buffer_cache.h"
#include "ir/shape.h"
#include "support/check.h"

namespace meshsplit {

// Allocator of literal bytes: leaves them uninitialised on resize (used only
// by Literal::Uninitialized; every other path still zero-fills explicitly),
// and takes large blocks from the reuse cache of ir/buffer_cache.h.
template <typename T>
struct DefaultInitAllocator {
  using value_type = T;
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(AllocateBuffer(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { FreeBuffer(p, n * sizeof(T)); }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const DefaultInitAllocator<U>&) const noexcept {
    return true;
  }
};

class Literal {
 public:
  Literal() = default;
  // Zero-initialised value of `shape` (tuples get zeroed elements).
  explicit Literal(const Shape& shape);
  // An array value of `shape` whose bytes are left uninitialised, for kernels
  // that overwrite every element (saves a full pass over large outputs).
  // REQUIRES: shape.IsArray().
  static Literal Uninitialized(const Shape& shape);

  const Shape& shape() const { return shape_; }
  PrimitiveType element_type() const { return shape_.element_type(); }
  int64_t element_count() const { return shape_.ElementCount(); }
  int64_t size_bytes() const { return static_cast<int64_t>(bytes_.size()); }

  uint8_t* raw() { return bytes_.data(); }
  const uint8_t* raw() const { return bytes_.data(); }
  template <typename T>
  T* data() { return reinterpret_cast<T*>(bytes_.data()); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes_.data()); }

  // Element `linear_index` converted to/from double (exact for every type
  // except 64-bit integers beyond 2^53; use GetInt for those). f8 types
  // decode their code and round to nearest even when set; complex types
  // read their real part and set (v, 0).
  double GetDouble(int64_t linear_index) const;
  void SetDouble(int64_t linear_index, double value);
  int64_t GetInt(int64_t linear_index) const;  // integers and pred
  void SetInt(int64_t linear_index, int64_t value);
  uint64_t GetUint(int64_t linear_index) const;

  // Tuple literals.
  std::vector<Literal>& elements() { return elements_; }
  const std::vector<Literal>& elements() const { return elements_; }
  static Literal MakeTuple(std::vector<Literal> elements);

  // Scalars.
  static Literal ScalarF32(float v);
  static Literal ScalarS32(int32_t v);
  static Literal ScalarOfType(PrimitiveType t, double v);

  // XLA's literal text without the shape: "{ {1, 2}, {3, 4} }" for arrays,
  // "42" for scalars, "(1, {2})" for tuples. Floats print with the fewest
  // digits that read back to the same value.
  std::string ToString() const;

  // Bitwise equality of shape (ignoring layout) and contents.
  bool BitwiseEqual(const Literal& other) const;

 private:
  Shape shape_;
  std::vector<uint8_t, DefaultInitAllocator<uint8_t>> bytes_;
  std::vector<Literal> elements_;
};

// NaNs in HLO text, as XLA writes them: "nan" or "-nan", followed by
// "(0x<payload>)" when the mantissa is not the plain quiet NaN's. NanText
// reads the NaN of element type `t` held (widened) in `v`; payloads are
// kept for f16, bf16, f32 and f64, other types print the bare form.
// MakeNan builds that NaN as a double (a payload of 0 means the plain
// quiet NaN; only payloads with the quiet bit survive narrowing).
std::string NanText(double v, PrimitiveType t);
double MakeNan(bool negative, uint64_t payload, PrimitiveType t);

}  // namespace meshsplit
