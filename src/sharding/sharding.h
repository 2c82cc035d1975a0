// HloSharding: how a value is laid out over devices (see ../shared/DESIGN.md).
// PLACEHOLDER API: the sharding module owner replaces the implementation; the
// functions below are the contract the IR, parser and printer rely on.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace meshsplit {

class Sharding {
 public:
  Sharding() = default;  // replicated
  static Sharding Replicate();

  // Parses the text of a sharding attribute including its outer braces, e.g.
  // "{devices=[2,1]0,1}" or "{{replicated}, {maximal device=0}}".
  // Errors carry a column offset relative to `text` in their message only;
  // the caller attaches the location.
  static StatusOr<Sharding> Parse(std::string_view text);

  // Canonical text, with outer braces.
  std::string ToString() const;

  bool operator==(const Sharding& other) const;
  bool operator!=(const Sharding& other) const { return !(*this == other); }

 private:
  std::string text_ = "{replicated}";
};

}  // namespace meshsplit
