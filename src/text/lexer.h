// A character-level scanner over HLO text for the parser: skips whitespace
// and comments, reads names, words, numbers and strings as views into the
// source (never copying), and maps byte offsets to SourceLocs. It is not a
// token stream: HLO's attribute sub-languages (`0_0x1_1`, `b01f_01io->b01f`,
// `[2,4]<=[8]`) are easier to read with the parser driving the scanner.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/source_loc.h"

namespace meshsplit::text_internal {

inline bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}
inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsAlpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

class Lexer {
 public:
  static constexpr size_t kNpos = std::string_view::npos;

  explicit Lexer(std::shared_ptr<const SourceFile> file);

  const std::shared_ptr<const SourceFile>& file() const { return file_; }
  std::string_view text() const { return text_; }
  size_t pos() const { return pos_; }
  void set_pos(size_t p) { pos_ = p; }

  // Skips whitespace, `//` line comments and `/* */` block comments. An
  // unterminated block comment moves to the end of the text and is remembered
  // (unterminated_comment()).
  void SkipTrivia();
  size_t unterminated_comment() const { return unterminated_comment_; }

  // The next significant character ('\0' at the end).
  char Peek() {
    SkipTrivia();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool AtEnd() {
    SkipTrivia();
    return pos_ >= text_.size();
  }
  // The character `offset` bytes after the current position, no skipping.
  char PeekRaw(size_t offset = 0) const {
    return pos_ + offset < text_.size() ? text_[pos_ + offset] : '\0';
  }
  // Consumes `c` (after trivia) if it is next.
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  // Consumes `s` (after trivia) if the text continues with it.
  bool EatString(std::string_view s);
  // Consumes the keyword `word` if it is next and not followed by a name
  // character.
  bool EatKeyword(std::string_view word);

  // A value name: `%` followed by name characters, or a letter/underscore
  // followed by name characters. Returns the name without `%` and consumes
  // it; returns an empty view (consuming nothing) when there is none.
  std::string_view LexName();
  // Name characters starting at the current position ([A-Za-z0-9_.-]+):
  // opcodes, attribute names, keywords, primitive types. Empty if none.
  std::string_view LexWord();
  // A run of letters and digits only (element types: "f32" in "f32[2]").
  std::string_view LexAlnum();
  // A numeric literal's text: optional sign, then digits, '.', exponent,
  // hex digits and `0x`/`p` forms, or the words inf/nan (with an optional
  // `(0x...)` NaN payload). Empty if none. Does not validate.
  std::string_view LexNumberText();

  // Scans a double-quoted string starting at `p` (which must be '"').
  // Returns the offset just past the closing quote, or kNpos.
  size_t ScanString(size_t p) const;
  // Scans one bracketed group starting at `p` ('{', '(' or '['), honouring
  // nesting and strings. Returns the offset past the matching close, or
  // kNpos when unbalanced or nested deeper than `max_depth`.
  size_t ScanBalanced(size_t p, int max_depth = 512) const;
  // Scans an attribute value of unknown syntax starting at `p`: bracketed
  // groups and strings as units, anything else up to a top-level ',',
  // whitespace or closing bracket. Returns the end offset (== p if empty),
  // or kNpos when a group is unbalanced.
  size_t ScanValue(size_t p) const;

  // Location of `length` bytes at byte offset `p`.
  SourceLoc Loc(size_t p, size_t length = 1) const;
  // Description of what is at the current position for "expected X, found
  // Y" messages: "end of file" or a quoted word/character.
  std::string DescribeNext();

 private:
  std::shared_ptr<const SourceFile> file_;
  std::string_view text_;
  size_t pos_ = 0;
  size_t unterminated_comment_ = kNpos;
  std::vector<size_t> line_starts_;
};

}  // namespace meshsplit::text_internal
