// XLA's reshape rules for sharding propagation (hlo_sharding_util's
// ReshapeSharding and PropagateShardingThroughReshape), declared in
// sharding_util.h. They differ from sharding_util::ReshapeSharding in which
// partial results they accept, and sharding propagation must match XLA
// exactly. Tile assignments are only reshaped and transposed, so iota forms
// stay symbolic.
#include <algorithm>
#include <numeric>

#include "sharding/sharding_util.h"
#include "support/check.h"

namespace meshsplit::sharding_util {
namespace {

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Merges `ungrouped` into `*result` (replicated takes it; two partial
// shardings combine when their groups agree).
bool MergeInto(const Sharding& ungrouped, Sharding* result) {
  return MergePartialTilings(ungrouped, result->NumTiles() + 1, result);
}

// Best-effort reshape of a sharding without manual subgroups: greedily the
// longest run of source dims, from the major end, whose tiling reshapes
// exactly; the tilings found are merged.
Sharding ReshapeNoManual(const std::vector<int64_t>& from,
                         const std::vector<int64_t>& to, const Sharding& s) {
  Sharding result = Sharding::Replicate();
  const TileAssignment& ta = s.tile_assignment();
  const int64_t src_rank = static_cast<int64_t>(from.size());
  int64_t start = 0;
  while (start < src_rank) {
    bool found = false;
    for (int64_t end = src_rank; end > start; --end) {
      std::vector<int64_t> grouped(src_rank, 1);
      for (int64_t i = start; i < end; ++i) grouped[i] = ta.dim(i);
      Sharding g = Sharding::Tile(TileAssignment::Iota(grouped));
      auto reshaped = ReshapeShardingXla(from, to, g);
      if (!reshaped || !reshaped->IsTiled()) continue;
      std::vector<int64_t> perm;
      for (int64_t i = start; i < end; ++i) perm.push_back(i);
      for (int64_t i = 0; i < start; ++i) perm.push_back(i);
      for (int64_t i = end; i < ta.num_dimensions(); ++i) perm.push_back(i);
      std::vector<int64_t> rdims = reshaped->tile_assignment().dims();
      const int64_t nrep = ta.num_devices() / Product(rdims);
      if (rdims.size() == to.size()) {
        rdims.push_back(nrep);
      } else {
        rdims.back() *= nrep;
      }
      Sharding ungrouped =
          Sharding::PartialTile(ta.Transpose(perm).Reshape(rdims));
      if (MergeInto(ungrouped, &result)) {
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

std::optional<Sharding> ReshapeShardingXla(const std::vector<int64_t>& from,
                                           const std::vector<int64_t>& to,
                                           const Sharding& s) {
  if (!s.IsTiled()) return s;
  const TileAssignment& ta = s.tile_assignment();
  const int64_t src_rank = static_cast<int64_t>(from.size());
  std::vector<int64_t> tgt_tiles;
  std::vector<int64_t> src_stack(from.rbegin(), from.rend());
  std::vector<int64_t> tgt_stack(to.rbegin(), to.rend());
  std::vector<int64_t> tile_stack(ta.dims().begin(),
                                  ta.dims().begin() + src_rank);
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
    if (inplace) {
      tgt_tiles.back() *= size;
    } else {
      tgt_tiles.push_back(size);
    }
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
    const int64_t s_size = src_stack.back();
    const int64_t s_parts = tile_stack.back();
    pop_src();
    const int64_t t_size = tgt_stack.back();
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
      const int64_t g = std::gcd(s_parts, t_size);
      if (g == 1) break;
      push_src(s_size / g, s_parts / g);
      tgt_stack.push_back(t_size / g);
      append(g);
      inplace = true;
    }
  }
  if (Product(tgt_tiles) == 1) return std::nullopt;
  while (tgt_tiles.size() < to.size()) tgt_tiles.push_back(1);
  Sharding sh = s;
  if (!dims_to_replicate.empty()) {
    std::vector<int64_t> valid;
    for (int64_t d : dims_to_replicate)
      if (d >= 0 && d < s.TiledDataRank() &&
          std::find(valid.begin(), valid.end(), d) == valid.end())
        valid.push_back(d);
    sh = PartiallyReplicateTiledShardingOnDims(s, valid);
  }
  if (!sh.IsTiled()) return std::nullopt;
  std::vector<SubgroupType> types = sh.subgroup_types();
  const int64_t rep_dim = sh.SubgroupDim(SubgroupType::kReplicated);
  const TileAssignment& sta = sh.tile_assignment();
  for (int64_t i = sh.TiledDataRank(); i < sta.num_dimensions(); ++i)
    tgt_tiles.push_back(i == rep_dim ? 1 : sta.dim(i));
  const int64_t total = sta.num_devices();
  if (total % Product(tgt_tiles) != 0) return std::nullopt;
  const int64_t rep = total / Product(tgt_tiles);
  if (rep > 1) {
    if (rep_dim >= 0) {
      tgt_tiles[rep_dim - sh.TiledDataRank() + to.size()] = rep;
    } else {
      tgt_tiles.push_back(rep);
      types.push_back(SubgroupType::kReplicated);
    }
  }
  return Sharding::Subgroup(sta.Reshape(tgt_tiles), std::move(types));
}

Sharding PropagateShardingThroughReshape(const std::vector<int64_t>& from,
                                         const std::vector<int64_t>& to,
                                         const Sharding& s) {
  if (!s.IsTiled()) return s;
  if (!s.HasManualSubgroup()) return ReshapeNoManual(from, to, s);
  // Every manual group is reshaped alike: reshape the per-group sharding
  // (over positions inside a group), then put the manual dim back.
  const TileAssignment& ta = s.tile_assignment();
  const int64_t man = s.SubgroupDim(SubgroupType::kManual);
  const int64_t n = ta.num_dimensions();
  std::vector<int64_t> perm = {man};
  std::vector<int64_t> rest_dims;
  std::vector<SubgroupType> rest_types;
  for (int64_t i = 0; i < n; ++i) {
    if (i == man) continue;
    perm.push_back(i);
    rest_dims.push_back(ta.dim(i));
    if (i >= s.TiledDataRank())
      rest_types.push_back(s.subgroup_types()[i - s.TiledDataRank()]);
  }
  const int64_t m = ta.dim(man);
  const int64_t group_size = ta.num_devices() / m;
  // moved[g][x]: device at position x of manual group g.
  const TileAssignment moved = ta.Transpose(perm).Reshape({m, group_size});
  const Sharding inner =
      Sharding::Subgroup(TileAssignment::Iota(rest_dims), rest_types);
  const Sharding r = inner.IsTiled() ? ReshapeNoManual(from, to, inner)
                                     : Sharding::Replicate();
  TileAssignment local;  // positions inside a group
  std::vector<SubgroupType> types;
  if (r.IsTiled()) {
    local = r.tile_assignment();
    types = r.subgroup_types();
  } else {
    std::vector<int64_t> dims(to.size(), 1);
    dims.push_back(group_size);
    local = TileAssignment::Iota(dims);
    types = {SubgroupType::kReplicated};
  }
  // out[i..., g] = moved[g][local[i...]]. With local an iota (iota(G)
  // reshaped to R, transposed by P), that is moved transposed to [G, m],
  // reshaped to R + [m] and transposed by P + [last]: no device walk.
  std::vector<int64_t> out_dims = local.dims();
  out_dims.push_back(m);
  TileAssignment out;
  if (local.is_iota()) {
    std::vector<int64_t> rdims = local.reshape_dims();
    std::vector<int64_t> p = local.transpose_perm();
    rdims.push_back(m);
    p.push_back(static_cast<int64_t>(p.size()));
    out = moved.Transpose({1, 0}).Reshape(rdims).Transpose(p).Reshape(out_dims);
  } else {
    const std::vector<int64_t> positions = local.Devices();
    const std::vector<int64_t> ids = moved.Devices();
    std::vector<int64_t> devices;
    devices.reserve(ids.size());
    for (int64_t x : positions)
      for (int64_t g = 0; g < m; ++g)
        devices.push_back(ids[g * group_size + x]);
    out = TileAssignment::FromDevices(out_dims, std::move(devices));
  }
  types.push_back(SubgroupType::kManual);
  return Sharding::Subgroup(std::move(out), std::move(types));
}

}  // namespace meshsplit::sharding_util
