// Sharding algebra for propagation (see sharding_ops.h).
#include "propagation/sharding_ops.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>

#include "support/check.h"

namespace meshsplit::propagation {

namespace {

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Bounded memo of a pure sharding function of (sharding, integer key): the
// fixed point asks the same question for every layer of a model. Compares
// with operator== (cheap when device lists are shared); cleared when full.
class ShardingMemo {
 public:
  template <typename F>
  PSharding Get(const PSharding& s, const std::vector<int64_t>& key, F&& compute) {
    uint64_t h = StructureHash(s);
    for (int64_t k : key) h = (h ^ static_cast<uint64_t>(k + 2)) * 0x100000001b3ULL;
    for (const Entry& e : table_[h])
      if (e.key == key && e.in == s && e.in.cse_prevention() == s.cse_prevention())
        return e.out;
    PSharding out = compute();
    if (++size_ > 4096) {
      table_.clear();
      size_ = 1;
    }
    table_[h].push_back({key, s, out});
    return out;
  }

 private:
  struct Entry {
    std::vector<int64_t> key;
    PSharding in, out;
  };
  std::unordered_map<uint64_t, std::vector<Entry>> table_;
  size_t size_ = 0;
};

TileArray Iota(std::vector<int64_t> dims) {
  TileArray t;
  t.dims = std::move(dims);
  t.devices = DeviceList::Iota(Product(t.dims));
  return t;
}

// Rebuilds a tiled sharding with the same subgroup types as `like`.
PSharding WithTypesOf(const PSharding& like, TileArray tiles) {
  return PSharding::Subgroup(std::move(tiles), like.subgroup_types());
}

bool IsLeafMoreSpecific(const PSharding& lhs, const PSharding& rhs) {
  if (lhs.IsManualLeaf() && rhs.IsTileMaximalLeaf()) return true;
  if (lhs.IsManualLeaf() || rhs.IsManualLeaf()) return false;
  if (rhs.IsTiled()) return lhs.NumTiles() > rhs.NumTiles();
  if (rhs.IsReplicatedLeaf()) return !lhs.IsReplicatedLeaf();
  return !lhs.IsTileMaximalLeaf() && lhs.kind() != PSharding::Kind::kUnknown;
}

int StrictlyBetterMask(const PSharding& lhs, const PSharding& rhs) {
  int mask = 0;
  const auto& l = lhs.tuple_elements();
  const auto& r = rhs.tuple_elements();
  for (size_t i = 0; i < l.size() && i < r.size(); ++i) {
    if (l[i].IsManualLeaf() && r[i].IsTileMaximalLeaf()) mask |= 1;
    if (r[i].IsManualLeaf() && l[i].IsTileMaximalLeaf()) mask |= 2;
  }
  return mask;
}

}  // namespace

bool IsShardingMoreSpecific(const PSharding& lhs, const PSharding& rhs) {
  if (lhs.IsTuple() != rhs.IsTuple()) return false;
  if (lhs.IsTuple()) {
    const auto& l = lhs.tuple_elements();
    const auto& r = rhs.tuple_elements();
    if (l.size() != r.size()) return false;
    bool better = false;
    for (size_t i = 0; i < l.size(); ++i) {
      if (IsShardingMoreSpecific(r[i], l[i])) return false;
      if (IsShardingMoreSpecific(l[i], r[i])) better = true;
    }
    return better;
  }
  return IsLeafMoreSpecific(lhs, rhs);
}

bool IsShardingStrictlyBetter(const PSharding& lhs, const PSharding& rhs) {
  if (lhs.IsTuple() != rhs.IsTuple()) return false;
  if (lhs.IsTuple()) return StrictlyBetterMask(lhs, rhs) == 1;
  return lhs.IsManualLeaf() && rhs.IsTileMaximalLeaf();
}

bool IsSpatiallyPartitioned(const PSharding& s) {
  if (s.IsTuple())
    return std::any_of(s.tuple_elements().begin(), s.tuple_elements().end(),
                       [](const PSharding& e) { return IsSpatiallyPartitioned(e); });
  return s.kind() != PSharding::Kind::kMaximal;
}

bool MergeShardingIfCompatible(const PSharding& to_merge, PSharding* dst) {
  return MergeShardingIfCompatible(to_merge, dst->NumTiles() + 1, dst);
}

bool MergeShardingIfCompatible(const PSharding& to_merge, int64_t minimum_tiles,
                               PSharding* dst) {
  if (to_merge.IsTuple() || dst->IsTuple() || to_merge.IsManual() ||
      dst->IsManual())
    return false;
  if (!to_merge.IsTiled()) return false;
  if (!dst->IsTiled()) {
    if (dst->kind() == PSharding::Kind::kMaximal) return false;
    *dst = to_merge;
    return true;
  }
  if (!dst->HasPartialReplication()) return false;
  const int rank = to_merge.TiledDataRank();
  if (dst->TiledDataRank() != rank) return false;
  const int merge_man = to_merge.SubgroupManualDim();
  const int dst_man = dst->SubgroupManualDim();
  if ((merge_man >= 0) != (dst_man >= 0)) return false;
  const TileArray& mt = to_merge.tile_assignment();
  const TileArray& dt = dst->tile_assignment();
  if (mt.num_elements() != dt.num_elements()) return false;
  std::vector<int64_t> merged;
  int64_t merge_groups = 1, dst_groups = 1;
  for (int i = 0; i < rank; ++i) {
    int64_t m = mt.dims[i], d = dt.dims[i];
    merge_groups *= m;
    dst_groups *= d;
    if (m == d || d == 1) merged.push_back(m);
    else if (m == 1) merged.push_back(d);
    else return false;
  }
  const int64_t num_devices = mt.num_elements();
  const int64_t new_tiles = Product(merged);
  if (num_devices % new_tiles != 0 || new_tiles < minimum_tiles) return false;
  int64_t man_size = 1;
  if (merge_man >= 0) {
    man_size = mt.dims[merge_man];
    if (man_size != dt.dims[dst_man]) return false;
    merged.push_back(man_size);
    merge_groups *= man_size;
    dst_groups *= man_size;
    if (num_devices % (new_tiles * man_size) != 0) return false;
  }
  const int64_t replication = num_devices / (new_tiles * man_size);
  if (replication > 1) merged.push_back(replication);

  // Each merged tile takes a device present in both source groups.
  std::vector<std::set<int64_t>> mg(merge_groups), dg(dst_groups);
  const int64_t mgs = num_devices / merge_groups, dgs = num_devices / dst_groups;
  for (int64_t i = 0; i < num_devices; ++i) {
    mg[i / mgs].insert(mt.devices[i]);
    dg[i / dgs].insert(dt.devices[i]);
  }
  TileArray out;
  out.dims = merged;
  std::vector<int64_t>& out_devices = out.devices.mut();
  out_devices.resize(num_devices);
  std::vector<int64_t> idx(merged.size(), 0);
  for (int64_t k = 0; k < num_devices; ++k) {
    int64_t mgid = 0, dgid = 0;
    for (int i = 0; i < rank; ++i) {
      mgid = mgid * mt.dims[i] + (mt.dims[i] == 1 ? 0 : idx[i]);
      dgid = dgid * dt.dims[i] + (dt.dims[i] == 1 ? 0 : idx[i]);
    }
    if (merge_man >= 0) {
      mgid = mgid * man_size + idx[rank];
      dgid = dgid * man_size + idx[rank];
    }
    auto& a = mg[mgid];
    auto& b = dg[dgid];
    bool found = false;
    for (int64_t dev : a) {
      if (b.count(dev)) {
        out_devices[k] = dev;
        a.erase(dev);
        b.erase(dev);
        found = true;
        break;
      }
    }
    if (!found) return false;
    for (int i = (int)merged.size() - 1; i >= 0; --i) {
      if (++idx[i] < merged[i]) break;
      idx[i] = 0;
    }
  }
  std::vector<SubgroupType> types;
  if (merge_man >= 0) types.push_back(SubgroupType::kManual);
  if (replication > 1) types.push_back(SubgroupType::kReplicated);
  *dst = PSharding::Subgroup(std::move(out), std::move(types));
  return true;
}

bool MergeSharding(const PSharding& to_merge, PSharding* dst,
                   bool may_combine_partial_sharding) {
  if (to_merge.IsTuple()) {
    if (!dst->IsTuple() ||
        dst->tuple_elements().size() != to_merge.tuple_elements().size())
      return false;
    bool changed = false;
    for (size_t i = 0; i < to_merge.tuple_elements().size(); ++i)
      changed |= MergeSharding(to_merge.tuple_elements()[i],
                               &dst->mutable_tuple_elements()[i],
                               may_combine_partial_sharding);
    return changed;
  }
  if (dst->IsTuple()) return false;
  if (may_combine_partial_sharding && to_merge.HasPartialReplication() &&
      dst->HasPartialReplication() &&
      to_merge.tile_assignment().num_elements() ==
          dst->tile_assignment().num_elements()) {
    // Memoised: the same pair of partial shardings meets at every layer.
    struct MergeEntry {
      PSharding to_merge, dst_in, dst_out;
      bool merged;
    };
    thread_local std::unordered_map<uint64_t, std::vector<MergeEntry>> memo;
    thread_local size_t memo_size = 0;
    const uint64_t h = StructureHash(to_merge) * 31 + StructureHash(*dst);
    for (const MergeEntry& e : memo[h]) {
      if (e.to_merge == to_merge && e.dst_in == *dst &&
          e.to_merge.cse_prevention() == to_merge.cse_prevention() &&
          e.dst_in.cse_prevention() == dst->cse_prevention()) {
        if (!e.merged) return IsLeafMoreSpecific(*dst, to_merge);
        *dst = e.dst_out;
        return true;
      }
    }
    PSharding dst_in = *dst;
    const bool merged = MergeShardingIfCompatible(
        to_merge, std::max(to_merge.NumTiles(), dst->NumTiles()) + 1, dst);
    if (++memo_size > 4096) {
      memo.clear();
      memo_size = 1;
    }
    memo[h].push_back({to_merge, std::move(dst_in), *dst, merged});
    if (merged) return true;
  }
  return IsLeafMoreSpecific(*dst, to_merge);
}

std::optional<PSharding> ReturnImprovedSharding(
    PSharding from, const PSharding* to_improved, const Shape& shape,
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

namespace {
PSharding TransposeUncached(const PSharding& s, const std::vector<int64_t>& dims);
}  // namespace

PSharding TransposeSharding(const PSharding& s, const std::vector<int64_t>& dims) {
  if (!s.IsTiled()) return s;
  thread_local ShardingMemo memo;
  return memo.Get(s, dims, [&] { return TransposeUncached(s, dims); });
}

namespace {

PSharding TransposeUncached(const PSharding& s, const std::vector<int64_t>& dims) {
  std::vector<int64_t> perm = dims;
  const int rank = s.TiledDataRank();
  if ((int)perm.size() == rank) {
    for (int i = rank; i < s.tile_assignment().num_dimensions(); ++i)
      perm.push_back(i);
  }
  MS_CHECK((int)perm.size() == s.tile_assignment().num_dimensions());
  TileArray t = s.tile_assignment().Transpose(perm);
  std::vector<SubgroupType> types;
  for (int i = rank; i < (int)perm.size(); ++i)
    types.push_back(s.subgroup_types()[perm[i] - rank]);
  return PSharding::Subgroup(std::move(t), std::move(types));
}

}  // namespace

PSharding PartiallyReplicateOnDims(const PSharding& s,
                                   const std::vector<int64_t>& dims) {
  if (!s.IsTiled()) return s;
  const int rank = s.TiledDataRank();
  int64_t group = 1;
  std::vector<int64_t> valid;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || Contains(valid, d)) continue;
    valid.push_back(d);
    group *= s.tile_assignment().dims[d];
  }
  if (group == 1) return s;
  if (group == s.NumTiles() && s.subgroup_types().empty())
    return PSharding::Replicate();
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    return Contains(valid, a) < Contains(valid, b);
  });
  for (int i = rank; i < s.tile_assignment().num_dimensions(); ++i)
    perm.push_back(i);
  TileArray t = s.tile_assignment().Transpose(perm);
  std::vector<int64_t> shape = s.tile_assignment().dims;
  for (int64_t d : valid) shape[d] = 1;
  if (s.ReplicateOnLastTileDim()) {
    shape.back() *= group;
    return PSharding::PartialTile(t.Reshape(shape));
  }
  shape.insert(shape.begin() + rank, group);
  std::vector<SubgroupType> types = {SubgroupType::kReplicated};
  for (SubgroupType ty : s.subgroup_types()) types.push_back(ty);
  return PSharding::Subgroup(t.Reshape(shape), types);
}

