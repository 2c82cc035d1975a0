// Element types and shapes.
#include "ir/shape.h"

#include <algorithm>

#include "support/check.h"

namespace meshsplit {

std::string_view PrimitiveTypeName(PrimitiveType t) {
  switch (t) {
#define MS_PT_NAME(e, s, b) \
  case PrimitiveType::e:    \
    return s;
    MS_PRIMITIVE_TYPES(MS_PT_NAME)
#undef MS_PT_NAME
  }
  return "?";
}

std::optional<PrimitiveType> ParsePrimitiveType(std::string_view name) {
#define MS_PT_PARSE(e, s, b) \
  if (name == s) return PrimitiveType::e;
  MS_PRIMITIVE_TYPES(MS_PT_PARSE)
#undef MS_PT_PARSE
  return std::nullopt;
}

int64_t ByteWidth(PrimitiveType t) {
  switch (t) {
#define MS_PT_BYTES(e, s, b) \
  case PrimitiveType::e:     \
    return b;
    MS_PRIMITIVE_TYPES(MS_PT_BYTES)
#undef MS_PT_BYTES
  }
  return 0;
}

bool IsFloatingPoint(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::F16: case PrimitiveType::BF16: case PrimitiveType::F32:
    case PrimitiveType::F64: case PrimitiveType::F8E4M3FN:
    case PrimitiveType::F8E5M2: case PrimitiveType::F8E4M3:
    case PrimitiveType::F8E3M4: case PrimitiveType::F8E4M3FNUZ:
    case PrimitiveType::F8E5M2FNUZ: case PrimitiveType::F8E4M3B11FNUZ:
    case PrimitiveType::F8E8M0FNU: case PrimitiveType::F4E2M1FN:
      return true;
    default:
      return false;
  }
}

bool IsSignedInteger(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::S2: case PrimitiveType::S4: case PrimitiveType::S8:
    case PrimitiveType::S16: case PrimitiveType::S32: case PrimitiveType::S64:
      return true;
    default:
      return false;
  }
}

bool IsUnsignedInteger(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::U2: case PrimitiveType::U4: case PrimitiveType::U8:
    case PrimitiveType::U16: case PrimitiveType::U32: case PrimitiveType::U64:
      return true;
    default:
      return false;
  }
}

bool IsInteger(PrimitiveType t) {
  return IsSignedInteger(t) || IsUnsignedInteger(t);
}
bool IsComplex(PrimitiveType t) {
  return t == PrimitiveType::C64 || t == PrimitiveType::C128;
}
bool IsArrayType(PrimitiveType t) {
  return t != PrimitiveType::TUPLE && t != PrimitiveType::TOKEN &&
         t != PrimitiveType::OPAQUE;
}

Shape Shape::Tuple(std::vector<Shape> elements) {
  Shape s;
  s.tuple_ = std::move(elements);
  return s;
}

int64_t Shape::ElementCount() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

std::string Shape::SizeError() const {
  if (IsTuple()) {
    for (const Shape& s : tuple_)
      if (std::string e = s.SizeError(); !e.empty()) return e;
    return "";
  }
  if (!IsArray()) return "";
  int64_t bytes = std::max<int64_t>(ByteWidth(type_), 1);
  for (int64_t d : dims_) {
    if (d < 0) return "dimension size must not be negative, got " + std::to_string(d);
    if (__builtin_mul_overflow(bytes, d, &bytes))
      return "shape " + ToString(false) + " has more than 2^63 bytes";
  }
  return "";
}

int64_t Shape::ByteSize() const {
  if (IsTuple()) {
    int64_t total = 0;
    for (const Shape& s : tuple_) total += s.ByteSize();
    return total;
  }
  if (!IsArray()) return 0;
  return ElementCount() * ByteWidth(type_);
}

void Shape::clear_layout() {
  layout_.reset();
  for (Shape& s : tuple_) s.clear_layout();
}

std::string Shape::DefaultLayout(int rank) {
  std::string out;
  for (int i = rank - 1; i >= 0; --i) {
    out += std::to_string(i);
    if (i > 0) out += ",";
  }
  return out;
}

std::string Shape::ToString(bool print_layout) const {
  if (IsTuple()) {
    std::string out = "(";
    for (size_t i = 0; i < tuple_.size(); ++i) {
      if (i > 0) out += ", ";
      out += tuple_[i].ToString(print_layout);
    }
    return out + ")";
  }
  std::string out(PrimitiveTypeName(type_));
  if (!IsArray()) return out;
  out += "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i > 0) out += ",";
    if (i < dynamic_.size() && dynamic_[i]) out += "<=";
    out += std::to_string(dims_[i]);
  }
  out += "]";
  if (print_layout && layout_.has_value()) out += "{" + *layout_ + "}";
  return out;
}

bool Shape::Compatible(const Shape& other) const {
  if (type_ != other.type_) return false;
  if (IsTuple()) {
    if (tuple_.size() != other.tuple_.size()) return false;
    for (size_t i = 0; i < tuple_.size(); ++i)
      if (!tuple_[i].Compatible(other.tuple_[i])) return false;
    return true;
  }
  return dims_ == other.dims_;
}

bool Shape::operator==(const Shape& other) const {
  if (type_ != other.type_ || dims_ != other.dims_ ||
      layout_ != other.layout_ || tuple_.size() != other.tuple_.size())
    return false;
  for (size_t i = 0; i < tuple_.size(); ++i)
    if (tuple_[i] != other.tuple_[i]) return false;
  return true;
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

}  // namespace meshsplit
