// Sharding algebra (see sharding_util.h). Most operations are a transpose
// and/or reshape of the tile assignment followed by Sharding::Subgroup, which
// re-normalises; both stay symbolic for iota tile assignments.
#include "sharding/sharding_util.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

#include "sharding/device_axes.h"
#include "support/check.h"

namespace meshsplit::sharding_util {
namespace {

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Rebuilds `like` (metadata kept) from a new tile assignment and types.
Sharding Rebuild(const Sharding& like, TileAssignment tiles,
                 std::vector<SubgroupType> types) {
  Sharding out = Sharding::Subgroup(std::move(tiles), std::move(types));
  out.set_metadata(like.metadata());
  return out;
}

// Symbolic merge of two iota tile assignments over their common device axes
// (device_axes.h): the merged assignment takes each data dim's axes from
// whichever side tiles it (both sides must agree where both tile it, and on
// the manual dim), and every axis left over goes to the replicated dim. An
// axis claimed twice, or a dim whose two index functions differ, leaves
// some merged tile without devices, so the shardings are incompatible.
// kUndecided when the two have no common axes (the caller walks the devices
// instead).
enum class IotaMerge { kUndecided, kIncompatible, kMerged };

IotaMerge MergeIotaTiles(const TileAssignment& mt, int64_t m_manual,
                         const TileAssignment& dt, int64_t d_manual,
                         int64_t rank, const std::vector<int64_t>& out_dims,
                         TileAssignment* out) {
  auto axes = DeviceAxes::Common(mt.num_devices(), {&mt, &dt});
  if (!axes) return IotaMerge::kUndecided;
  auto m_axes = axes->AxesOfDims(mt), d_axes = axes->AxesOfDims(dt);
  if (!m_axes || !d_axes) return IotaMerge::kUndecided;
  const int num_axes = axes->num_axes();
  std::vector<char> used(num_axes, 0);
  std::vector<int64_t> order;  // axes in the merged array's order
  auto claim = [&](const AxisList& list) {
    for (int a : list) {
      if (used[a]) return false;
      used[a] = 1;
      order.push_back(a);
    }
    return true;
  };
  auto pick = [&](int64_t m_dim, int64_t d_dim) -> bool {
    const AxisList& a = (*m_axes)[m_dim];
    const AxisList& b = (*d_axes)[d_dim];
    if (!a.empty() && !b.empty() && a != b) return false;
    return claim(a.empty() ? b : a);
  };
  for (int64_t i = 0; i < rank; ++i)
    if (!pick(i, i)) return IotaMerge::kIncompatible;
  if (m_manual >= 0 && !pick(m_manual, d_manual)) return IotaMerge::kIncompatible;
  for (int a = 0; a < num_axes; ++a)
    if (!used[a]) order.push_back(a);
  std::vector<int64_t> reshape = axes->sizes(), perm = order;
  // The merged dims must be exactly the products of their axes.
  size_t at = 0;
  for (int64_t size : out_dims) {
    int64_t p = 1;
    while (p < size && at < order.size()) p *= reshape[order[at++]];
    if (p != size) return IotaMerge::kUndecided;
  }
  if (at != order.size()) return IotaMerge::kUndecided;
  if (num_axes == 0) {
    reshape = {1};
    perm = {0};
  }
  *out = TileAssignment::Iota(out_dims, std::move(reshape), std::move(perm));
  return IotaMerge::kMerged;
}

}  // namespace

Sharding KeepTilesOnDim(const Sharding& s, int64_t dim, int64_t keep) {
  const TileAssignment& ta = s.tile_assignment();
  const int64_t t = ta.dim(dim);
  if (keep == t) return s;
  std::vector<int64_t> split = ta.dims();
  split[dim] = keep;
  split.insert(split.begin() + dim + 1, t / keep);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < static_cast<int64_t>(split.size()); ++i)
    if (i != dim + 1) perm.push_back(i);
  perm.push_back(dim + 1);
  std::vector<int64_t> out_dims = ta.dims();
  out_dims[dim] = keep;
  out_dims.push_back(t / keep);
  std::vector<SubgroupType> types = s.subgroup_types();
  types.push_back(SubgroupType::kReplicated);
  return Rebuild(s, ta.Reshape(split).Transpose(perm).Reshape(out_dims),
                 std::move(types));
}