PSharding PartiallyReplicateOnAllDimsExcept(const PSharding& s,
                                            const std::vector<int64_t>& keep) {
  if (!s.IsTiled()) return s;
  std::vector<int64_t> dims;
  for (int i = 0; i < s.TiledDataRank(); ++i)
    if (!Contains(keep, i)) dims.push_back(i);
  return PartiallyReplicateOnDims(s, dims);
}

PSharding ReplicateAllDataDims(const PSharding& s, int64_t data_rank) {
  if (s.IsManual()) return s;
  if (s.subgroup_types().empty()) return PSharding::Replicate();
  PSharding r = PartiallyReplicateOnAllDimsExcept(s, {});
  if (data_rank >= 0 && r.IsTiled() && data_rank != r.TiledDataRank()) {
    std::vector<int64_t> shape(data_rank, 1);
    for (int i = r.TiledDataRank(); i < r.tile_assignment().num_dimensions(); ++i)
      shape.push_back(r.tile_assignment().dims[i]);
    r = WithTypesOf(r, r.tile_assignment().Reshape(shape));
  }
  return r;
}

PSharding RemoveShapeDimensions(const PSharding& s,
                                const std::vector<int64_t>& dims) {
  if (!s.IsTiled() || dims.empty()) return s;
  std::vector<int64_t> shape;
  for (int i = 0; i < s.tile_assignment().num_dimensions(); ++i) {
    if (Contains(dims, i)) {
      MS_CHECK(s.tile_assignment().dims[i] == 1);
    } else {
      shape.push_back(s.tile_assignment().dims[i]);
    }
  }
  return WithTypesOf(s, s.tile_assignment().Reshape(shape));
}

