// Parsers for the verbatim text of uninterpreted attributes; see
// ir/attribute_text.h.
#include "ir/attribute_text.h"

#include <algorithm>
#include <charconv>

namespace meshsplit {
namespace {

// The location of character `offset` of `text`, the value of attribute
// `name` on the source line of `loc`; `loc` when the line does not spell
// `name=...text` (the instruction came from a builder, or the text spans
// lines).
SourceLoc LocateInValue(const SourceLoc& loc, std::string_view name, std::string_view text,
                        size_t offset) {
  if (!loc.known()) return loc;
  std::string_view all = loc.file->text;
  size_t begin = 0;
  for (int line = 1; line < loc.line; ++line) {
    begin = all.find('\n', begin);
    if (begin == std::string_view::npos) return loc;
    ++begin;
  }
  size_t end = all.find('\n', begin);
  std::string_view line =
      all.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
  for (size_t at = line.find(name); at != std::string_view::npos; at = line.find(name, at + 1)) {
    size_t p = at + name.size();
    while (p < line.size() && line[p] == ' ') ++p;
    if (p >= line.size() || line[p] != '=') continue;
    ++p;
    while (p < line.size() && line[p] == ' ') ++p;
    if (line.substr(p, text.size()) != text) continue;
    SourceLoc out = loc;
    out.column = static_cast<int>(p + offset) + 1;
    out.length = 1;
    return out;
  }
  return loc;
}

}  // namespace

StatusOr<std::vector<int64_t>> ParseIntListAttribute(std::string_view name, std::string_view text,
                                                     const SourceLoc& loc) {
  size_t i = 0;
  auto fail = [&](const std::string& what) {
    const size_t at = std::min(i, text.size());
    return Status::Error(std::string(name) + "=" + std::string(text) + ": " + what +
                             " (character " + std::to_string(at + 1) + ")",
                         LocateInValue(loc, name, text, at));
  };
  auto skip_spaces = [&] {
    while (i < text.size() && text[i] == ' ') ++i;
  };
  std::vector<int64_t> out;
  skip_spaces();
  if (i >= text.size() || text[i] != '{') return fail("expected '{'");
  ++i;
  skip_spaces();
  if (i < text.size() && text[i] == '}') {
    ++i;
  } else {
    while (true) {
      skip_spaces();
      const size_t start = i;
      if (i < text.size() && text[i] == '-') ++i;
      const size_t digits = i;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
      if (i == digits) {
        i = start;
        return fail("expected a number");
      }
      int64_t value = 0;
      const auto [ptr, ec] = std::from_chars(text.data() + start, text.data() + i, value);
      if (ec != std::errc() || ptr != text.data() + i) {
        i = start;
        return fail("number out of range");
      }
      out.push_back(value);
      skip_spaces();
      if (i < text.size() && text[i] == ',') {
        ++i;
        continue;
      }
      if (i < text.size() && text[i] == '}') {
        ++i;
        break;
      }
      return fail("expected ',' or '}'");
    }
  }
  skip_spaces();
  if (i != text.size()) return fail("unexpected text after '}'");
  return out;
}

StatusOr<std::vector<int64_t>> ReadIntListAttribute(const Instruction& instr,
                                                    const std::string& name) {
  const std::string* text = instr.attrs().FindExtra(name);
  if (text == nullptr) return std::vector<int64_t>{};
  StatusOr<std::vector<int64_t>> list = ParseIntListAttribute(name, *text, instr.loc());
  if (!list.ok())
    return Status::Error(list.status().message() + " (in %" + instr.name() + ")",
                         list.status().loc());
  return list;
}

std::optional<FrontendAttributePairs> ParseFrontendAttributes(std::string_view t) {
  FrontendAttributePairs out;
  size_t p = 0;
  auto skip_space = [&] {
    while (p < t.size() && (t[p] == ' ' || t[p] == '\n' || t[p] == '\t')) ++p;
  };
  skip_space();
  if (p >= t.size() || t[p] != '{') return std::nullopt;
  ++p;
  while (true) {
    skip_space();
    if (p < t.size() && t[p] == '}') return out;
    size_t k = p;
    while (p < t.size() && t[p] != '=' && t[p] != ',' && t[p] != '}') ++p;
    if (p >= t.size() || t[p] != '=') return std::nullopt;
    std::string key(t.substr(k, p - k));
    while (!key.empty() && key.back() == ' ') key.pop_back();
    ++p;
    skip_space();
    if (p >= t.size() || t[p] != '"') return std::nullopt;
    ++p;
    std::string value;
    while (p < t.size() && t[p] != '"') {
      if (t[p] == '\\' && p + 1 < t.size()) ++p;
      value += t[p++];
    }
    if (p >= t.size()) return std::nullopt;
    ++p;
    out.emplace_back(std::move(key), std::move(value));
    skip_space();
    if (p < t.size() && t[p] == ',') ++p;
    else if (p >= t.size() || t[p] != '}') return std::nullopt;
  }
}

std::string FormatFrontendAttributes(const FrontendAttributePairs& pairs) {
  std::string out = "{";
  for (const auto& [key, value] : pairs) {
    if (out.size() > 1) out += ",";
    out += key + "=\"";
    for (char c : value) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += "\"";
  }
  return out + "}";
}

}  // namespace meshsplit
