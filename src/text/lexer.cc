// Scanner for HLO text (see lexer.h).
#include "text/lexer.h"

#include <algorithm>
#include <cstring>

namespace meshsplit::text_internal {

Lexer::Lexer(std::shared_ptr<const SourceFile> file)
    : file_(std::move(file)), text_(file_->text) {
  // A UTF-8 byte order mark is not part of the text.
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
  line_starts_.push_back(0);
  const char* begin = text_.data();
  const char* end = begin + text_.size();
  for (const char* p = begin; p < end;) {
    const void* nl = std::memchr(p, '\n', end - p);
    if (nl == nullptr) break;
    p = static_cast<const char*>(nl) + 1;
    line_starts_.push_back(p - begin);
  }
}

void Lexer::SkipTrivia() {
  const size_t n = text_.size();
  while (pos_ < n) {
    char c = text_[pos_];
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' ||
        c == '\v') {
      ++pos_;
      continue;
    }
    if (c == '/' && pos_ + 1 < n) {
      char d = text_[pos_ + 1];
      if (d == '/') {
        size_t nl = text_.find('\n', pos_ + 2);
        pos_ = nl == kNpos ? n : nl + 1;
        continue;
      }
      if (d == '*') {
        size_t close = text_.find("*/", pos_ + 2);
        if (close == kNpos) {
          if (unterminated_comment_ == kNpos) unterminated_comment_ = pos_;
          pos_ = n;
          return;
        }
        pos_ = close + 2;
        continue;
      }
    }
    return;
  }
}

bool Lexer::EatString(std::string_view s) {
  SkipTrivia();
  if (text_.substr(pos_, s.size()) != s) return false;
  pos_ += s.size();
  return true;
}

bool Lexer::EatKeyword(std::string_view word) {
  SkipTrivia();
  if (text_.substr(pos_, word.size()) != word) return false;
  if (pos_ + word.size() < text_.size() &&
      IsNameChar(text_[pos_ + word.size()]))
    return false;
  pos_ += word.size();
  return true;
}

std::string_view Lexer::LexName() {
  SkipTrivia();
  size_t p = pos_;
  const size_t n = text_.size();
  if (p < n && text_[p] == '%') {
    size_t q = p + 1;
    while (q < n && IsNameChar(text_[q])) ++q;
    if (q == p + 1) return {};
    pos_ = q;
    return text_.substr(p + 1, q - p - 1);
  }
  if (p >= n || !(IsAlpha(text_[p]) || text_[p] == '_')) return {};
  size_t q = p + 1;
  while (q < n && IsNameChar(text_[q])) ++q;
  pos_ = q;
  return text_.substr(p, q - p);
}

std::string_view Lexer::LexWord() {
  SkipTrivia();
  size_t q = pos_;
  while (q < text_.size() && IsNameChar(text_[q])) ++q;
  std::string_view w = text_.substr(pos_, q - pos_);
  pos_ = q;
  return w;
}

std::string_view Lexer::LexAlnum() {
  SkipTrivia();
  size_t q = pos_;
  while (q < text_.size() && (IsAlpha(text_[q]) || IsDigit(text_[q]))) ++q;
  std::string_view w = text_.substr(pos_, q - pos_);
  pos_ = q;
  return w;
}