std::optional<PSharding> TransposeShardingWithCollapsedDims(
    const PSharding& s, const std::vector<int64_t>& src_to_tgt_in,
    const std::vector<int64_t>& tgt_to_src_in) {
  if (!s.IsTiled()) return s;
  std::vector<int64_t> src_to_tgt = src_to_tgt_in, tgt_to_src = tgt_to_src_in;
  const int nsub = (int)s.subgroup_types().size();
  if ((int)src_to_tgt.size() < s.tile_assignment().num_dimensions()) {
    const int extra = s.tile_assignment().num_dimensions() - (int)src_to_tgt.size();
    const int64_t tsz = tgt_to_src.size(), ssz = src_to_tgt.size();
    for (int i = 0; i < extra; ++i) {
      src_to_tgt.push_back(tsz + i);
      tgt_to_src.push_back(ssz + i);
    }
  }
  std::vector<int64_t> tgt_skip_new(tgt_to_src.size(), -1);
  int64_t skipped_tgt = 0;
  const int64_t src_data = (int64_t)src_to_tgt.size() - nsub;
  const int64_t tgt_data = (int64_t)tgt_to_src.size() - nsub;
  for (size_t i = 0; i < tgt_to_src.size(); ++i) {
    if (tgt_to_src[i] < 0) {
      ++skipped_tgt;
    } else {
      tgt_skip_new[i] = i - skipped_tgt;
    }
  }
  int64_t skipped_src = std::count(src_to_tgt.begin(), src_to_tgt.end(), -1);
  std::vector<int64_t> perm(src_to_tgt.size());
  for (int64_t i = 0; i < src_data; ++i) {
    if (src_to_tgt[i] < 0) {
      if (s.tile_assignment().dims[i] > 1) return std::nullopt;
      perm[src_data - skipped_src] = i;
      --skipped_src;
    } else {
      perm[tgt_skip_new[src_to_tgt[i]]] = i;
    }
  }
  skipped_src = std::count(src_to_tgt.begin(), src_to_tgt.end(), -1);
  for (int64_t i = src_data; i < (int64_t)src_to_tgt.size(); ++i)
    perm[src_to_tgt[i] - skipped_tgt + skipped_src] = i;
  TileArray t = s.tile_assignment().Transpose(perm);
  std::vector<int64_t> tiles(tgt_to_src.size(), 1);
  for (int64_t i = 0; i < (int64_t)tiles.size(); ++i) {
    if (tgt_to_src[i] >= 0) {
      int64_t d = tgt_skip_new[i];
      if (i >= tgt_data) d += skipped_src;
      tiles[i] = t.dims[d];
    }
  }
  return WithTypesOf(s, t.Reshape(tiles));
}