std::vector<int64_t> TileDims(const Sharding& s, int64_t rank) {
  if (!s.IsTiled()) return std::vector<int64_t>(rank, 1);
  std::vector<int64_t> out(s.TiledDataRank());
  for (int64_t i = 0; i < s.TiledDataRank(); ++i) out[i] = s.TileDim(i);
  return out;
}

Sharding TransposeSharding(const Sharding& s,
                           const std::vector<int64_t>& dims) {
  if (!s.IsTiled()) return s;
  const int64_t rank = s.TiledDataRank();
  MS_CHECK(static_cast<int64_t>(dims.size()) == rank);
  std::vector<int64_t> perm = dims;
  for (int64_t i = rank; i < s.tile_assignment().num_dimensions(); ++i)
    perm.push_back(i);
  return Rebuild(s, s.tile_assignment().Transpose(perm), s.subgroup_types());
}

Sharding ReverseSharding(const Sharding& s, const std::vector<int64_t>& dims) {
  if (!s.IsTiled()) return s;
  const TileAssignment& ta = s.tile_assignment();
  bool any = false;
  for (int64_t d : dims) any |= ta.dim(d) > 1;
  if (!any) return s;
  std::vector<int64_t> src = ta.Devices(), out(src.size());
  const std::vector<int64_t>& shape = ta.dims();
  std::vector<bool> flip(shape.size(), false);
  for (int64_t d : dims) flip[d] = true;
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t flat = 0; flat < src.size(); ++flat) {
    int64_t from = 0;
    for (size_t i = 0; i < shape.size(); ++i)
      from = from * shape[i] + (flip[i] ? shape[i] - 1 - idx[i] : idx[i]);
    out[flat] = src[from];
    for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  return Rebuild(s, TileAssignment::FromDevices(shape, std::move(out)),
                 s.subgroup_types());
}

std::optional<Sharding> ReshapeSharding(const std::vector<int64_t>& from,
                                        const std::vector<int64_t>& to,
                                        const Sharding& s) {
  if (!s.IsTiled()) return s;
  const int64_t rank = s.TiledDataRank();
  MS_CHECK(static_cast<int64_t>(from.size()) == rank);
  MS_CHECK(Product(from) == Product(to));
  // Tiles on a size-1 dim hold copies (all but one tile are empty padding);
  // like XLA, treat them as replication.
  std::vector<int64_t> trivially_tiled;
  for (int64_t i = 0; i < rank; ++i)
    if (from[i] == 1 && s.TileDim(i) > 1) trivially_tiled.push_back(i);
  if (!trivially_tiled.empty())
    return ReshapeSharding(
        from, to, PartiallyReplicateTiledShardingOnDims(s, trivially_tiled));
  // Each source dim becomes a tiled factor (its tile count, major) and an
  // untiled factor (the tile size). A target dim may take tiled factors only
  // before any untiled one, else its tiles would not be contiguous. An
  // unevenly tiled dim is an atom that must be a target dim by itself.
  struct Atom {
    int64_t size;
    bool tiled;
    bool uneven;
    int64_t tiles;  // uneven atoms only
  };
  std::vector<Atom> atoms;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t n = from[i], t = s.TileDim(i);
    if (t == 1) {
      atoms.push_back({n, false, false, 1});
    } else if (n % t == 0) {
      atoms.push_back({t, true, false, t});
      atoms.push_back({n / t, false, false, 1});
    } else {
      atoms.push_back({n, false, true, t});
    }
  }
  // Adjacent factors of the same kind act as one: merging two untiled (or
  // two tiled) factors does not change which elements a tile holds, and it
  // lets a target dim cut the product where neither factor divides.
  std::vector<Atom> merged;
  for (const Atom& atom : atoms) {
    if (atom.size == 1 && !atom.uneven) continue;
    if (!merged.empty() && !atom.uneven && !merged.back().uneven &&
        merged.back().tiled == atom.tiled) {
      merged.back().size *= atom.size;
      merged.back().tiles *= atom.tiles;
    } else {
      merged.push_back(atom);
    }
  }
  atoms = std::move(merged);
  std::vector<int64_t> out(to.size(), 1);
  size_t a = 0;
  for (size_t j = 0; j < to.size(); ++j) {
    int64_t rem = to[j];
    bool seen_untiled = false;
    while (rem > 1) {
      while (a < atoms.size() && atoms[a].size == 1) ++a;
      if (a == atoms.size()) return std::nullopt;
      Atom& atom = atoms[a];
      if (atom.uneven) {
        if (rem != atom.size || seen_untiled || out[j] != 1)
          return std::nullopt;
        out[j] = atom.tiles;
        atom.size = 1;
        rem = 1;
        break;
      }
      int64_t take;
      if (rem % atom.size == 0) {
        take = atom.size;
      } else if (atom.size % rem == 0) {
        take = rem;
      } else {
        return std::nullopt;
      }
      if (atom.tiled) {
        if (seen_untiled) return std::nullopt;
        out[j] *= take;
      } else {
        seen_untiled = true;
      }
      atom.size /= take;
      rem /= take;
    }
  }
  for (; a < atoms.size(); ++a)
    if (atoms[a].size != 1) return std::nullopt;
  if (Product(out) != s.NumTiles()) return std::nullopt;
  std::vector<int64_t> new_dims = out;
  for (int64_t i = rank; i < s.tile_assignment().num_dimensions(); ++i)
    new_dims.push_back(s.tile_assignment().dim(i));
  return Rebuild(s, s.tile_assignment().Reshape(new_dims), s.subgroup_types());
}

