// .npy reading and writing. The header is a Python dict literal; we parse the
// small subset NumPy writes (and hand-written variants: any key order, extra
// spaces, single or double quotes) and reject everything else with a message.
#include "runtime/npy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace meshsplit {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct DescrInfo {
  PrimitiveType type;
  bool big_endian;
};

Status NpyError(const std::string& name, const std::string& message) {
  return Status::Error(name + ": " + message);
}

// Maps a dtype descr ("<f4", "|b1", ">i8") to an element type.
std::optional<DescrInfo> ParseDescr(const std::string& d) {
  if (d.size() < 3) return std::nullopt;
  char order = d[0];
  std::string kind = d.substr(1);
  static const std::pair<const char*, PrimitiveType> kKinds[] = {
      {"f2", PrimitiveType::F16}, {"f4", PrimitiveType::F32},
      {"f8", PrimitiveType::F64}, {"i1", PrimitiveType::S8},
      {"i2", PrimitiveType::S16}, {"i4", PrimitiveType::S32},
      {"i8", PrimitiveType::S64}, {"u1", PrimitiveType::U8},
      {"u2", PrimitiveType::U16}, {"u4", PrimitiveType::U32},
      {"u8", PrimitiveType::U64}, {"b1", PrimitiveType::PRED}};
  for (const auto& [k, t] : kKinds) {
    if (kind != k) continue;
    bool one_byte = ByteWidth(t) == 1;
    if (order == '|' || order == '=') {
      // '=' is native order, little-endian on every machine we run on.
      return DescrInfo{t, false};
    }
    if (order == '<') return DescrInfo{t, false};
    if (order == '>') return DescrInfo{t, !one_byte};
    return std::nullopt;
  }
  return std::nullopt;
}

// A tiny cursor over the header dict text.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : s_(text) {}

  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  std::optional<std::string> String() {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return std::nullopt;
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string::npos) return std::nullopt;
    std::string out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  std::optional<std::string> Word() {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (start == pos_) return std::nullopt;
    return s_.substr(start, pos_ - start);
  }
  std::optional<int64_t> Int() {
    SkipSpace();
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      int digit = s_[pos_] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return std::nullopt;
      v = v * 10 + digit;
      ++pos_;
    }
    // NumPy may write "3L" in files from Python 2.
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;
    if (start == pos_) return std::nullopt;
    return v;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= s_.size();
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

StatusOr<Header> ParseHeader(const std::string& text, const std::string& name) {
  HeaderParser p(text);
  Header h;
  bool seen_descr = false, seen_order = false, seen_shape = false;
  if (!p.Consume('{')) return NpyError(name, "header is not a dict: '" + text + "'");
  while (!p.Consume('}')) {
    auto key = p.String();
    if (!key) return NpyError(name, "malformed header: expected a quoted key");
    if (!p.Consume(':')) return NpyError(name, "malformed header: expected ':' after '" + *key + "'");
    if (*key == "descr") {
      auto v = p.String();
      if (!v) return NpyError(name, "malformed header: descr must be a string (structured dtypes are not supported)");
      h.descr = *v;
      seen_descr = true;
    } else if (*key == "fortran_order") {
      auto v = p.Word();
      if (!v || (*v != "True" && *v != "False"))
        return NpyError(name, "malformed header: fortran_order must be True or False");
      h.fortran_order = *v == "True";
      seen_order = true;
    } else if (*key == "shape") {
      if (!p.Consume('(')) return NpyError(name, "malformed header: shape must be a tuple");
      while (!p.Consume(')')) {
        auto d = p.Int();
        if (!d) return NpyError(name, "malformed header: shape entries must be non-negative integers");
        h.shape.push_back(*d);
        if (!p.Consume(',') && !p.Peek(')'))
          return NpyError(name, "malformed header: expected ',' or ')' in shape");
      }
      seen_shape = true;
    } else {
      return NpyError(name, "malformed header: unknown key '" + *key + "'");
    }
    if (!p.Consume(',') && !p.Peek('}'))
      return NpyError(name, "malformed header: expected ',' or '}'");
  }
  if (!p.AtEnd()) return NpyError(name, "malformed header: text after the dict");
  if (!seen_descr || !seen_order || !seen_shape)
    return NpyError(name, "malformed header: needs descr, fortran_order and shape");
  return h;
}

uint32_t ReadLe(const std::string& b, size_t pos, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(b[pos + i]);
  return v;
}

}  // namespace