namespace {

PSharding ProjectUncached(const PSharding& s, const std::vector<int64_t>& src_to_tgt,
                          int64_t target_rank);

}  // namespace

PSharding ProjectSharding(const PSharding& s, const std::vector<int64_t>& src_to_tgt,
                          int64_t target_rank) {
  if (!s.IsTiled()) return s;
  thread_local ShardingMemo memo;
  std::vector<int64_t> key = src_to_tgt;
  key.push_back(target_rank);
  return memo.Get(s, key, [&] { return ProjectUncached(s, src_to_tgt, target_rank); });
}

namespace {

PSharding ProjectUncached(const PSharding& s, const std::vector<int64_t>& src_to_tgt,
                          int64_t target_rank) {
  std::vector<int64_t> unmapped;
  std::vector<int64_t> tgt_to_src(target_rank, -1);
  for (size_t i = 0; i < src_to_tgt.size(); ++i) {
    if (src_to_tgt[i] < 0) unmapped.push_back(i);
    else tgt_to_src[src_to_tgt[i]] = i;
  }
  PSharding r = PartiallyReplicateOnDims(s, unmapped);
  if (!r.IsTiled()) return r;
  auto t = TransposeShardingWithCollapsedDims(r, src_to_tgt, tgt_to_src);
  MS_CHECK(t.has_value());
  return *t;
}

}  // namespace