Sharding ReshapeShardingBestEffort(const std::vector<int64_t>& from,
                                   const std::vector<int64_t>& to,
                                   const Sharding& s) {
  if (auto exact = ReshapeSharding(from, to, s)) return *exact;
  // Keep the most tiles dim by dim, major first: for dim i, the largest
  // divisor of its tile count that still reshapes exactly when every later
  // dim is replicated. Divisor 1 always works once the earlier dims do.
  Sharding current = s;
  const int64_t rank = s.TiledDataRank();
  for (int64_t i = 0; i < rank; ++i) {
    if (!current.IsTiled()) break;
    const int64_t t = current.TileDim(i);
    if (t == 1) continue;
    std::vector<int64_t> later;
    for (int64_t k = i + 1; k < rank; ++k) later.push_back(k);
    std::optional<Sharding> chosen;
    for (int64_t keep = t; keep >= 1 && !chosen; --keep) {
      if (t % keep != 0) continue;
      Sharding trial = KeepTilesOnDim(current, i, keep);
      Sharding probe = PartiallyReplicateTiledShardingOnDims(trial, later);
      if (ReshapeSharding(from, to, probe)) chosen = trial;
    }
    if (!chosen) chosen = KeepTilesOnDim(current, i, 1);
    current = *chosen;
  }
  if (auto result = ReshapeSharding(from, to, current)) return *result;
  return ReplicateAllDataDims(s, static_cast<int64_t>(to.size()));
}

Sharding PartiallyReplicateTiledShardingOnDims(
    const Sharding& s, const std::vector<int64_t>& dims) {
  if (!s.IsTiled()) return s;
  const TileAssignment& ta = s.tile_assignment();
  const int64_t rank = s.TiledDataRank();
  std::vector<bool> rep(rank, false);
  int64_t rep_size = 1;
  for (int64_t d : dims) {
    MS_CHECK(d >= 0 && d < rank);
    if (!rep[d]) rep_size *= ta.dim(d);
    rep[d] = true;
  }
  if (rep_size == 1) return s;
  // Move the replicated dims after the subgroups; at their old places they
  // become size 1, which does not change the row-major order.
  std::vector<int64_t> perm, out_dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (!rep[d]) perm.push_back(d);
    out_dims.push_back(rep[d] ? 1 : ta.dim(d));
  }
  for (int64_t d = rank; d < ta.num_dimensions(); ++d) {
    perm.push_back(d);
    out_dims.push_back(ta.dim(d));
  }
  for (int64_t d = 0; d < rank; ++d)
    if (rep[d]) perm.push_back(d);
  out_dims.push_back(rep_size);
  std::vector<SubgroupType> types = s.subgroup_types();
  types.push_back(SubgroupType::kReplicated);
  return Rebuild(s, ta.Transpose(perm).Reshape(out_dims), std::move(types));
}

