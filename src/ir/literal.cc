// Literal storage, element access and text form.
#include "ir/literal.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "ir/float8.h"
#include "support/float16.h"
#include "support/saturating_convert.h"

namespace meshsplit {

Literal::Literal(const Shape& shape) : shape_(shape) {
  if (shape.IsTuple()) {
    for (const Shape& s : shape.tuple_shapes()) elements_.emplace_back(s);
  } else if (shape.IsArray()) {
    bytes_.assign(static_cast<size_t>(shape.ElementCount() * ByteWidth(shape.element_type())), 0);
  }
}

Literal Literal::Uninitialized(const Shape& shape) {
  MS_CHECK(shape.IsArray());
  Literal l;
  l.shape_ = shape;
  l.bytes_.resize(static_cast<size_t>(shape.ElementCount() * ByteWidth(shape.element_type())));
  return l;
}

Literal Literal::MakeTuple(std::vector<Literal> elements) {
  std::vector<Shape> shapes;
  for (const Literal& e : elements) shapes.push_back(e.shape());
  Literal l;
  l.shape_ = Shape::Tuple(std::move(shapes));
  l.elements_ = std::move(elements);
  return l;
}

Literal Literal::ScalarF32(float v) {
  Literal l(Shape(PrimitiveType::F32, {}));
  l.data<float>()[0] = v;
  return l;
}

Literal Literal::ScalarS32(int32_t v) {
  Literal l(Shape(PrimitiveType::S32, {}));
  l.data<int32_t>()[0] = v;
  return l;
}

Literal Literal::ScalarOfType(PrimitiveType t, double v) {
  Literal l(Shape(t, {}));
  l.SetDouble(0, v);
  return l;
}

double Literal::GetDouble(int64_t i) const {
  switch (element_type()) {
    case PrimitiveType::PRED: return data<uint8_t>()[i] != 0;
    case PrimitiveType::S8: return data<int8_t>()[i];
    case PrimitiveType::S16: return data<int16_t>()[i];
    case PrimitiveType::S32: return data<int32_t>()[i];
    case PrimitiveType::S64: return static_cast<double>(data<int64_t>()[i]);
    case PrimitiveType::U8: return data<uint8_t>()[i];
    case PrimitiveType::U16: return data<uint16_t>()[i];
    case PrimitiveType::U32: return data<uint32_t>()[i];
    case PrimitiveType::U64: return static_cast<double>(data<uint64_t>()[i]);
    case PrimitiveType::F16: return F16ToF32(data<uint16_t>()[i]);
    case PrimitiveType::BF16: return Bf16ToF32(data<uint16_t>()[i]);
    case PrimitiveType::F32: return data<float>()[i];
    case PrimitiveType::F64: return data<double>()[i];
    // Complex values read as their real part (XLA's complex -> real convert).
    case PrimitiveType::C64: return data<float>()[2 * i];
    case PrimitiveType::C128: return data<double>()[2 * i];
    default:
      if (IsF8Type(element_type())) return F8ToF32(element_type(), data<uint8_t>()[i]);
      // Sub-byte types are stored one byte per element, uninterpreted.
      return data<uint8_t>()[i];
  }
}

void Literal::SetDouble(int64_t i, double v) {
  switch (element_type()) {
    case PrimitiveType::PRED: data<uint8_t>()[i] = v != 0; return;
    case PrimitiveType::S8: data<int8_t>()[i] = SaturatingConvert<int8_t>(v); return;
    case PrimitiveType::S16: data<int16_t>()[i] = SaturatingConvert<int16_t>(v); return;
    case PrimitiveType::S32: data<int32_t>()[i] = SaturatingConvert<int32_t>(v); return;
    case PrimitiveType::S64: data<int64_t>()[i] = SaturatingConvert<int64_t>(v); return;
    case PrimitiveType::U8: data<uint8_t>()[i] = SaturatingConvert<uint8_t>(v); return;
    case PrimitiveType::U16: data<uint16_t>()[i] = SaturatingConvert<uint16_t>(v); return;
    case PrimitiveType::U32: data<uint32_t>()[i] = SaturatingConvert<uint32_t>(v); return;
    case PrimitiveType::U64: data<uint64_t>()[i] = SaturatingConvert<uint64_t>(v); return;
    case PrimitiveType::F16: data<uint16_t>()[i] = F32ToF16(static_cast<float>(v)); return;
    case PrimitiveType::BF16: data<uint16_t>()[i] = F32ToBf16(static_cast<float>(v)); return;
    case PrimitiveType::F32: data<float>()[i] = static_cast<float>(v); return;
    case PrimitiveType::F64: data<double>()[i] = v; return;
    case PrimitiveType::C64:
      data<float>()[2 * i] = static_cast<float>(v);
      data<float>()[2 * i + 1] = 0;
      return;
    case PrimitiveType::C128:
      data<double>()[2 * i] = v;
      data<double>()[2 * i + 1] = 0;
      return;
    default:
      if (IsF8Type(element_type())) {
        data<uint8_t>()[i] = F64ToF8(element_type(), v);
        return;
      }
      data<uint8_t>()[i] = static_cast<uint8_t>(v);
      return;
  }
}

int64_t Literal::GetInt(int64_t i) const {
  switch (element_type()) {
    case PrimitiveType::S64: return data<int64_t>()[i];
    case PrimitiveType::U64: return static_cast<int64_t>(data<uint64_t>()[i]);
    default: return static_cast<int64_t>(GetDouble(i));
  }
}

uint64_t Literal::GetUint(int64_t i) const {
  switch (element_type()) {
    case PrimitiveType::U64: return data<uint64_t>()[i];
    case PrimitiveType::S64: return static_cast<uint64_t>(data<int64_t>()[i]);
    default: return static_cast<uint64_t>(GetInt(i));
  }
}

void Literal::SetInt(int64_t i, int64_t v) {
  switch (element_type()) {
    case PrimitiveType::S64: data<int64_t>()[i] = v; return;
    case PrimitiveType::U64: data<uint64_t>()[i] = SaturatingConvert<uint64_t>(v); return;
    default: SetDouble(i, static_cast<double>(v)); return;
  }
}

namespace {

// Mantissa bits of the float types whose NaN payloads we keep; 0 otherwise.
int NanMantissaBits(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::F16: return 10;
    case PrimitiveType::BF16: return 7;
    case PrimitiveType::F32: case PrimitiveType::C64: return 23;
    case PrimitiveType::F64: case PrimitiveType::C128: return 52;
    default: return 0;
  }
}

}  // namespace