PSharding PropagateAlongDimsAndReplicateOthers(
    const PSharding& s, const std::vector<int64_t>& source_dims,
    const std::vector<int64_t>& target_dims, int64_t target_rank) {
  if (!s.IsTiled()) return s;
  PSharding r = PartiallyReplicateOnAllDimsExcept(s, source_dims);
  if (!r.IsTiled()) return r;
  // Order the kept source dims like their targets, then reshape.
  std::vector<int64_t> order(source_dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return target_dims[a] < target_dims[b];
  });
  std::vector<int64_t> src_sorted = source_dims;
  std::sort(src_sorted.begin(), src_sorted.end());
  std::vector<int64_t> perm;
  for (int64_t i : order) perm.push_back(source_dims[i]);
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == src_sorted[i];
  if (!identity) {
    for (int64_t d = 0, i = source_dims.size();
         i < r.tile_assignment().num_dimensions(); ++i) {
      while (Contains(source_dims, d)) ++d;
      perm.push_back(d++);
    }
    r = TransposeSharding(r, perm);
    if (!r.IsTiled()) return r;
  }
  std::vector<int64_t> tiles(target_rank, 1);
  for (size_t i = 0; i < source_dims.size(); ++i)
    tiles[target_dims[i]] = s.tile_assignment().dims[source_dims[i]];
  for (int i = r.TiledDataRank(); i < r.tile_assignment().num_dimensions(); ++i)
    tiles.push_back(r.tile_assignment().dims[i]);
  return WithTypesOf(r, r.tile_assignment().Reshape(tiles));
}