std::string NpyDescr(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::PRED: return "|b1";
    case PrimitiveType::S8: return "|i1";
    case PrimitiveType::S16: return "<i2";
    case PrimitiveType::S32: return "<i4";
    case PrimitiveType::S64: return "<i8";
    case PrimitiveType::U8: return "|u1";
    case PrimitiveType::U16: return "<u2";
    case PrimitiveType::U32: return "<u4";
    case PrimitiveType::U64: return "<u8";
    case PrimitiveType::F16: return "<f2";
    case PrimitiveType::BF16: return "<u2";  // raw bf16 words; NumPy has no bf16
    case PrimitiveType::F32: return "<f4";
    case PrimitiveType::F64: return "<f8";
    default: return "";
  }
}

StatusOr<Literal> ParseNpy(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    return NpyError(name, "not a .npy file (bad magic)");
  int major = static_cast<uint8_t>(bytes[6]);
  size_t header_start;
  uint32_t header_len;
  if (major == 1) {
    header_len = ReadLe(bytes, 8, 2);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return NpyError(name, "truncated header");
    header_len = ReadLe(bytes, 8, 4);
    header_start = 12;
  } else {
    return NpyError(name, "unsupported .npy format version " + std::to_string(major));
  }
  if (header_start + header_len > bytes.size())
    return NpyError(name, "truncated header (header length " + std::to_string(header_len) +
                              ", file size " + std::to_string(bytes.size()) + ")");
  std::string text = bytes.substr(header_start, header_len);
  MS_ASSIGN_OR_RETURN(Header h, ParseHeader(text, name));
  auto info = ParseDescr(h.descr);
  if (!info) return NpyError(name, "unsupported dtype '" + h.descr + "'");
  if (h.fortran_order)
    return NpyError(name, "fortran_order=True is not supported; save the array in C order "
                          "(numpy.ascontiguousarray)");
  // Guard the element count against overflow before allocating.
  int64_t count = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / 16 / d)
      return NpyError(name, "shape too large");
    count *= d;
  }
  int64_t width = ByteWidth(info->type);
  size_t data_start = header_start + header_len;
  uint64_t expected = static_cast<uint64_t>(count) * width;
  uint64_t actual = bytes.size() - data_start;
  if (actual != expected)
    return NpyError(name, "data size mismatch: shape and dtype need " + std::to_string(expected) +
                              " bytes, the file has " + std::to_string(actual));
  Literal lit(Shape(info->type, h.shape));
  if (expected > 0) std::memcpy(lit.raw(), bytes.data() + data_start, expected);
  if (info->big_endian) {
    uint8_t* p = lit.raw();
    for (int64_t i = 0; i < count; ++i) std::reverse(p + i * width, p + (i + 1) * width);
  }
  if (info->type == PrimitiveType::PRED) {
    uint8_t* p = lit.raw();
    for (int64_t i = 0; i < count; ++i) p[i] = p[i] != 0;
  }
  return lit;
}

StatusOr<Literal> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NpyError(path, "cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return NpyError(path, "read error");
  return ParseNpy(ss.str(), path);
}

StatusOr<std::string> SerializeNpy(const Literal& literal) {
  const Shape& shape = literal.shape();
  if (!shape.IsArray())
    return Status::Error("cannot write " + shape.ToString(false) + " as .npy (arrays only)");
  std::string descr = NpyDescr(shape.element_type());
  if (descr.empty())
    return Status::Error("cannot write element type " +
                         std::string(PrimitiveTypeName(shape.element_type())) + " as .npy");
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.dimensions().size(); ++i) {
    dict += std::to_string(shape.dimensions()[i]);
    if (shape.dimensions().size() == 1 || i + 1 < shape.dimensions().size()) dict += ",";
    if (i + 1 < shape.dimensions().size()) dict += " ";
  }
  dict += "), }";
  // Pad with spaces and a newline so the data starts 64-byte aligned.
  bool v2 = dict.size() + 1 + 10 > 65535;
  size_t prefix = v2 ? 12 : 10;
  size_t total = prefix + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += static_cast<char>(0);
  uint32_t len = static_cast<uint32_t>(dict.size());
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  out += dict;
  out.append(reinterpret_cast<const char*>(literal.raw()), literal.size_bytes());
  return out;
}

Status WriteNpy(const Literal& literal, const std::string& path) {
  MS_ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(literal));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return NpyError(path, "cannot open for writing");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return NpyError(path, "write error");
  return Status::Ok();
}

}  // namespace meshsplit
