// Parsers for the verbatim text of uninterpreted attributes; see
// ir/attribute_text.h.
#include "ir/attribute_text.h"

#include "ir/module.h"

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
    while (p < t.size() && (t[p] == ' ' || t[p] == '\n' || t[p] == '\t' || t[p] == '\r')) ++p;
  };
  skip_space();
  if (p >= t.size() || t[p] != '{') return std::nullopt;
  ++p;
  skip_space();
  if (p < t.size() && t[p] == '}') {
    ++p;
  } else {
    while (true) {
      skip_space();
      size_t k = p;
      while (p < t.size() && t[p] != '=' && t[p] != ',' && t[p] != '}' && t[p] != ' ') ++p;
      if (p == k) return std::nullopt;
      std::string key(t.substr(k, p - k));
      skip_space();
      if (p >= t.size() || t[p] != '=') return std::nullopt;
      ++p;
      skip_space();
      std::string value;
      if (p < t.size() && t[p] == '"') {
        ++p;
        while (p < t.size() && t[p] != '"') {
          if (t[p] == '\\' && p + 1 < t.size()) ++p;
          value += t[p++];
        }
        if (p >= t.size()) return std::nullopt;
        ++p;
      } else if (p < t.size() && t[p] == '{') {
        // A JSON dict: kept as its text, braces included. Strings inside
        // may hold braces.
        size_t start = p;
        int depth = 0;
        bool in_string = false;
        for (; p < t.size(); ++p) {
          char c = t[p];
          if (in_string) {
            if (c == '\\') ++p;
            else if (c == '"') in_string = false;
          } else if (c == '"') {
            in_string = true;
          } else if (c == '{') {
            ++depth;
          } else if (c == '}' && --depth == 0) {
            break;
          }
        }
        if (p >= t.size()) return std::nullopt;
        ++p;
        value.assign(t.substr(start, p - start));
      } else {
        return std::nullopt;
      }
      out.emplace_back(std::move(key), std::move(value));
      skip_space();
      if (p < t.size() && t[p] == ',') {
        ++p;
        continue;
      }
      if (p < t.size() && t[p] == '}') {
        ++p;
        break;
      }
      return std::nullopt;
    }
  }
  skip_space();
  if (p != t.size()) return std::nullopt;
  return out;
}

std::string FormatFrontendAttributes(const FrontendAttributePairs& pairs) {
  std::string out = "{";
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i > 0) out += ',';
    out += pairs[i].first;
    out += "=\"";
    for (char c : pairs[i].second) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::optional<std::string> ModuleFrontendAttribute(const Module& module, std::string_view key) {
  for (const auto& [k, v] : module.header_attrs()) {
    if (k != "frontend_attributes") continue;
    std::optional<FrontendAttributePairs> pairs = ParseFrontendAttributes(v);
    if (!pairs) continue;
    for (const auto& [name, value] : *pairs)
      if (name == key) return value;
  }
  return std::nullopt;
}

void SetModuleFrontendAttribute(Module& module, std::string_view key, const std::string& value) {
  auto& header = module.mutable_header_attrs();
  for (auto& [k, v] : header) {
    if (k != "frontend_attributes") continue;
    std::optional<FrontendAttributePairs> pairs = ParseFrontendAttributes(v);
    if (!pairs) continue;
    bool replaced = false;
    for (auto& [name, old] : *pairs)
      if (name == key) {
        old = value;
        replaced = true;
      }
    if (!replaced) pairs->emplace_back(std::string(key), value);
    v = FormatFrontendAttributes(*pairs);
    return;
  }
  header.emplace_back("frontend_attributes",
                      FormatFrontendAttributes({{std::string(key), value}}));
}

}  // namespace meshsplit