std::optional<PSharding> ReshapeSharding(const Shape& source, const Shape& target,
                                         const PSharding& s) {
  if (!s.IsTiled()) return s;
  const int src_rank = source.rank();
  std::vector<int64_t> tgt_tiles;
  std::vector<int64_t> src_stack(source.dimensions().rbegin(),
                                 source.dimensions().rend());
  std::vector<int64_t> tgt_stack(target.dimensions().rbegin(),
                                 target.dimensions().rend());
  std::vector<int64_t> tile_stack(s.tile_assignment().dims.begin(),
                                  s.tile_assignment().dims.begin() + src_rank);
  std::reverse(tile_stack.begin(), tile_stack.end());
  int64_t src_index = -1;
  std::vector<int64_t> dims_to_replicate;
  auto push_src = [&](int64_t size, int64_t parts) {
    src_stack.push_back(size);
    tile_stack.push_back(parts);
    --src_index;
  };
  auto pop_src = [&]() {
    src_stack.pop_back();
    tile_stack.pop_back();
    ++src_index;
  };
  bool inplace = false;
  auto append = [&](int64_t size) {
    if (inplace) tgt_tiles.back() *= size;
    else tgt_tiles.push_back(size);
    inplace = false;
  };
  while (!src_stack.empty() && !tgt_stack.empty() && Product(tile_stack) != 1) {
    int64_t prod = 1;
    while (!tile_stack.empty() && tile_stack.back() == 1) {
      prod *= src_stack.back();
      pop_src();
    }
    while (!tgt_stack.empty() && tgt_stack.back() > 1 &&
           prod % tgt_stack.back() == 0) {
      prod /= tgt_stack.back();
      tgt_stack.pop_back();
      append(1);
    }
    if (prod != 1) push_src(prod, 1);
    if (src_stack.empty() || tgt_stack.empty()) break;
    int64_t s_size = src_stack.back();
    int64_t s_parts = tile_stack.back();
    pop_src();
    int64_t t_size = tgt_stack.back();
    tgt_stack.pop_back();
    if (s_size == t_size) {
      append(s_parts);
    } else if (t_size == 1) {
      append(1);
      push_src(s_size, s_parts);
    } else if (s_size == 1) {
      tgt_stack.push_back(t_size);
      if (s_parts > 1) dims_to_replicate.push_back(src_index);
    } else if (s_parts == 1) {
      if (!src_stack.empty() && tile_stack.back() == 1) {
        src_stack.back() *= s_size;
      } else {
        break;
      }
    } else if (s_size % s_parts != 0) {
      return std::nullopt;
    } else {
      int64_t g = std::gcd(s_parts, t_size);
      if (g == 1) break;
      push_src(s_size / g, s_parts / g);
      tgt_stack.push_back(t_size / g);
      append(g);
      inplace = true;
    }
  }
  if (Product(tgt_tiles) == 1) return std::nullopt;
  while ((int)tgt_tiles.size() < target.rank()) tgt_tiles.push_back(1);
  const PSharding sh = dims_to_replicate.empty()
                           ? s
                           : PartiallyReplicateOnDims(s, dims_to_replicate);
  if (!sh.IsTiled()) return std::nullopt;
  std::vector<SubgroupType> types = sh.subgroup_types();
  const int rep_dim = sh.SubgroupReplicationDim();
  for (int i = sh.TiledDataRank(); i < sh.tile_assignment().num_dimensions(); ++i)
    tgt_tiles.push_back(i == rep_dim ? 1 : sh.tile_assignment().dims[i]);
  const int64_t total = sh.tile_assignment().num_elements();
  if (total % Product(tgt_tiles) != 0) return std::nullopt;
  const int64_t rep = total / Product(tgt_tiles);
  if (rep > 1) {
    if (rep_dim >= 0) {
      tgt_tiles[rep_dim - sh.TiledDataRank() + target.rank()] = rep;
    } else {
      tgt_tiles.push_back(rep);
      types.push_back(SubgroupType::kReplicated);
    }
  }
  return PSharding::Subgroup(sh.tile_assignment().Reshape(tgt_tiles), types);
}

namespace {

PSharding ReshapeNoManual(const Shape& source, const Shape& target,
                          const PSharding& s) {
  PSharding result = PSharding::Replicate();
  const int src_rank = source.rank();
  int start = 0;
  while (start < src_rank) {
    bool found = false;
    for (int end = src_rank; end > start; --end) {
      std::vector<int64_t> grouped(src_rank, 1);
      for (int i = start; i < end; ++i) grouped[i] = s.tile_assignment().dims[i];
      PSharding g = PSharding::Tile(Iota(grouped));
      auto reshaped = ReshapeSharding(source, target, g);
      if (!reshaped || !reshaped->IsTiled()) continue;
      std::vector<int64_t> perm;
      for (int i = start; i < end; ++i) perm.push_back(i);
      for (int i = 0; i < start; ++i) perm.push_back(i);
      for (int i = end; i < s.tile_assignment().num_dimensions(); ++i)
        perm.push_back(i);
      std::vector<int64_t> rdims = reshaped->tile_assignment().dims;
      const int64_t nrep = s.tile_assignment().num_elements() / Product(rdims);
      const int64_t diff = (int64_t)rdims.size() - target.rank();
      if (diff == 0) rdims.push_back(nrep);
      else rdims.back() *= nrep;
      PSharding ungrouped = PSharding::PartialTile(
          s.tile_assignment().Transpose(perm).Reshape(rdims));
      if (MergeShardingIfCompatible(ungrouped, &result)) {
        start = end;
        found = true;
        break;
      }
    }
    if (!found) ++start;
  }
  return result;
}

}  // namespace

