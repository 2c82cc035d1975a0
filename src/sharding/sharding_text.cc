// Text form of shardings: the parser for XLA's `sharding={...}` syntax and
// the canonical printer (iota tile assignments, XLA's keyword order).
#include "sharding/sharding.h"

#include <algorithm>
#include <cctype>
#include <climits>

namespace meshsplit {
namespace {

std::string JoinDims(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

// Recursive-descent reader over the attribute text. The first error wins
// and records its offset.
class ShardingReader {
 public:
  explicit ShardingReader(std::string_view text) : s_(text) {}

  StatusOr<Sharding> ParseAll() {
    MS_ASSIGN_OR_RETURN(Sharding s, ParseSharding());
    SkipSpace();
    if (pos_ != s_.size()) return Fail("unexpected text after sharding");
    return s;
  }

  size_t error_offset() const { return error_offset_; }

 private:
  Status Fail(const std::string& message) { return FailAt(pos_, message); }
  Status FailAt(size_t at, const std::string& message) {
    error_offset_ = at;
    return Status::Error(message);
  }

  // Whitespace and /*...*/ comments (XLA prints /*index=N*/ in tuples).
  void SkipSpace() {
    while (pos_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[pos_]))) {
        ++pos_;
      } else if (s_.compare(pos_, 2, "/*") == 0) {
        size_t end = s_.find("*/", pos_ + 2);
        pos_ = end == std::string_view::npos ? s_.size() : end + 2;
      } else {
        break;
      }
    }
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  Status Expect(char c) {
    if (Consume(c)) return Status::Ok();
    return Fail(std::string("expected '") + c + "'" + Found());
  }
  std::string Found() {
    SkipSpace();
    if (pos_ >= s_.size()) return " but the sharding ended";
    return std::string(" but found '") + s_[pos_] + "'";
  }
  std::string Word() {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
            s_[pos_] == '_'))
      ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }
  StatusOr<int64_t> Int() {
    SkipSpace();
    size_t start = pos_;
    bool neg = false;
    if (pos_ < s_.size() && s_[pos_] == '-') {
      neg = true;
      ++pos_;
    }
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      pos_ = start;
      return Fail("expected an integer" + Found());
    }
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      if (v > (INT64_MAX - 9) / 10) return FailAt(start, "integer too large");
      v = v * 10 + (s_[pos_] - '0');
      ++pos_;
    }
    return neg ? -v : v;
  }
  // "[a,b,...]" (may be empty).
  StatusOr<std::vector<int64_t>> IntList(char open, char close) {
    MS_RETURN_IF_ERROR(Expect(open));
    std::vector<int64_t> out;
    if (Consume(close)) return out;
    while (true) {
      MS_ASSIGN_OR_RETURN(int64_t v, Int());
      out.push_back(v);
      if (Consume(close)) return out;
      MS_RETURN_IF_ERROR(Expect(','));
    }
  }

  StatusOr<Sharding> ParseSharding() {
    MS_RETURN_IF_ERROR(Expect('{'));
    if (Consume('}')) return Sharding::Tuple({});
    if (Peek('{')) {
      std::vector<Sharding> elements;
      while (true) {
        MS_ASSIGN_OR_RETURN(Sharding e, ParseSharding());
        elements.push_back(std::move(e));
        if (Consume('}')) return Sharding::Tuple(std::move(elements));
        MS_RETURN_IF_ERROR(Expect(','));
      }
    }
    return ParseLeaf();
  }

  // The body of a non-tuple sharding, up to and including its '}'.
  StatusOr<Sharding> ParseLeaf() {
    std::optional<Sharding::Kind> kind;
    size_t kind_pos = 0;
    int64_t device = -1;
    std::vector<int64_t> tile_dims;
    std::optional<TileAssignment> tiles;
    size_t tiles_pos = 0;
    bool last_tile_dim_replicate = false;
    std::optional<std::vector<SubgroupType>> last_tile_dims;
    std::optional<ShardGroup> group;
    std::string metadata;
    auto set_kind = [&](Sharding::Kind k, size_t at) -> Status {
      if (kind) return FailAt(at, "conflicting sharding kinds");
      kind = k;
      kind_pos = at;
      return Status::Ok();
    };
    while (!Consume('}')) {
      SkipSpace();
      size_t at = pos_;
      std::string word = Word();
      if (word.empty()) return Fail("expected a sharding keyword" + Found());
      if (word == "replicated") {
        MS_RETURN_IF_ERROR(set_kind(Sharding::Kind::kReplicated, at));
      } else if (word == "manual") {
        MS_RETURN_IF_ERROR(set_kind(Sharding::Kind::kManual, at));
      } else if (word == "unknown") {
        MS_RETURN_IF_ERROR(set_kind(Sharding::Kind::kUnknown, at));
      } else if (word == "unreduced") {
        MS_RETURN_IF_ERROR(set_kind(Sharding::Kind::kUnreduced, at));
      } else if (word == "maximal") {
        MS_RETURN_IF_ERROR(set_kind(Sharding::Kind::kMaximal, at));
      } else if (word == "device") {
        MS_RETURN_IF_ERROR(Expect('='));
        size_t dev_pos = pos_;
        MS_ASSIGN_OR_RETURN(device, Int());
        if (device < 0) return FailAt(dev_pos, "negative device id");
      } else if (word == "devices") {
        MS_RETURN_IF_ERROR(set_kind(Sharding::Kind::kTiled, at));
        MS_RETURN_IF_ERROR(Expect('='));
        tiles_pos = pos_;
        MS_ASSIGN_OR_RETURN(tile_dims, IntList('[', ']'));
        MS_ASSIGN_OR_RETURN(tiles, ParseDevices(tile_dims, tiles_pos));
      } else if (word == "last_tile_dim_replicate") {
        last_tile_dim_replicate = true;
      } else if (word == "last_tile_dims") {
        MS_RETURN_IF_ERROR(Expect('='));
        MS_RETURN_IF_ERROR(Expect('{'));
        last_tile_dims.emplace();
        while (!Consume('}')) {
          if (!last_tile_dims->empty()) MS_RETURN_IF_ERROR(Expect(','));
          SkipSpace();
          size_t type_pos = pos_;
          std::string type = Word();
          if (type == "manual") {
            last_tile_dims->push_back(SubgroupType::kManual);
          } else if (type == "replicated") {
            last_tile_dims->push_back(SubgroupType::kReplicated);
          } else if (type == "unreduced") {
            last_tile_dims->push_back(SubgroupType::kUnreduced);
          } else {
            return FailAt(type_pos,
                          "unknown subgroup type '" + type +
                              "' (expected manual, replicated or unreduced)");
          }
        }
      } else if (word == "shard_as" || word == "shard_like") {
        MS_ASSIGN_OR_RETURN(int64_t id, Int());
        group = ShardGroup{id, word == "shard_as"};
      } else if (word == "metadata") {
        MS_RETURN_IF_ERROR(Expect('='));
        MS_ASSIGN_OR_RETURN(metadata, BalancedBraces());
      } else {
        return FailAt(at, "unknown sharding attribute '" + word + "'");
      }
    }
    if (!kind) return Fail("sharding has no kind (replicated, devices=...)");
    Sharding result;
    switch (*kind) {
      case Sharding::Kind::kReplicated:
        result = Sharding::Replicate();
        break;
      case Sharding::Kind::kManual:
        result = Sharding::Manual();
        break;
      case Sharding::Kind::kUnknown:
        result = Sharding::Unknown();
        break;
      case Sharding::Kind::kUnreduced:
        result = Sharding::Unreduced();
        break;
      case Sharding::Kind::kMaximal:
        if (device < 0) return FailAt(kind_pos, "maximal sharding needs device=N");
        result = Sharding::Maximal(device);
        break;
      case Sharding::Kind::kTuple:
        return FailAt(kind_pos, "unexpected tuple");
      case Sharding::Kind::kTiled: {
        std::vector<SubgroupType> types;
        if (last_tile_dim_replicate && last_tile_dims)
          return FailAt(tiles_pos,
                        "both last_tile_dim_replicate and last_tile_dims");
        if (last_tile_dim_replicate) types = {SubgroupType::kReplicated};
        if (last_tile_dims) types = *last_tile_dims;
        if (static_cast<int64_t>(types.size()) > tiles->num_dimensions())
          return FailAt(tiles_pos,
                        "sharding has " + std::to_string(types.size()) +
                            " subgroup dims but the tile assignment has rank " +
                            std::to_string(tiles->num_dimensions()));
        result = Sharding::Subgroup(std::move(*tiles), std::move(types));
        break;
      }
    }
    if (*kind != Sharding::Kind::kMaximal && device >= 0)
      return FailAt(kind_pos, "device=N only goes with maximal");
    if (*kind != Sharding::Kind::kTiled &&
        (last_tile_dim_replicate || last_tile_dims))
      return FailAt(kind_pos, "last_tile_dims needs devices=[...]");
    result.set_shard_group(group);
    result.set_metadata(std::move(metadata));
    return result;
  }

  // After "devices=[dims]": either "<=[reshape]T(perm)" or an id list.
  StatusOr<TileAssignment> ParseDevices(const std::vector<int64_t>& dims,
                                        size_t dims_pos) {
    int64_t need = 1;
    for (int64_t d : dims) {
      if (d <= 0)
        return FailAt(dims_pos, "sharding tile dims must be positive, got " +
                                    JoinDims(dims));
      if (need > (int64_t{1} << 40) / d)
        return FailAt(dims_pos, "sharding tile assignment is too large");
      need *= d;
    }
    SkipSpace();
    size_t at = pos_;
    if (s_.compare(pos_, 2, "<=") == 0) {
      pos_ += 2;
      MS_ASSIGN_OR_RETURN(std::vector<int64_t> reshape, IntList('[', ']'));
      int64_t have = 1;
      for (int64_t d : reshape) {
        if (d <= 0 || have > (int64_t{1} << 40) / d)
          return FailAt(at, "bad iota reshape dims " + JoinDims(reshape));
        have *= d;
      }
      std::vector<int64_t> perm;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == 'T') {
        ++pos_;
        size_t perm_pos = pos_;
        MS_ASSIGN_OR_RETURN(perm, IntList('(', ')'));
        std::vector<bool> seen(reshape.size(), false);
        bool ok = perm.size() == reshape.size();
        for (int64_t p : perm) {
          if (!ok || p < 0 || p >= static_cast<int64_t>(reshape.size()) ||
              seen[p]) {
            ok = false;
            break;
          }
          seen[p] = true;
        }
        if (!ok)
          return FailAt(perm_pos, "iota transpose T" + JoinDims(perm) +
                                      " is not a permutation of " +
                                      std::to_string(reshape.size()) + " dims");
      }
      if (have != need)
        return FailAt(at, "sharding tile assignment has " +
                              std::to_string(have) + " devices but dims " +
                              JoinDims(dims) + " need " + std::to_string(need));
      return TileAssignment::Iota(dims, std::move(reshape), std::move(perm));
    }
    std::vector<int64_t> ids;
    while (true) {
      size_t id_pos = pos_;
      MS_ASSIGN_OR_RETURN(int64_t id, Int());
      if (id < 0) return FailAt(id_pos, "negative device id");
      ids.push_back(id);
      if (static_cast<int64_t>(ids.size()) > need) break;
      if (!Consume(',')) break;
    }
    if (static_cast<int64_t>(ids.size()) != need) {
      // Count the rest so the message says how many there were.
      while (Consume(',')) {
        if (!Int().ok()) break;
        ids.push_back(0);
      }
      return FailAt(at, "sharding tile assignment has " +
                            std::to_string(ids.size()) + " devices but dims " +
                            JoinDims(dims) + " need " + std::to_string(need));
    }
    std::vector<int64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end())
      return FailAt(at, "device id " + std::to_string(*dup) +
                            " repeated in sharding tile assignment");
    return TileAssignment::FromDevices(dims, std::move(ids));
  }

  // "{...}" with nesting and quoted strings; returns the inside verbatim.
  StatusOr<std::string> BalancedBraces() {
    SkipSpace();
    size_t start = pos_;
    if (pos_ >= s_.size() || s_[pos_] != '{')
      return Fail("expected '{'" + Found());
    int depth = 0;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        while (pos_ < s_.size() && s_[pos_] != '"') {
          if (s_[pos_] == '\\') ++pos_;
          ++pos_;
        }
      } else if (c == '{') {
        ++depth;
      } else if (c == '}') {
        if (--depth == 0) {
          ++pos_;
          return std::string(s_.substr(start + 1, pos_ - start - 2));
        }
      }
      ++pos_;
    }
    return FailAt(start, "unterminated '{'");
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t error_offset_ = 0;
};

}  // namespace