Sharding PartiallyReplicateTiledShardingOnAllDimsExcept(
    const Sharding& s, const std::vector<int64_t>& dims_to_keep) {
  if (!s.IsTiled()) return s;
  std::vector<int64_t> others;
  for (int64_t d = 0; d < s.TiledDataRank(); ++d)
    if (std::find(dims_to_keep.begin(), dims_to_keep.end(), d) ==
        dims_to_keep.end())
      others.push_back(d);
  return PartiallyReplicateTiledShardingOnDims(s, others);
}

Sharding ReplicateAllDataDims(const Sharding& s, int64_t data_rank) {
  if (!s.IsTiled()) {
    if (s.IsManual() || s.IsUnknown()) return s;
    Sharding r = Sharding::Replicate();
    r.set_metadata(s.metadata());
    return s.IsTuple() ? s : r;
  }
  if (!s.HasManualSubgroup() && s.SubgroupDim(SubgroupType::kUnreduced) < 0) {
    Sharding r = Sharding::Replicate();
    r.set_metadata(s.metadata());
    return r;
  }
  Sharding result = PartiallyReplicateTiledShardingOnAllDimsExcept(s, {});
  if (result.IsTiled() && data_rank >= 0 && data_rank != result.TiledDataRank()) {
    std::vector<int64_t> dims(data_rank, 1);
    const TileAssignment& ta = result.tile_assignment();
    for (int64_t d = result.TiledDataRank(); d < ta.num_dimensions(); ++d)
      dims.push_back(ta.dim(d));
    result = Rebuild(result, ta.Reshape(dims), result.subgroup_types());
  }
  return result;
}

Sharding RemoveShapeDimensions(const Sharding& s,
                               const std::vector<int64_t>& dims_to_remove) {
  if (!s.IsTiled() || dims_to_remove.empty()) return s;
  Sharding r = PartiallyReplicateTiledShardingOnDims(s, dims_to_remove);
  if (!r.IsTiled()) return r;
  std::vector<int64_t> dims;
  const TileAssignment& ta = r.tile_assignment();
  for (int64_t d = 0; d < ta.num_dimensions(); ++d) {
    bool removed = d < r.TiledDataRank() &&
                   std::find(dims_to_remove.begin(), dims_to_remove.end(), d) !=
                       dims_to_remove.end();
    if (!removed) dims.push_back(ta.dim(d));
  }
  return Rebuild(r, ta.Reshape(dims), r.subgroup_types());
}

Sharding InsertShapeDimensions(const Sharding& s, int64_t index,
                               int64_t num_dims) {
  if (!s.IsTiled() || num_dims == 0) return s;
  MS_CHECK(index >= 0 && index <= s.TiledDataRank());
  std::vector<int64_t> dims = s.tile_assignment().dims();
  dims.insert(dims.begin() + index, num_dims, 1);
  return Rebuild(s, s.tile_assignment().Reshape(dims), s.subgroup_types());
}

Sharding ProjectSharding(const Sharding& s, const std::vector<int64_t>& dst_to_src,
                         SubgroupType dropped_type) {
  if (!s.IsTiled()) return s;
  const TileAssignment& ta = s.tile_assignment();
  const int64_t rank = s.TiledDataRank();
  // Mapped source dims in result order, then the dropped ones (as subgroups
  // of `dropped_type`), then the source's own subgroups.
  std::vector<bool> used(rank, false);
  std::vector<int64_t> perm, dims;
  std::vector<SubgroupType> types;
  for (int64_t d : dst_to_src) {
    if (d >= 0) {
      MS_CHECK(d < rank && !used[d]);
      used[d] = true;
      perm.push_back(d);
      dims.push_back(ta.dim(d));
    } else {
      dims.push_back(1);
    }
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (used[i]) continue;
    perm.push_back(i);
    dims.push_back(ta.dim(i));
    types.push_back(dropped_type);
  }
  for (size_t k = 0; k < s.subgroup_types().size(); ++k) {
    perm.push_back(rank + k);
    dims.push_back(ta.dim(rank + k));
    types.push_back(s.subgroup_types()[k]);
  }
  return Rebuild(s, ta.Transpose(perm).Reshape(dims), std::move(types));
}