std::string NanText(double v, PrimitiveType t) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, 8);
  std::string out = (bits >> 63) ? "-nan" : "nan";
  const int m = NanMantissaBits(t);
  if (m == 0) return out;
  const uint64_t payload = (bits & ((uint64_t{1} << 52) - 1)) >> (52 - m);
  if (payload == uint64_t{1} << (m - 1)) return out;  // the plain quiet NaN
  char buf[32];
  std::snprintf(buf, sizeof(buf), "(0x%llx)", static_cast<unsigned long long>(payload));
  return out + buf;
}

double MakeNan(bool negative, uint64_t payload, PrimitiveType t) {
  const int m = NanMantissaBits(t) > 0 ? NanMantissaBits(t) : 52;
  uint64_t mantissa = (payload & ((uint64_t{1} << m) - 1)) << (52 - m);
  if (mantissa == 0) mantissa = uint64_t{1} << 51;  // a NaN needs a payload
  const uint64_t bits = (uint64_t{negative} << 63) | (uint64_t{0x7ff} << 52) | mantissa;
  double v = 0;
  std::memcpy(&v, &bits, 8);
  return v;
}

namespace {

std::string FormatFloat(double v, PrimitiveType t) {
  if (std::isnan(v)) return NanText(v, t);
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::to_chars_result r;
  if (t == PrimitiveType::F64) {
    r = std::to_chars(buf, buf + sizeof(buf), v);
  } else {
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
  }
  return std::string(buf, r.ptr);
}

std::string FormatElement(const Literal& l, int64_t i) {
  PrimitiveType t = l.element_type();
  if (t == PrimitiveType::PRED) return l.GetInt(i) ? "true" : "false";
  if (IsFloatingPoint(t)) return FormatFloat(l.GetDouble(i), t);
  if (t == PrimitiveType::C64)
    return "(" + FormatFloat(l.data<float>()[2 * i], PrimitiveType::F32) + ", " +
           FormatFloat(l.data<float>()[2 * i + 1], PrimitiveType::F32) + ")";
  if (t == PrimitiveType::C128)
    return "(" + FormatFloat(l.data<double>()[2 * i], PrimitiveType::F64) + ", " +
           FormatFloat(l.data<double>()[2 * i + 1], PrimitiveType::F64) + ")";
  if (t == PrimitiveType::U64) return std::to_string(l.GetUint(i));
  return std::to_string(l.GetInt(i));
}

void FormatArray(const Literal& l, int dim, int64_t& index, std::string& out) {
  const auto& dims = l.shape().dimensions();
  if (dim == static_cast<int>(dims.size())) {
    out += FormatElement(l, index++);
    return;
  }
  out += "{";
  for (int64_t i = 0; i < dims[dim]; ++i) {
    if (i > 0) out += ", ";
    FormatArray(l, dim + 1, index, out);
  }
  out += "}";
}

}  // namespace

std::string Literal::ToString() const {
  if (shape_.IsTuple()) {
    std::string out = "(";
    for (size_t i = 0; i < elements_.size(); ++i) {
      if (i > 0) out += ", ";
      out += elements_[i].ToString();
    }
    return out + ")";
  }
  if (!shape_.IsArray()) return "";
  int64_t index = 0;
  std::string out;
  FormatArray(*this, 0, index, out);
  return out;
}

bool Literal::BitwiseEqual(const Literal& other) const {
  if (!shape_.Compatible(other.shape_)) return false;
  if (shape_.IsTuple()) {
    for (size_t i = 0; i < elements_.size(); ++i)
      if (!elements_[i].BitwiseEqual(other.elements_[i])) return false;
    return true;
  }
  return bytes_ == other.bytes_;
}

}  // namespace meshsplit
