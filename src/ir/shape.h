// Element types and shapes of HLO values: arrays (`f32[8,128]{1,0}`), tuples
// (`(f32[2], s32[])`) and tokens. Layouts are parsed and kept verbatim so that
// printing reproduces them; execution is always row-major.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshsplit {

#define MS_PRIMITIVE_TYPES(X)                       \
  X(PRED, "pred", 1) X(S2, "s2", 1) X(S4, "s4", 1)  \
  X(S8, "s8", 1) X(S16, "s16", 2) X(S32, "s32", 4)  \
  X(S64, "s64", 8) X(U2, "u2", 1) X(U4, "u4", 1)    \
  X(U8, "u8", 1) X(U16, "u16", 2) X(U32, "u32", 4)  \
  X(U64, "u64", 8) X(F16, "f16", 2) X(BF16, "bf16", 2) \
  X(F32, "f32", 4) X(F64, "f64", 8)                 \
  X(F8E4M3FN, "f8e4m3fn", 1) X(F8E5M2, "f8e5m2", 1) \
  X(F8E4M3, "f8e4m3", 1) X(F8E3M4, "f8e3m4", 1)     \
  X(F8E4M3FNUZ, "f8e4m3fnuz", 1)                    \
  X(F8E5M2FNUZ, "f8e5m2fnuz", 1)                    \
  X(F8E4M3B11FNUZ, "f8e4m3b11fnuz", 1)              \
  X(F8E8M0FNU, "f8e8m0fnu", 1) X(F4E2M1FN, "f4e2m1fn", 1) \
  X(C64, "c64", 8) X(C128, "c128", 16)              \
  X(TOKEN, "token", 0) X(TUPLE, "tuple", 0) X(OPAQUE, "opaque", 0)

enum class PrimitiveType {
#define MS_PT_ENUM(e, s, b) e,
  MS_PRIMITIVE_TYPES(MS_PT_ENUM)
#undef MS_PT_ENUM
};

std::string_view PrimitiveTypeName(PrimitiveType t);
std::optional<PrimitiveType> ParsePrimitiveType(std::string_view name);
// Bytes per element in memory (sub-byte types take one byte each).
int64_t ByteWidth(PrimitiveType t);
bool IsFloatingPoint(PrimitiveType t);  // f16, bf16, f32, f64 and f8/f4 kinds
bool IsSignedInteger(PrimitiveType t);
bool IsUnsignedInteger(PrimitiveType t);
bool IsInteger(PrimitiveType t);  // signed or unsigned, not pred
bool IsComplex(PrimitiveType t);
bool IsArrayType(PrimitiveType t);  // not tuple, token or opaque

class Shape {
 public:
  Shape() : type_(PrimitiveType::TUPLE) {}  // empty tuple
  Shape(PrimitiveType type, std::vector<int64_t> dims)
      : type_(type), dims_(std::move(dims)) {}
  static Shape Tuple(std::vector<Shape> elements);
  static Shape Token() { return Shape(PrimitiveType::TOKEN, {}); }

  PrimitiveType element_type() const { return type_; }
  void set_element_type(PrimitiveType t) { type_ = t; }
  bool IsTuple() const { return type_ == PrimitiveType::TUPLE; }
  bool IsToken() const { return type_ == PrimitiveType::TOKEN; }
  bool IsArray() const { return IsArrayType(type_); }

  // Array shapes.
  const std::vector<int64_t>& dimensions() const { return dims_; }
  std::vector<int64_t>& mutable_dimensions() { return dims_; }
  int64_t dimensions(int i) const { return dims_[i]; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t ElementCount() const;  // 1 for scalars; REQUIRES: IsArray()
  int64_t ByteSize() const;      // sum over tuple leaves
  // Empty when every array leaf has non-negative dimensions and a byte size
  // that fits in int64_t (so ElementCount and ByteSize are defined);
  // otherwise what is wrong. Importers check what they build with it.
  std::string SizeError() const;

  // Dimensions written `<=N` are dynamic with bound N.
  const std::vector<bool>& dynamic_dimensions() const { return dynamic_; }
  void set_dynamic_dimensions(std::vector<bool> d) { dynamic_ = std::move(d); }

  // The layout exactly as written between the braces, e.g. "1,0" or
  // "1,0:T(8,128)"; nullopt when the text had none. Kept, never interpreted
  // beyond minor_to_major() below.
  const std::optional<std::string>& layout() const { return layout_; }
  void set_layout(std::optional<std::string> l) { layout_ = std::move(l); }
  void clear_layout();  // recursively
  // Default row-major layout "{rank-1,...,0}" text (without braces).
  static std::string DefaultLayout(int rank);

  // Tuple shapes.
  const std::vector<Shape>& tuple_shapes() const { return tuple_; }
  std::vector<Shape>& mutable_tuple_shapes() { return tuple_; }
  const Shape& tuple_shapes(int i) const { return tuple_[i]; }
  int tuple_size() const { return static_cast<int>(tuple_.size()); }

  // "f32[8,128]{1,0}" or "(f32[2]{0}, s32[])". With print_layout=false the
  // layout is omitted.
  std::string ToString(bool print_layout = true) const;

  // Same element type and dimensions (recursively); layouts ignored.
  bool Compatible(const Shape& other) const;
  bool operator==(const Shape& other) const;  // also compares layouts
  bool operator!=(const Shape& other) const { return !(*this == other); }

 private:
  PrimitiveType type_;
  std::vector<int64_t> dims_;
  std::vector<bool> dynamic_;
  std::optional<std::string> layout_;
  std::vector<Shape> tuple_;
};

// Row-major strides of an array shape, in elements.
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims);

}  // namespace meshsplit