Sharding PropagateShardingAlongDimsAndReplicateOthers(
    const Sharding& s, const std::vector<int64_t>& source_dims,
    const std::vector<int64_t>& target_dims, int64_t target_rank) {
  MS_CHECK(source_dims.size() == target_dims.size());
  if (!s.IsTiled()) return s;
  std::vector<int64_t> dst_to_src(target_rank, -1);
  for (size_t k = 0; k < source_dims.size(); ++k) {
    MS_CHECK(dst_to_src[target_dims[k]] < 0);
    dst_to_src[target_dims[k]] = source_dims[k];
  }
  return ProjectSharding(s, dst_to_src, SubgroupType::kReplicated);
}

Sharding MoveAndMergeShardingTiles(const Sharding& s, int64_t source_dim,
                                   int64_t target_dim) {
  if (!s.IsTiled()) return s;
  const TileAssignment& ta = s.tile_assignment();
  MS_CHECK(source_dim != target_dim && source_dim < s.TiledDataRank() &&
           target_dim < s.TiledDataRank());
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < ta.num_dimensions(); ++d) {
    if (d == source_dim) continue;
    perm.push_back(d);
    if (d == target_dim) perm.push_back(source_dim);
  }
  std::vector<int64_t> dims = ta.dims();
  dims[target_dim] *= dims[source_dim];
  dims[source_dim] = 1;
  return Rebuild(s, ta.Transpose(perm).Reshape(dims), s.subgroup_types());
}

namespace {

bool IsManualLeaf(const Sharding& s) { return s.kind() == Sharding::Kind::kManual; }
bool IsTileMaximalLeaf(const Sharding& s) {
  return s.kind() == Sharding::Kind::kReplicated || s.kind() == Sharding::Kind::kMaximal;
}

bool IsLeafMoreSpecific(const Sharding& lhs, const Sharding& rhs) {
  if (IsManualLeaf(lhs) && IsTileMaximalLeaf(rhs)) return true;
  if (IsManualLeaf(lhs) || IsManualLeaf(rhs)) return false;
  if (rhs.IsTiled()) return lhs.NumTiles() > rhs.NumTiles();
  if (rhs.kind() == Sharding::Kind::kReplicated) return lhs.kind() != Sharding::Kind::kReplicated;
  return !IsTileMaximalLeaf(lhs) && lhs.kind() != Sharding::Kind::kUnknown;
}

}  // namespace