StatusOr<Sharding> Sharding::Parse(std::string_view text) {
  size_t offset = 0;
  StatusOr<Sharding> result = Parse(text, &offset);
  if (result.ok()) return result;
  return Status::Error(result.status().message() + " (at column " +
                       std::to_string(offset + 1) + " of the sharding)");
}

StatusOr<Sharding> Sharding::Parse(std::string_view text,
                                   size_t* error_offset) {
  ShardingReader reader(text);
  StatusOr<Sharding> result = reader.ParseAll();
  if (!result.ok() && error_offset) *error_offset = reader.error_offset();
  return result;
}

std::string Sharding::ToString(bool include_metadata) const {
  if (kind_ == Kind::kTuple) {
    std::string s = "{";
    for (size_t i = 0; i < elements_.size(); ++i) {
      if (i > 0) s += (i % 5 == 0) ? ", /*index=" + std::to_string(i) + "*/" : ", ";
      s += elements_[i].ToString(include_metadata);
    }
    return s + "}";
  }
  std::string s = "{";
  switch (kind_) {
    case Kind::kReplicated:
      s += "replicated";
      break;
    case Kind::kManual:
      s += "manual";
      break;
    case Kind::kUnreduced:
      s += "unreduced";
      break;
    case Kind::kUnknown:
      s += "unknown";
      break;
    case Kind::kMaximal:
      s += "maximal device=" + std::to_string(device_);
      break;
    case Kind::kTiled:
      s += "devices=" + tiles_.ToString();
      if (ReplicateOnLastTileDim()) {
        s += " last_tile_dim_replicate";
      } else if (!subgroup_types_.empty()) {
        s += " last_tile_dims={";
        for (size_t i = 0; i < subgroup_types_.size(); ++i) {
          if (i) s += ", ";
          s += SubgroupTypeName(subgroup_types_[i]);
        }
        s += "}";
      }
      break;
    case Kind::kTuple:
      break;
  }
  if (shard_group_)
    s += std::string(shard_group_->shard_as ? " shard_as " : " shard_like ") +
         std::to_string(shard_group_->id);
  if (include_metadata && !metadata_.empty())
    s += " metadata={" + metadata_ + "}";
  return s + "}";
}

}  // namespace meshsplit
