// PLACEHOLDER implementation: keeps the text. Replaced by the sharding module.
#include "sharding/sharding.h"

namespace meshsplit {

Sharding Sharding::Replicate() { return Sharding(); }

StatusOr<Sharding> Sharding::Parse(std::string_view text) {
  Sharding s;
  s.text_ = std::string(text);
  return s;
}

std::string Sharding::ToString() const { return text_; }

bool Sharding::operator==(const Sharding& other) const {
  return text_ == other.text_;
}

}  // namespace meshsplit