bool IsShardingMoreSpecific(const Sharding& lhs, const Sharding& rhs) {
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

bool MergeShardingIfCompatible(const Sharding& to_merge, Sharding* dst) {
  return MergeShardingIfCompatible(to_merge, dst->NumTiles() + 1, dst);
}

bool MergeShardingIfCompatible(const Sharding& to_merge, int64_t minimum_tiles,
                               Sharding* dst) {
  if (to_merge.IsTuple() || dst->IsTuple() || to_merge.IsManual() || dst->IsManual())
    return false;
  if (!to_merge.IsTiled()) return false;
  if (!dst->IsTiled()) {
    // Replicated or unknown take the tiling; a maximal placement does not.
    if (dst->IsMaximal()) return false;
    *dst = to_merge;
    return true;
  }
  if (!dst->HasPartialReplication()) return false;
  if (!MergePartialTilings(to_merge, minimum_tiles, dst)) return false;
  dst->set_metadata(std::string());
  return true;
}

bool MergePartialTilings(const Sharding& to_merge, int64_t minimum_tiles,
                               Sharding* dst) {
  if (to_merge.IsTuple() || dst->IsTuple()) return false;
  if (!to_merge.IsTiled()) return false;
  if (dst->IsTileMaximal()) {
    *dst = to_merge;
    return true;
  }
  if (!dst->IsTiled() || !dst->HasPartialReplication()) return false;
  if (to_merge.TiledDataRank() != dst->TiledDataRank()) return false;
  if (to_merge.SubgroupDim(SubgroupType::kUnreduced) >= 0 ||
      dst->SubgroupDim(SubgroupType::kUnreduced) >= 0)
    return false;
  const TileAssignment& mt = to_merge.tile_assignment();
  const TileAssignment& dt = dst->tile_assignment();
  const int64_t num_devices = mt.num_devices();
  if (dt.num_devices() != num_devices) return false;
  const int64_t rank = to_merge.TiledDataRank();
  std::vector<int64_t> merged;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t a = dt.dim(i), b = mt.dim(i);
    if (a == 1 || a == b) {
      merged.push_back(b);
    } else if (b == 1) {
      merged.push_back(a);
    } else {
      return false;
    }
  }
  const int64_t num_tiles = Product(merged);
  if (num_devices % num_tiles != 0 || num_tiles < minimum_tiles) return false;
  const int64_t m_manual = to_merge.SubgroupDim(SubgroupType::kManual);
  const int64_t d_manual = dst->SubgroupDim(SubgroupType::kManual);
  if ((m_manual >= 0) != (d_manual >= 0)) return false;
  int64_t manual_size = 1;
  if (m_manual >= 0) {
    manual_size = mt.dim(m_manual);
    if (manual_size != dt.dim(d_manual)) return false;
  }
  if (num_devices % (num_tiles * manual_size) != 0) return false;
  const int64_t replication = num_devices / (num_tiles * manual_size);

  // Iota tile assignments merge symbolically (no device walk).
  if (mt.is_iota() && dt.is_iota()) {
    std::vector<int64_t> out_dims = merged;
    if (m_manual >= 0) out_dims.push_back(manual_size);
    out_dims.push_back(replication);
    TileAssignment out;
    switch (MergeIotaTiles(mt, m_manual, dt, d_manual, rank, out_dims, &out)) {
      case IotaMerge::kIncompatible:
        return false;
      case IotaMerge::kMerged: {
        std::vector<SubgroupType> types;
        if (m_manual >= 0) types.push_back(SubgroupType::kManual);
        types.push_back(SubgroupType::kReplicated);
        Sharding result = Sharding::Subgroup(std::move(out), std::move(types));
        result.set_metadata(dst->metadata());
        *dst = std::move(result);
        return true;
      }
      case IotaMerge::kUndecided:
        break;
    }
  }

  // Key of a device in one sharding: its data tile index (dims where the
  // merged tiling is cut, projected onto that sharding) and manual index,
  // flattened in the merged space.
  auto key = [&](const std::vector<int64_t>& index, const TileAssignment& ta,
                 int64_t manual_dim) {
    int64_t k = 0;
    for (int64_t i = 0; i < rank; ++i)
      k = k * merged[i] + (ta.dim(i) == 1 ? 0 : index[i]);
    if (manual_dim >= 0) k = k * manual_size + index[manual_dim];
    return k;
  };
  // For each device, the pair of keys; the merged tile with index (data,
  // manual) takes the devices whose to_merge key and dst key both match it.
  std::unordered_map<int64_t, int64_t> dst_key;
  {
    std::vector<int64_t> devs = dt.Devices();
    std::vector<int64_t> idx(dt.num_dimensions(), 0);
    for (int64_t dev : devs) {
      dst_key[dev] = key(idx, dt, d_manual);
      for (int64_t i = dt.num_dimensions() - 1; i >= 0; --i) {
        if (++idx[i] < dt.dim(i)) break;
        idx[i] = 0;
      }
    }
  }
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> cells;
  {
    std::vector<int64_t> devs = mt.Devices();
    std::vector<int64_t> idx(mt.num_dimensions(), 0);
    for (int64_t dev : devs) {
      auto it = dst_key.find(dev);
      if (it == dst_key.end()) return false;
      cells[{key(idx, mt, m_manual), it->second}].push_back(dev);
      for (int64_t i = mt.num_dimensions() - 1; i >= 0; --i) {
        if (++idx[i] < mt.dim(i)) break;
        idx[i] = 0;
      }
    }
  }
  // Walk the merged tiles; project the merged index on each sharding.
  std::vector<int64_t> out_dims = merged;
  if (m_manual >= 0) out_dims.push_back(manual_size);
  out_dims.push_back(replication);
  std::vector<int64_t> devices;
  devices.reserve(num_devices);
  std::vector<int64_t> idx(out_dims.size() - 1, 0);
  const int64_t cells_count = num_devices / replication;
  for (int64_t c = 0; c < cells_count; ++c) {
    int64_t km = 0, kd = 0;
    for (int64_t i = 0; i < rank; ++i) {
      km = km * merged[i] + (mt.dim(i) == 1 ? 0 : idx[i]);
      kd = kd * merged[i] + (dt.dim(i) == 1 ? 0 : idx[i]);
    }
    if (m_manual >= 0) {
      km = km * manual_size + idx[rank];
      kd = kd * manual_size + idx[rank];
    }
    auto it = cells.find({km, kd});
    if (it == cells.end() ||
        static_cast<int64_t>(it->second.size()) != replication)
      return false;
    devices.insert(devices.end(), it->second.begin(), it->second.end());
    for (int64_t i = static_cast<int64_t>(idx.size()) - 1; i >= 0; --i) {
      if (++idx[i] < out_dims[i]) break;
      idx[i] = 0;
    }
  }
  std::vector<SubgroupType> types;
  if (m_manual >= 0) types.push_back(SubgroupType::kManual);
  types.push_back(SubgroupType::kReplicated);
  Sharding result = Sharding::Subgroup(
      TileAssignment::FromDevices(out_dims, std::move(devices)), types);
  result.set_metadata(dst->metadata());
  *dst = std::move(result);
  return true;
}

