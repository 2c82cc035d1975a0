// Propagation's decisions over the shared sharding algebra (see
// sharding_ops.h). Tile-assignment work is done by TileAssignment and
// sharding_util, which keep iota assignments symbolic; what is left here is
// XLA's propagation policy (order, improvement, tuples) and the few rules
// whose XLA semantics the generic helpers do not share.
#include "propagation/sharding_ops.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "support/check.h"
#include "support/small_helpers.h"

namespace meshsplit::propagation {

namespace {

constexpr std::string_view kCseMarker =
    "op_name=\"_sharding_propagation_cse_prevention\"";

bool IsManualLeaf(const Sharding& s) {
  return s.kind() == Sharding::Kind::kManual;
}
bool IsTileMaximalLeaf(const Sharding& s) {
  return s.kind() == Sharding::Kind::kReplicated ||
         s.kind() == Sharding::Kind::kMaximal;
}

// Bounded memo of a pure sharding function of (sharding, integer key): the
// fixed point asks the same question for every layer of a model, and a
// sharding hashes and compares in O(rank). Metadata is compared too, since
// results keep the input's. Cleared when full.
template <typename Out>
class ShardingMemo {
 public:
  template <typename F>
  Out Get(const Sharding& s, const std::vector<int64_t>& key, F&& compute) {
    size_t h = s.Hash();
    for (int64_t k : key)
      h = (h ^ static_cast<size_t>(k + 2)) * 0x100000001b3ULL;
    std::vector<Entry>& bucket = table_[h];
    for (const Entry& e : bucket)
      if (e.key == key && e.in == s && e.in.metadata() == s.metadata())
        return e.out;
    Out out = compute();
    if (++size_ > kMaxEntries) {
      table_.clear();
      size_ = 1;
      table_[h].push_back({key, s, out});
    } else {
      bucket.push_back({key, s, out});
    }
    return out;
  }

