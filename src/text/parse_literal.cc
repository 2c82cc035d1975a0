// Shapes, integers and constant literals of the HLO text parser.
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "support/float16.h"
#include "text/minifloat.h"
#include "text/parser_impl.h"

namespace meshsplit::text_internal {

namespace {
constexpr int kMaxRank = 128;
constexpr int kMaxNesting = 256;
constexpr int64_t kMaxSplatBytes = int64_t{1} << 28;
}  // namespace

bool Parser::ParseInt(int64_t* value, const char* what) {
  lex_.SkipTrivia();
  std::string_view text = lex_.text();
  size_t p = lex_.pos();
  size_t q = p;
  if (q < text.size() && text[q] == '-') ++q;
  size_t digits = q;
  while (q < text.size() && IsDigit(text[q])) ++q;
  if (q == digits)
    return ErrorHere(std::string("expected ") + what + ", found " +
                     lex_.DescribeNext());
  auto r = std::from_chars(text.data() + p, text.data() + q, *value);
  if (r.ec != std::errc())
    return Error(p, q - p,
                 "integer " + std::string(text.substr(p, std::min<size_t>(q - p, 40))) +
                     " is out of range");
  lex_.set_pos(q);
  return true;
}

bool Parser::LooksLikeShape() {
  lex_.SkipTrivia();
  std::string_view text = lex_.text();
  size_t p = lex_.pos();
  if (p >= text.size()) return false;
  if (text[p] == '(') return true;
  size_t q = p;
  while (q < text.size() && (IsAlpha(text[q]) || IsDigit(text[q]))) ++q;
  if (q == p) return false;
  // Shape::ToString spells the token type `token` (XLA: `token[]`); as no
  // value may be named like a type, a bare `token` is always a shape.
  if (text.substr(p, q - p) == "token" && (q >= text.size() || !IsNameChar(text[q])))
    return true;
  // Any word glued to '[' is meant as a shape; ParseShape reports a bad
  // element type by name.
  return q < text.size() && text[q] == '[';
}

bool Parser::ParseShape(Shape* shape, int depth) {
  if (depth > kMaxNesting) return ErrorHere("shape is nested too deeply");
  if (lex_.Peek() == '(') {
    lex_.Eat('(');
    std::vector<Shape> elements;
    if (!lex_.Eat(')')) {
      do {
        elements.emplace_back();
        if (!ParseShape(&elements.back(), depth + 1)) return false;
      } while (lex_.Eat(','));
      if (!Expect(')', "to close the tuple shape")) return false;
    }
    *shape = Shape::Tuple(std::move(elements));
    return true;
  }
  size_t type_pos = lex_.pos();
  std::string_view word = lex_.LexAlnum();
  if (word.empty()) return ErrorHere("expected shape, found " + lex_.DescribeNext());
  std::optional<PrimitiveType> type = ParsePrimitiveType(word);
  if (!type || *type == PrimitiveType::TUPLE)
    return Error(type_pos, word.size(),
                 "unknown element type '" + std::string(word) + "'");
  if (lex_.PeekRaw() != '[' && *type == PrimitiveType::TOKEN) {
    *shape = Shape::Token();
    return true;
  }
  if (lex_.PeekRaw() != '[')
    return ErrorHere("expected '[' after element type '" + std::string(word) +
                     "', found " + lex_.DescribeNext());
  lex_.set_pos(lex_.pos() + 1);
  std::vector<int64_t> dims;
  std::vector<bool> dynamic;
  bool any_dynamic = false;
  if (!lex_.Eat(']')) {
    do {
      bool dyn = lex_.EatString("<=");
      if (lex_.Peek() == '?')
        return ErrorHere("unbounded dynamic dimensions ('?') are not supported");
      lex_.SkipTrivia();
      size_t dim_pos = lex_.pos();
      int64_t d = 0;
      if (!ParseInt(&d, "dimension size")) return false;
      if (d < 0)
        return Error(dim_pos, lex_.pos() - dim_pos,
                     "dimension size must not be negative, got " + std::to_string(d));
      if (static_cast<int>(dims.size()) >= kMaxRank)
        return Error(dim_pos, 1, "shape has more than " + std::to_string(kMaxRank) +
                                     " dimensions");
      dims.push_back(d);
      dynamic.push_back(dyn);
      any_dynamic |= dyn;
    } while (lex_.Eat(','));
    if (!Expect(']', "to close the dimensions")) return false;
  }
  if (!IsArrayType(*type) && !dims.empty())
    return Error(type_pos, word.size(),
                 "'" + std::string(word) + "' values have no dimensions");
  Shape s(*type, std::move(dims));
  // The same bound every importer applies: the byte size must fit in int64.
  if (std::string why = s.SizeError(); !why.empty())
    return Error(type_pos, lex_.pos() - type_pos, why);
  if (any_dynamic) s.set_dynamic_dimensions(std::move(dynamic));
  // A layout follows the ']' directly: `{1,0}`, `{1,0:T(8,128)}`, `{}`. The
  // look-ahead keeps `-> f32[] {` (a computation body) from being read as one.
  char next = lex_.PeekRaw(1);
  if (lex_.PeekRaw() == '{' && (IsDigit(next) || next == ':' || next == '}')) {
    size_t open = lex_.pos();
    size_t end = lex_.ScanBalanced(open, 16);
    if (end == Lexer::kNpos) return Error(open, 1, "unterminated layout");
    s.set_layout(std::string(lex_.text().substr(open + 1, end - open - 2)));
    lex_.set_pos(end);
  }
  *shape = std::move(s);
  return true;
}

// --- literals --------------------------------------------------------------

bool Parser::ParseLiteral(const Shape& shape, Literal* literal, int depth) {
  if (depth > kMaxNesting) return ErrorHere("constant is nested too deeply");
  if (shape.IsTuple()) {
    if (!Expect('(', "to begin a tuple constant")) return false;
    std::vector<Literal> elements(shape.tuple_size());
    for (int i = 0; i < shape.tuple_size(); ++i) {
      if (i > 0 && !Expect(',', "between tuple constant elements")) return false;
      if (!ParseLiteral(shape.tuple_shapes(i), &elements[i], depth + 1))
        return false;
    }
    if (!lex_.Eat(')') && !Expect(')', ("after the " + std::to_string(shape.tuple_size()) +
                      " elements of a tuple constant").c_str()))
      return false;
    *literal = Literal::MakeTuple(std::move(elements));
    return true;
  }
  if (!shape.IsArray())
    return ErrorHere("constants of type " + shape.ToString() + " are not supported");
  Shape storage_shape(shape.element_type(), shape.dimensions());
  int64_t count = shape.ElementCount();
  if (shape.rank() > 0 && lex_.Peek() != '{') {
    // Older meshsplit printed an array of one value as that value
    // (`f32[4,4] constant(0)`); it is read as the filled array. XLA reads a
    // rank >= 1 literal element by element and refuses this form. Bound the
    // allocation it implies.
    if (options_.xla_strict)
      return StrictError(lex_.pos(), 1,
                         "array constant of shape " + shape.ToString() +
                             " written as one value; write {...} or broadcast a scalar constant");
    if (count * ByteWidth(shape.element_type()) > kMaxSplatBytes)
      return ErrorHere("constant of shape " + shape.ToString() + " is too large");
    Literal scalar(Shape(shape.element_type(), {}));
    if (!ParseElement(&scalar, 0)) return false;
    *literal = Literal(storage_shape);
    const int64_t width = ByteWidth(shape.element_type());
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(literal->raw() + i * width, scalar.raw(), width);
    return true;
  }
  // Every element takes at least one character, so a shape with more
  // elements than the rest of the text cannot be satisfied: refuse before
  // allocating it.
  if (count > static_cast<int64_t>(lex_.text().size() - lex_.pos()) + 1)
    return ErrorHere("constant of shape " + shape.ToString() +
                     " has more elements than the text that follows");
  *literal = Literal(storage_shape);
  if (shape.rank() == 0) return ParseElement(literal, 0);
  return ParseDenseArray(literal);
}

bool Parser::ParseDenseArray(Literal* literal) {
  const std::vector<int64_t>& dims = literal->shape().dimensions();
  const int rank = static_cast<int>(dims.size());
  // Explicit stack of per-dimension counters rather than recursion.
  std::vector<int64_t> seen(rank, 0);
  int64_t index = 0;
  if (!lex_.Eat('{') && !Expect('{', ("to begin a constant of shape " + literal->shape().ToString()).c_str()))
    return false;
  int dim = 0;
  while (true) {
    if (lex_.Peek() == '}') {
      if (seen[dim] != dims[dim])
        return ErrorHere("expected " + std::to_string(dims[dim]) +
                         " elements in dimension " + std::to_string(dim) +
                         " of the constant, found " + std::to_string(seen[dim]));
      lex_.Eat('}');
      if (dim == 0) return true;
      --dim;
      ++seen[dim];
      continue;
    }
    if (seen[dim] > 0 && !Expect(',', "between constant elements")) return false;
    if (seen[dim] >= dims[dim])
      return ErrorHere("too many elements in dimension " + std::to_string(dim) +
                       " of the constant (expected " + std::to_string(dims[dim]) + ")");
    if (dim == rank - 1) {
      if (!ParseElement(literal, index++)) return false;
      ++seen[dim];
    } else {
      if (!lex_.Eat('{') && !Expect('{', ("to begin dimension " + std::to_string(dim + 1) +
                        " of the constant").c_str()))
        return false;
      ++dim;
      seen[dim] = 0;
    }
  }
}

bool Parser::ParseFloatText(std::string_view text, size_t pos, PrimitiveType type,
                            double* value) {
  bool negative = !text.empty() && text[0] == '-';
  std::string_view body = text;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.remove_prefix(1);
  if (body == "inf") {
    *value = negative ? -INFINITY : INFINITY;
    return true;
  }
  if (body.substr(0, 3) == "nan") {
    // "nan", "-nan" or XLA's "nan(0x<payload>)" with the mantissa bits.
    uint64_t payload = 0;
    if (body.size() > 3) {
      std::string_view p = body.substr(3);
      if (p.size() < 5 || p.substr(0, 3) != "(0x" || p.back() != ')')
        return Error(pos, text.size(), "malformed NaN '" + std::string(text) + "'");
      p = p.substr(3, p.size() - 4);
      auto r = std::from_chars(p.data(), p.data() + p.size(), payload, 16);
      if (r.ec != std::errc() || r.ptr != p.data() + p.size())
        return Error(pos, text.size(), "malformed NaN payload in '" + std::string(text) + "'");
    }
    *value = MakeNan(negative, payload, type);
    return true;
  }
  bool hex = body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X');
  std::chars_format fmt = std::chars_format::general;
  if (hex) {
    body.remove_prefix(2);
    fmt = std::chars_format::hex;
  }
  const char* b = body.data();
  const char* e = body.data() + body.size();
  bool narrow = type != PrimitiveType::F64 && type != PrimitiveType::C128;
  std::from_chars_result r;
  if (narrow) {
    // Read f32 (and narrower) values directly as float so that the decimal
    // text rounds once, exactly as it was printed.
    float f = 0;
    r = std::from_chars(b, e, f, fmt);
    if (r.ec == std::errc::result_out_of_range) {
      double d = 0;
      auto rd = std::from_chars(b, e, d, fmt);
      if (rd.ec == std::errc() && rd.ptr == e &&
          std::fabs(d) < static_cast<double>(std::numeric_limits<float>::max())) {
        f = static_cast<float>(d);  // underflow to a subnormal or zero
        r = rd;
      }
    }
    *value = f;
  } else {
    double d = 0;
    r = std::from_chars(b, e, d, fmt);
    *value = d;
  }
  if (r.ec == std::errc::result_out_of_range)
    return Error(pos, text.size(),
                 "value " + std::string(text) + " is out of range for " +
                     std::string(PrimitiveTypeName(type)));
  if (r.ec != std::errc() || r.ptr != e)
    return Error(pos, std::max<size_t>(1, text.size()),
                 "expected a " + std::string(PrimitiveTypeName(type)) +
                     " value, found '" + std::string(text.substr(0, 40)) + "'");
  if (negative) *value = -*value;
  return true;
}

bool Parser::ParseElement(Literal* literal, int64_t i) {
  PrimitiveType type = literal->element_type();
  lex_.SkipTrivia();
  size_t p = lex_.pos();
  if (type == PrimitiveType::PRED) {
    uint8_t v;
    if (lex_.EatKeyword("true")) {
      v = 1;
    } else if (lex_.EatKeyword("false")) {
      v = 0;
    } else {
      int64_t n = 0;
      if (!ParseInt(&n, "'true' or 'false'")) return false;
      if (n != 0 && n != 1)
        return Error(p, lex_.pos() - p, "pred constant must be true or false");
      v = static_cast<uint8_t>(n);
    }
    literal->data<uint8_t>()[i] = v;
    return true;
  }
  if (IsComplex(type)) {
    if (!Expect('(', "to begin a complex value")) return false;
    double parts[2];
    for (int k = 0; k < 2; ++k) {
      if (k == 1 && !Expect(',', "between the real and imaginary parts")) return false;
      lex_.SkipTrivia();
      size_t q = lex_.pos();
      std::string_view t = lex_.LexNumberText();
      if (t.empty())
        return ErrorHere("expected a number, found " + lex_.DescribeNext());
      if (!ParseFloatText(t, q, type, &parts[k])) return false;
    }
    if (!Expect(')', "to end a complex value")) return false;
    if (type == PrimitiveType::C64) {
      literal->data<float>()[2 * i] = static_cast<float>(parts[0]);
      literal->data<float>()[2 * i + 1] = static_cast<float>(parts[1]);
    } else {
      literal->data<double>()[2 * i] = parts[0];
      literal->data<double>()[2 * i + 1] = parts[1];
    }
    return true;
  }
  std::string_view t = lex_.LexNumberText();
  if (t.empty())
    return ErrorHere("expected a " + std::string(PrimitiveTypeName(type)) +
                     " value, found " + lex_.DescribeNext());
  if (IsFloatingPoint(type)) {
    double v = 0;
    if (!ParseFloatText(t, p, type, &v)) return false;
    switch (type) {
      case PrimitiveType::F32: literal->data<float>()[i] = static_cast<float>(v); break;
      case PrimitiveType::F64: literal->data<double>()[i] = v; break;
      case PrimitiveType::F16: literal->data<uint16_t>()[i] = F32ToF16(static_cast<float>(v)); break;
      case PrimitiveType::BF16: literal->data<uint16_t>()[i] = F32ToBf16(static_cast<float>(v)); break;
      default: literal->data<uint8_t>()[i] = EncodeMiniFloat(type, v); break;
    }
    return true;
  }
  // Integers.
  const char* b = t.data();
  const char* e = t.data() + t.size();
  if (type == PrimitiveType::U64) {
    uint64_t u = 0;
    auto r = std::from_chars(b, e, u);
    if (r.ec != std::errc() || r.ptr != e)
      return Error(p, t.size(), r.ec == std::errc::result_out_of_range
                                    ? "value " + std::string(t) + " is out of range for u64"
                                    : "expected an integer, found '" + std::string(t) + "'");
    literal->data<uint64_t>()[i] = u;
    return true;
  }
  int64_t v = 0;
  auto r = std::from_chars(b, e, v);
  if (r.ec != std::errc() || r.ptr != e)
    return Error(p, t.size(), r.ec == std::errc::result_out_of_range
                                  ? "value " + std::string(t) + " is out of range for " +
                                        std::string(PrimitiveTypeName(type))
                                  : "expected an integer, found '" + std::string(t) + "'");
  int64_t lo = 0, hi = 0;
  switch (type) {
    case PrimitiveType::S2: lo = -2; hi = 1; break;
    case PrimitiveType::S4: lo = -8; hi = 7; break;
    case PrimitiveType::S8: lo = INT8_MIN; hi = INT8_MAX; break;
    case PrimitiveType::S16: lo = INT16_MIN; hi = INT16_MAX; break;
    case PrimitiveType::S32: lo = INT32_MIN; hi = INT32_MAX; break;
    case PrimitiveType::S64: lo = INT64_MIN; hi = INT64_MAX; break;
    case PrimitiveType::U2: hi = 3; break;
    case PrimitiveType::U4: hi = 15; break;
    case PrimitiveType::U8: hi = UINT8_MAX; break;
    case PrimitiveType::U16: hi = UINT16_MAX; break;
    case PrimitiveType::U32: hi = UINT32_MAX; break;
    default:
      return Error(p, t.size(), "constants of element type " +
                                    std::string(PrimitiveTypeName(type)) +
                                    " are not supported");
  }
  if (v < lo || v > hi)
    return Error(p, t.size(), "value " + std::string(t) + " is out of range for " +
                                  std::string(PrimitiveTypeName(type)));
  switch (type) {
    case PrimitiveType::S2: case PrimitiveType::S4: case PrimitiveType::S8:
      literal->data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case PrimitiveType::S16: literal->data<int16_t>()[i] = static_cast<int16_t>(v); break;
    case PrimitiveType::S32: literal->data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case PrimitiveType::S64: literal->data<int64_t>()[i] = v; break;
    case PrimitiveType::U2: case PrimitiveType::U4: case PrimitiveType::U8:
      literal->data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case PrimitiveType::U16: literal->data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
    case PrimitiveType::U32: literal->data<uint32_t>()[i] = static_cast<uint32_t>(v); break;
    default: break;
  }
  return true;
}

}  // namespace meshsplit::text_internal