bool MergeSharding(const Sharding& to_merge, Sharding* dst, bool may_combine_partial_sharding) {
  if (to_merge.IsTuple()) {
    if (!dst->IsTuple() || dst->tuple_elements().size() != to_merge.tuple_elements().size())
      return false;
    bool changed = false;
    for (size_t i = 0; i < to_merge.tuple_elements().size(); ++i)
      changed |= MergeSharding(to_merge.tuple_elements()[i], &dst->mutable_tuple_elements()[i],
                               may_combine_partial_sharding);
    return changed;
  }
  if (dst->IsTuple()) return false;
  // Equal shardings never combine into more tiles, and neither is more
  // specific: the common case at a fixed point, answered without the merge.
  if (to_merge == *dst) return false;
  if (may_combine_partial_sharding && to_merge.HasPartialReplication() &&
      dst->HasPartialReplication() &&
      to_merge.tile_assignment().num_devices() == dst->tile_assignment().num_devices() &&
      MergeShardingIfCompatible(to_merge, std::max(to_merge.NumTiles(), dst->NumTiles()) + 1,
                                dst))
    return true;
  return IsLeafMoreSpecific(*dst, to_merge);
}

bool IsSubTilingOrEqualSharding(const std::vector<int64_t>& dims,
                                const Sharding& sub, const Sharding& s) {
  if (sub.IsManual() || s.IsManual()) return false;
  if (s.IsTileMaximal()) return true;
  if (sub.IsTileMaximal()) return false;
  if (!sub.IsTiled() || !s.IsTiled()) return false;
  if (sub.TiledDataRank() != s.TiledDataRank()) return false;
  std::vector<int64_t> sub_tile = sub.TileShape(dims), tile = s.TileShape(dims);
  for (size_t i = 0; i < dims.size(); ++i)
    if (sub_tile[i] > tile[i]) return false;
  for (int64_t dev : sub.tile_assignment().Devices()) {
    if (!s.UsesDevice(dev)) return false;
    std::vector<int64_t> so = sub.TileOffsetForDevice(dims, dev);
    std::vector<int64_t> sl = sub.TileLimitForDevice(dims, dev);
    std::vector<int64_t> o = s.TileOffsetForDevice(dims, dev);
    std::vector<int64_t> l = s.TileLimitForDevice(dims, dev);
    for (size_t i = 0; i < dims.size(); ++i)
      if (so[i] < o[i] || (sl[i] > l[i] && so[i] < sl[i])) return false;
  }
  return true;
}

}  // namespace meshsplit::sharding_util