 private:
  static constexpr size_t kMaxEntries = 4096;
  struct Entry {
    std::vector<int64_t> key;
    Sharding in;
    Out out;
  };
  std::unordered_map<size_t, std::vector<Entry>> table_;
  size_t size_ = 0;
};


}  // namespace

// --- small queries
// -------------------------------------------------------------

bool IsUnknownSharding(const Sharding& s) {
  if (!s.IsTuple()) return s.IsUnknown();
  return std::all_of(s.tuple_elements().begin(), s.tuple_elements().end(),
                     [](const Sharding& e) { return IsUnknownSharding(e); });
}

int64_t TileDimOr1(const Sharding& s, int64_t i) {
  if (!s.IsTiled() || i < 0 || i >= s.TiledDataRank()) return 1;
  return s.tile_assignment().dim(i);
}

int64_t DataRankOr0(const Sharding& s) {
  return s.IsTiled() ? s.TiledDataRank() : 0;
}

Sharding FlatTuple(std::vector<Sharding> elements) {
  bool nested = std::any_of(elements.begin(), elements.end(),
                            [](const Sharding& e) { return e.IsTuple(); });
  if (!nested) return Sharding::Tuple(std::move(elements));
  std::vector<Sharding> leaves;
  for (Sharding& e : elements) {
    if (!e.IsTuple()) {
      leaves.push_back(std::move(e));
      continue;
    }
    Sharding flat = FlatTuple(e.tuple_elements());
    for (const Sharding& l : flat.tuple_elements()) leaves.push_back(l);
  }
  return Sharding::Tuple(std::move(leaves));
}

bool HasCsePrevention(const Sharding& s) {
  return !s.metadata().empty() &&
         s.metadata().find("_sharding_propagation_cse_prevention") !=
             std::string::npos;
}

void SetCsePrevention(Sharding* s, bool on) {
  s->set_metadata(on ? std::string(kCseMarker) : std::string());
}

// --- order
// -----------------------------------------------------------------------

bool IsShardingStrictlyBetter(const Sharding& lhs, const Sharding& rhs) {
  if (lhs.IsTuple() != rhs.IsTuple()) return false;
  if (!lhs.IsTuple()) return IsManualLeaf(lhs) && IsTileMaximalLeaf(rhs);
  int mask = 0;
  const auto& l = lhs.tuple_elements();
  const auto& r = rhs.tuple_elements();
  for (size_t i = 0; i < l.size() && i < r.size(); ++i) {
    if (IsManualLeaf(l[i]) && IsTileMaximalLeaf(r[i])) mask |= 1;
    if (IsManualLeaf(r[i]) && IsTileMaximalLeaf(l[i])) mask |= 2;
  }
  return mask == 1;
}

bool IsSpatiallyPartitioned(const Sharding& s) {
  if (s.IsTuple())
    return std::any_of(
        s.tuple_elements().begin(), s.tuple_elements().end(),
        [](const Sharding& e) { return IsSpatiallyPartitioned(e); });
  return s.kind() != Sharding::Kind::kMaximal;
}

// --- merging
// ---------------------------------------------------------------------

std::optional<Sharding> ReturnImprovedSharding(
    Sharding from, const Sharding* to_improved, const Shape& shape,
    bool may_combine_partial_sharding, bool allow_aggressive_resharding) {
  if (to_improved != nullptr && IsShardingStrictlyBetter(from, *to_improved))
    return from;
  if (!IsSpatiallyPartitioned(from)) return std::nullopt;
  if (to_improved == nullptr) return from;
  if (from.IsManual()) return std::nullopt;
  if (from.IsTuple() != to_improved->IsTuple()) return std::nullopt;
  const int64_t tiles = from.NumTiles();
  if (MergeSharding(*to_improved, &from, may_combine_partial_sharding)) {
    if (!allow_aggressive_resharding && shape.IsArray() &&
        !to_improved->IsTileMaximal() && from.NumTiles() == tiles) {
      if (!IsSubTilingOrEqualSharding(shape, from, *to_improved))
        return std::nullopt;
    }
    return from;
  }
  return std::nullopt;
}

// --- moving tilings between dimension spaces
// ----------------------------------------

Sharding PartiallyReplicateOnDims(const Sharding& s,
                                  const std::vector<int64_t>& dims) {
  if (!s.IsTiled()) return s;
  const int64_t rank = s.TiledDataRank();
  std::vector<int64_t> valid;
  for (int64_t d : dims)
    if (d >= 0 && d < rank && !Contains(valid, d)) valid.push_back(d);
  return sharding_util::PartiallyReplicateTiledShardingOnDims(s, valid);
}

Sharding PartiallyReplicateOnAllDimsExcept(const Sharding& s,
                                           const std::vector<int64_t>& keep) {
  if (!s.IsTiled()) return s;
  return sharding_util::PartiallyReplicateTiledShardingOnAllDimsExcept(s, keep);
}

Sharding ReplicateAllDataDims(const Sharding& s, int64_t data_rank) {
  if (s.IsManual()) return s;
  if (!s.IsTiled() || s.subgroup_types().empty()) return Sharding::Replicate();
  return sharding_util::ReplicateAllDataDims(s, data_rank);
}

Sharding RemoveShapeDimensions(const Sharding& s,
                               const std::vector<int64_t>& dims) {
  if (!s.IsTiled() || dims.empty()) return s;
  for (int64_t d : dims) MS_CHECK(TileDimOr1(s, d) == 1);
  return sharding_util::RemoveShapeDimensions(s, dims);
}

Sharding TransposeSharding(const Sharding& s,
                           const std::vector<int64_t>& dims) {
  if (!s.IsTiled()) return s;
  const int64_t rank = s.TiledDataRank();
  if (static_cast<int64_t>(dims.size()) == rank) {
    thread_local ShardingMemo<Sharding> memo;
    return memo.Get(s, dims,
                    [&] { return sharding_util::TransposeSharding(s, dims); });
  }
  // A permutation of the whole tile assignment: subgroup dims move too.
  const TileAssignment& ta = s.tile_assignment();
  MS_CHECK(static_cast<int64_t>(dims.size()) == ta.num_dimensions());
  std::vector<SubgroupType> types;
  for (size_t i = rank; i < dims.size(); ++i) {
    MS_CHECK(dims[i] >= rank);
    types.push_back(s.subgroup_types()[dims[i] - rank]);
  }
  return Sharding::Subgroup(ta.Transpose(dims), std::move(types));
}

Sharding ProjectSharding(const Sharding& s, const std::vector<int64_t>& dst_to_src) {
  if (!s.IsTiled()) return s;
  thread_local ShardingMemo<Sharding> memo;
  return memo.Get(s, dst_to_src, [&] { return sharding_util::ProjectSharding(s, dst_to_src); });
}

namespace {

std::vector<int64_t> ReshapeKey(const Shape& source, const Shape& target) {
  std::vector<int64_t> key = source.dimensions();
  key.push_back(-1);  // separator (dims are >= 0)
  key.insert(key.end(), target.dimensions().begin(), target.dimensions().end());
  return key;
}

}  // namespace

std::optional<Sharding> ReshapeSharding(const Shape& source,
                                        const Shape& target,
                                        const Sharding& s) {
  if (!s.IsTiled()) return s;
  thread_local ShardingMemo<std::optional<Sharding>> memo;
  return memo.Get(s, ReshapeKey(source, target), [&] {
    return sharding_util::ReshapeShardingXla(source.dimensions(),
                                             target.dimensions(), s);
  });
}

Sharding PropagateShardingThroughReshape(const Shape& source,
                                         const Shape& target,
                                         const Sharding& s) {
  if (!s.IsTiled()) return s;
  thread_local ShardingMemo<Sharding> memo;
  return memo.Get(s, ReshapeKey(source, target), [&] {
    return sharding_util::PropagateShardingThroughReshape(
        source.dimensions(), target.dimensions(), s);
  });
}

Sharding ReverseSharding(const Sharding& s, const std::vector<int64_t>& dims) {
  if (!s.IsTiled() || dims.empty()) return s;
  std::vector<int64_t> valid;
  for (int64_t d : dims)
    if (d >= 0 && d < s.tile_assignment().num_dimensions() &&
        !Contains(valid, d))
      valid.push_back(d);
  Sharding r = sharding_util::ReverseSharding(s, valid);
  r.set_metadata(std::string());
  return r;
}

bool IsSubTilingOrEqualSharding(const Shape& shape, const Sharding& sub,
                                const Sharding& s) {
  if (sub.IsManual() || s.IsManual()) return false;
  if (s.IsTileMaximal()) return true;
  if (sub.IsTileMaximal()) return false;
  if (!sub.IsTiled() || !s.IsTiled()) return false;
  if (sub.TiledDataRank() != s.TiledDataRank()) return false;
  const int64_t rank = sub.TiledDataRank();
  if (rank != shape.rank()) return false;
  std::vector<int64_t> sub_base(rank), base(rank);
  for (int64_t i = 0; i < rank; ++i) {
    // Fewer tiles along a dim is never a sub-tiling, even when the ceil'd
    // tile sizes of an uneven dim come out equal (XLA decides on counts).
    if (sub.TileDim(i) < s.TileDim(i)) return false;
    sub_base[i] = (shape.dimensions(i) + sub.TileDim(i) - 1) / sub.TileDim(i);
    base[i] = (shape.dimensions(i) + s.TileDim(i) - 1) / s.TileDim(i);
    if (sub_base[i] > base[i]) return false;
  }
  // Equal placements, and (for even tilings without manual subgroups) a
  // sub-tiling whose coarsening to `s`'s tile counts is `s`: decided
  // symbolically. The device walk below is the general answer.
  if (sub == s) return true;
  if (!sub.HasManualSubgroup() && !s.HasManualSubgroup() &&
      sub.tile_assignment().num_devices() ==
          s.tile_assignment().num_devices()) {
    bool even = true;
    for (int64_t i = 0; i < rank && even; ++i)
      even = shape.dimensions(i) % sub.TileDim(i) == 0 &&
             sub.TileDim(i) % s.TileDim(i) == 0;
    if (even) {
      Sharding coarse = sub;
      for (int64_t i = 0; i < rank; ++i)
        coarse = sharding_util::KeepTilesOnDim(coarse, i, s.TileDim(i));
      if (coarse == s) return true;
    }
  }
  // The walk below is O(devices) in time and memory. Past kMaxDeviceWalk
  // devices (a mesh axis of 2^40 parses fine and stays symbolic everywhere
  // else) the answer is "not a sub-tiling", the conservative one: the caller
  // then keeps the sharding it has.
  constexpr int64_t kMaxDeviceWalk = int64_t{1} << 16;
  if (sub.tile_assignment().num_devices() > kMaxDeviceWalk ||
      s.tile_assignment().num_devices() > kMaxDeviceWalk)
    return false;
  // Tile offsets per device (tile index times the tile size; a tile that
  // reaches the end of a dim may be short).
  auto offsets = [&](const Sharding& sh, const std::vector<int64_t>& b) {
    std::unordered_map<int64_t, std::vector<int64_t>> m;
    const TileAssignment& t = sh.tile_assignment();
    const std::vector<int64_t> devices = t.Devices();
    std::vector<int64_t> idx(t.num_dimensions(), 0);
    for (int64_t dev : devices) {
      auto& v = m[dev];
      for (int64_t i = 0; i < rank; ++i) v.push_back(b[i] * idx[i]);
      for (int64_t i = t.num_dimensions() - 1; i >= 0; --i) {
        if (++idx[i] < t.dim(i)) break;
        idx[i] = 0;
      }
    }
    return m;
  };
  auto so = offsets(sub, sub_base);
  auto o = offsets(s, base);
  for (const auto& [dev, sv] : so) {
    auto it = o.find(dev);
    if (it == o.end() || it->second.size() < sv.size()) return false;
    const auto& v = it->second;
    for (int64_t j = 0; j < rank; ++j) {
      if (sv[j] < v[j]) return false;
      // Only a tile running past the end (padding) skips the end check; one
      // ending exactly at the end must fit like any other (as in XLA).
      const bool past_end = sv[j] + sub_base[j] > shape.dimensions(j);
      if (!past_end && sv[j] + sub_base[j] > v[j] + base[j]) return false;
    }
  }
  return true;
}

Sharding FindCommonSharding(const std::vector<Sharding>& shardings,
                            std::optional<Sharding> default_sharding) {
  MS_CHECK(!shardings.empty());
  Sharding common = shardings[0];
  for (size_t i = 1; i < shardings.size(); ++i) {
    if (common != shardings[i] &&
        !MergeShardingIfCompatible(shardings[i], common.NumTiles(), &common))
      return default_sharding ? *default_sharding : shardings[0];
  }
  return common;
}

std::optional<int64_t> GetFirstTargetDimToMoveShardingTiles(
    const Shape& shape, const Sharding& s, int64_t source_dim) {
  if (shape.rank() < 2 || shape.dimensions(source_dim) == 1)
    return std::nullopt;
  if (!s.IsTiled() || TileDimOr1(s, source_dim) == 1) return std::nullopt;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (d == source_dim) continue;
    if (shape.dimensions(d) % (TileDimOr1(s, source_dim) * TileDimOr1(s, d)) ==
        0)
      return d;
  }
  return std::nullopt;
}