std::string_view Lexer::LexNumberText() {
  SkipTrivia();
  const size_t n = text_.size();
  size_t p = pos_;
  size_t q = p;
  if (q < n && (text_[q] == '-' || text_[q] == '+')) ++q;
  auto word_at = [&](size_t at, std::string_view w) {
    return text_.substr(at, w.size()) == w &&
           (at + w.size() >= n || !IsNameChar(text_[at + w.size()]));
  };
  if (word_at(q, "inf")) {
    q += 3;
  } else if (text_.substr(q, 3) == "nan") {
    q += 3;
    if (q < n && text_[q] == '(') {  // NaN payload: nan(0x7fc00001)
      size_t close = text_.find(')', q);
      if (close == kNpos || close - q > 40) return {};
      q = close + 1;
    } else if (q < n && IsNameChar(text_[q])) {
      return {};
    }
  } else {
    size_t start = q;
    bool hex = text_.substr(q, 2) == "0x" || text_.substr(q, 2) == "0X";
    if (hex) q += 2;
    while (q < n) {
      char c = text_[q];
      if (IsDigit(c) || c == '.') {
        ++q;
      } else if (hex && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
        ++q;
      } else if ((!hex && (c == 'e' || c == 'E')) ||
                 (hex && (c == 'p' || c == 'P'))) {
        ++q;
        if (q < n && (text_[q] == '-' || text_[q] == '+')) ++q;
      } else {
        break;
      }
    }
    if (q == start) return {};
  }
  pos_ = q;
  return text_.substr(p, q - p);
}

size_t Lexer::ScanString(size_t p) const {
  const size_t n = text_.size();
  size_t q = p + 1;
  while (q < n) {
    char c = text_[q];
    if (c == '\\') {
      q += 2;
      continue;
    }
    if (c == '"') return q + 1;
    ++q;
  }
  return kNpos;
}

size_t Lexer::ScanBalanced(size_t p, int max_depth) const {
  // A stack of expected closers; depth is bounded so garbage cannot make it
  // grow without limit.
  std::string closers;
  const size_t n = text_.size();
  size_t q = p;
  while (q < n) {
    char c = text_[q];
    switch (c) {
      case '{': case '(': case '[':
        if (static_cast<int>(closers.size()) >= max_depth) return kNpos;
        closers.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
        ++q;
        break;
      case '}': case ')': case ']':
        if (closers.empty() || closers.back() != c) return kNpos;
        closers.pop_back();
        ++q;
        if (closers.empty()) return q;
        break;
      case '"': {
        size_t e = ScanString(q);
        if (e == kNpos) return kNpos;
        q = e;
        break;
      }
      case '/':
        if (q + 1 < n && text_[q + 1] == '*') {
          size_t close = text_.find("*/", q + 2);
          if (close == kNpos) return kNpos;
          q = close + 2;
        } else {
          ++q;
        }
        break;
      default:
        ++q;
    }
  }
  return kNpos;
}

size_t Lexer::ScanValue(size_t p) const {
  const size_t n = text_.size();
  size_t q = p;
  while (q < n) {
    char c = text_[q];
    if (c == '{' || c == '(' || c == '[') {
      q = ScanBalanced(q);
      if (q == kNpos) return kNpos;
      continue;
    }
    if (c == '"') {
      q = ScanString(q);
      if (q == kNpos) return kNpos;
      continue;
    }
    if (c == ',' || c == '}' || c == ')' || c == ']' || c == ' ' ||
        c == '\n' || c == '\t' || c == '\r')
      break;
    if (c == '/' && q + 1 < n && (text_[q + 1] == '/' || text_[q + 1] == '*'))
      break;
    ++q;
  }
  return q;
}

SourceLoc Lexer::Loc(size_t p, size_t length) const {
  p = std::min(p, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), p);
  size_t line_index = static_cast<size_t>(it - line_starts_.begin()) - 1;
  SourceLoc loc;
  loc.file = file_;
  loc.line = static_cast<int>(line_index + 1);
  loc.column = static_cast<int>(p - line_starts_[line_index] + 1);
  loc.length = static_cast<int>(std::max<size_t>(1, std::min<size_t>(length, 1 << 20)));
  return loc;
}

std::string Lexer::DescribeNext() {
  SkipTrivia();
  if (pos_ >= text_.size()) return "end of file";
  size_t q = pos_;
  while (q < text_.size() && q - pos_ < 40 && IsNameChar(text_[q])) ++q;
  if (q == pos_) q = pos_ + 1;
  std::string tok(text_.substr(pos_, q - pos_));
  for (char& c : tok)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return "'" + tok + "'";
}

}  // namespace meshsplit::text_internal