namespace {

PSharding ReshapeUncached(const Shape& source, const Shape& target,
                          const PSharding& s);

}  // namespace

PSharding PropagateShardingThroughReshape(const Shape& source,
                                          const Shape& target,
                                          const PSharding& s) {
  if (!s.IsTiled()) return s;
  thread_local ShardingMemo memo;
  std::vector<int64_t> key = source.dimensions();
  key.push_back(-1);  // separator (dims are >= 0)
  key.insert(key.end(), target.dimensions().begin(), target.dimensions().end());
  return memo.Get(s, key, [&] { return ReshapeUncached(source, target, s); });
}

namespace {

PSharding ReshapeUncached(const Shape& source, const Shape& target,
                          const PSharding& s) {
  if (!s.IsManualSubgroup()) return ReshapeNoManual(source, target, s);
  // Handle each manual group alike: reshape the per-group sharding over local
  // positions, then put the manual dim back.
  const int man = s.SubgroupManualDim();
  const int n = s.tile_assignment().num_dimensions();
  std::vector<int64_t> perm = {man};
  std::vector<int64_t> rest_dims;
  std::vector<SubgroupType> rest_types;
  for (int i = 0; i < n; ++i) {
    if (i == man) continue;
    perm.push_back(i);
    rest_dims.push_back(s.tile_assignment().dims[i]);
    if (i >= s.TiledDataRank())
      rest_types.push_back(s.subgroup_types()[i - s.TiledDataRank()]);
  }
  TileArray moved = s.tile_assignment().Transpose(perm);
  const int64_t m = s.tile_assignment().dims[man];
  const int64_t group_size = moved.num_elements() / m;
  PSharding inner = PSharding::Subgroup(Iota(rest_dims), rest_types);
  PSharding r = ReshapeNoManual(source, target, inner);
  TileArray local;
  std::vector<SubgroupType> types;
  if (r.IsTiled()) {
    local = r.tile_assignment();
    types = r.subgroup_types();
  } else {
    local.dims.assign(target.rank(), 1);
    local.dims.push_back(group_size);
    local.devices = DeviceList::Iota(group_size);
    types = {SubgroupType::kReplicated};
  }
  TileArray out;
  out.dims = local.dims;
  out.dims.push_back(m);
  for (int64_t d : local.devices)
    for (int64_t g = 0; g < m; ++g)
      out.devices.push_back(moved.devices[g * group_size + d]);
  types.push_back(SubgroupType::kManual);
  return PSharding::Subgroup(std::move(out), std::move(types));
}

}  // namespace

PSharding ReverseSharding(const PSharding& s, const std::vector<int64_t>& dims) {
  if (!s.IsTiled() || dims.empty()) return s;
  const TileArray& t = s.tile_assignment();
  TileArray out;
  out.dims = t.dims;
  std::vector<int64_t>& out_devices = out.devices.mut();
  out_devices.resize(t.devices.size());
  const int n = t.num_dimensions();
  std::vector<int64_t> idx(n, 0);
  for (size_t k = 0; k < t.devices.size(); ++k) {
    std::vector<int64_t> src = idx;
    for (int64_t d : dims)
      if (d < n) src[d] = t.dims[d] - 1 - src[d];
    out_devices[k] = t.At(src);
    for (int i = n - 1; i >= 0; --i) {
      if (++idx[i] < t.dims[i]) break;
      idx[i] = 0;
    }
  }
  return WithTypesOf(s, std::move(out));
}