// --- tuples
// ------------------------------------------------------------------------

int64_t LeafCount(const Shape& shape) {
  if (!shape.IsTuple()) return 1;
  int64_t n = 0;
  for (const Shape& e : shape.tuple_shapes()) n += LeafCount(e);
  return n;
}

Sharding GetSubSharding(const Sharding& s, const Shape& shape, int64_t index) {
  if (!s.IsTuple() || !shape.IsTuple()) return s;
  int64_t start = 0;
  for (int64_t i = 0; i < index; ++i) start += LeafCount(shape.tuple_shapes(i));
  const Shape& sub = shape.tuple_shapes(index);
  const auto& el = s.tuple_elements();
  if (start >= static_cast<int64_t>(el.size())) return Sharding::Replicate();
  if (!sub.IsTuple()) return el[start];
  int64_t n = LeafCount(sub);
  std::vector<Sharding> leaves(
      el.begin() + start, el.begin() + std::min<int64_t>(el.size(), start + n));
  return Sharding::Tuple(std::move(leaves));
}

Sharding SingleTuple(const Shape& shape, const Sharding& leaf) {
  if (!shape.IsTuple()) return leaf;
  if (leaf.IsTuple())
    return FlatTuple(std::vector<Sharding>(LeafCount(shape), leaf));
  return Sharding::Tuple(std::vector<Sharding>(LeafCount(shape), leaf));
}

Sharding NormalizeToShape(const Sharding& s, const Shape& shape) {
  if (shape.IsTuple() && !s.IsTuple()) return SingleTuple(shape, s);
  if (!shape.IsTuple() && s.IsTuple() && s.tuple_elements().size() == 1)
    return s.tuple_elements()[0];
  return s;
}

std::vector<int64_t> UnspecifiedDimsAsWritten(const std::string& backend_config) {
  std::vector<int64_t> dims;
  size_t p = backend_config.find("unspecified_dims=[");
  if (p == std::string::npos) return dims;
  p += std::string_view("unspecified_dims=[").size();
  const char* text = backend_config.data();
  while (p < backend_config.size() && text[p] != ']') {
    size_t q = p;
    if (text[q] == '-') ++q;
    while (q < backend_config.size() && std::isdigit(static_cast<unsigned char>(text[q]))) ++q;
    int64_t v = 0;
    if (q > p && std::from_chars(text + p, text + q, v).ec == std::errc()) dims.push_back(v);
    p = q > p ? q : p + 1;  // past the number, or past one other character
  }
  return dims;
}

}  // namespace meshsplit::propagation