bool IsSubTilingOrEqualSharding(const Shape& shape, const PSharding& sub,
                                const PSharding& s) {
  if (sub.IsManual() || s.IsManual()) return false;
  if (s.IsTileMaximal()) return true;
  if (sub.IsTileMaximal()) return false;
  if (!sub.IsTiled() || !s.IsTiled()) return false;
  if (sub.TiledDataRank() != s.TiledDataRank()) return false;
  const int rank = sub.TiledDataRank();
  if (rank > shape.rank()) return false;
  std::vector<int64_t> sub_base(rank), base(rank);
  for (int i = 0; i < rank; ++i) {
    sub_base[i] = (shape.dimensions(i) + sub.TileDim(i) - 1) / sub.TileDim(i);
    base[i] = (shape.dimensions(i) + s.TileDim(i) - 1) / s.TileDim(i);
    if (sub_base[i] > base[i]) return false;
  }
  auto offsets = [&](const PSharding& sh, const std::vector<int64_t>& b) {
    std::unordered_map<int64_t, std::vector<int64_t>> m;
    const TileArray& t = sh.tile_assignment();
    std::vector<int64_t> idx(t.num_dimensions(), 0);
    for (size_t k = 0; k < t.devices.size(); ++k) {
      auto& v = m[t.devices[k]];
      for (int i = 0; i < rank; ++i) v.push_back(b[i] * idx[i]);
      for (int i = t.num_dimensions() - 1; i >= 0; --i) {
        if (++idx[i] < t.dims[i]) break;
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
    for (int j = 0; j < rank; ++j) {
      if (sv[j] < v[j]) return false;
      const bool last = sv[j] + sub_base[j] >= shape.dimensions(j);
      if (!last && sv[j] + sub_base[j] > v[j] + base[j]) return false;
    }
  }
  return true;
}

PSharding FindCommonSharding(const std::vector<PSharding>& shardings,
                             std::optional<PSharding> default_sharding) {
  MS_CHECK(!shardings.empty());
  PSharding common = shardings[0];
  for (size_t i = 1; i < shardings.size(); ++i) {
    if (common != shardings[i] &&
        !MergeShardingIfCompatible(shardings[i], common.NumTiles(), &common))
      return default_sharding ? *default_sharding : shardings[0];
  }
  return common;
}

std::optional<int64_t> GetFirstTargetDimToMoveShardingTiles(
    const Shape& shape, const PSharding& s, int64_t source_dim) {
  if (shape.rank() < 2 || shape.dimensions(source_dim) == 1) return std::nullopt;
  if (!s.IsTiled() || s.TileDim(source_dim) == 1) return std::nullopt;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (d == source_dim) continue;
    if (shape.dimensions(d) % (s.TileDim(source_dim) * s.TileDim(d)) == 0)
      return d;
  }
  return std::nullopt;
}

int64_t LeafCount(const Shape& shape) {
  if (!shape.IsTuple()) return 1;
  int64_t n = 0;
  for (const Shape& e : shape.tuple_shapes()) n += LeafCount(e);
  return n;
}

PSharding GetSubSharding(const PSharding& s, const Shape& shape, int64_t index) {
  if (!s.IsTuple() || !shape.IsTuple()) return s;
  int64_t start = 0;
  for (int64_t i = 0; i < index; ++i) start += LeafCount(shape.tuple_shapes(i));
  const Shape& sub = shape.tuple_shapes(index);
  const auto& el = s.tuple_elements();
  if (start >= (int64_t)el.size()) return PSharding::Replicate();
  if (!sub.IsTuple()) return el[start];
  int64_t n = LeafCount(sub);
  std::vector<PSharding> leaves(el.begin() + start,
                                el.begin() + std::min<int64_t>(el.size(), start + n));
  return PSharding::Tuple(std::move(leaves));
}

PSharding SingleTuple(const Shape& shape, const PSharding& leaf) {
  if (!shape.IsTuple()) return leaf;
  return PSharding::Tuple(std::vector<PSharding>(LeafCount(shape), leaf));
}

PSharding NormalizeToShape(const PSharding& s, const Shape& shape) {
  if (shape.IsTuple() && !s.IsTuple()) return SingleTuple(shape, s);
  if (!shape.IsTuple() && s.IsTuple() && s.tuple_elements().size() == 1)
    return s.tuple_elements()[0];
  return s;
}

}  // namespace meshsplit::propagation
