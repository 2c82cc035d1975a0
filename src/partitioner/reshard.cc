// Reshard: the choice among local slicing, all-gather, all-to-all,
// collective-permute and all-reduce / reduce-scatter, each written so that
// uneven (padded) dims come out right. See reshard.h.
#include "partitioner/reshard.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>

#include "cost/cost_model.h"
#include "ir/shape_inference_async.h"

#include "partitioner/reshard_axes.h"
#include "partitioner/sharding_helpers.h"
#include "support/check.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {
namespace {

// Every partition in one group.
DeviceGroups AllDevices(int64_t n) {
  return DeviceGroups{TileAssignment::Iota({1, n})};
}

Computation* SumReducer(SpmdBuilder& b, PrimitiveType t) {
  return b.Reducer(t == PrimitiveType::PRED ? Opcode::kOr : Opcode::kAdd, t);
}

// Local dynamic-slice: `v` holds dims `dims` whole; every other dim is
// already tiled as in `target`.
PartitionedValue SliceToTarget(SpmdBuilder& b, const PartitionedValue& v,
                               const Sharding& target,
                               const std::vector<int64_t>& dims) {
  if (dims.empty()) return {v.hlo, v.shape, target};
  const std::vector<int64_t>& global = v.shape.dimensions();
  std::vector<int64_t> high(global.size(), 0);
  std::vector<Instruction*> starts;
  Instruction* zero = nullptr;
  for (size_t i = 0; i < global.size(); ++i) {
    if (Contains(dims, i)) {
      const int64_t k = target.TileDim(i);
      high[i] = CeilDiv(global[i], k) * k - global[i];
      starts.push_back(TileOffset(b, target, global, i));
    } else {
      if (zero == nullptr) zero = b.ScalarS32(0);
      starts.push_back(zero);
    }
  }
  Instruction* x = b.PadHigh(v.hlo, high);
  Instruction* s = b.DynamicSlice(x, starts, target.TileShape(global));
  return {s, v.shape, target};
}

// All-gathers the tiled dims `dims` of `v` (tiled as `v.sharding`) and
// slices the padding off; the result is tiled as `result`.
PartitionedValue GatherDims(SpmdBuilder& b, const PartitionedValue& v,
                            const std::vector<int64_t>& dims, const Sharding& result) {
  Instruction* x = v.hlo;
  for (int64_t d : dims) x = b.AllGather(x, d, v.sharding.GroupsAlongDims({d}));
  std::vector<int64_t> starts(v.shape.rank(), 0);
  std::vector<int64_t> limits = x->shape().dimensions();
  for (int64_t d : dims) limits[d] = v.shape.dimensions(d);
  x = b.Slice(x, starts, limits);
  return {x, v.shape, result};
}

// `v` is tiled k ways on dim `a` (and not on `b_dim`); the target tiles
// `b_dim` k ways with the same devices in the same order, and not `a`.
PartitionedValue AllToAllPath(SpmdBuilder& b, const PartitionedValue& v, int64_t a,
                              int64_t b_dim, const Sharding& target) {
  const int64_t k = v.sharding.TileDim(a);
  const int64_t nb = v.shape.dimensions(b_dim);
  const int64_t tb = CeilDiv(nb, k);
  std::vector<int64_t> high(v.shape.rank(), 0);
  high[b_dim] = tb * k - nb;
  Instruction* x = b.PadHigh(v.hlo, high);
  // Split b into [k, tb] and bring the k pieces to the front.
  std::vector<int64_t> dims = x->shape().dimensions();
  std::vector<int64_t> split;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i == b_dim) {
      split.push_back(k);
      split.push_back(tb);
    } else {
      split.push_back(dims[i]);
    }
  }
  x = b.Reshape(x, split);
  const int64_t piece_dim = b_dim;  // index of k in `split`
  std::vector<int64_t> to_front = {piece_dim};
  for (int64_t i = 0; i < static_cast<int64_t>(split.size()); ++i)
    if (i != piece_dim) to_front.push_back(i);
  x = b.Transpose(x, to_front);
  x = b.AllToAll(x, 0, v.sharding.GroupsAlongDims({a}));
  // Now dim 0 is the source tile index along `a`: move it just before `a`
  // and merge.
  std::vector<int64_t> rest;  // positions (in x) of the original dims
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    int64_t pos_in_split = i < b_dim ? i : i + 1;  // tb sits at b_dim + 1
    int64_t pos_in_x = pos_in_split < piece_dim ? pos_in_split + 1 : pos_in_split;
    rest.push_back(pos_in_x);
  }
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i == a) perm.push_back(0);
    perm.push_back(rest[i]);
  }
  x = b.Transpose(x, perm);
  std::vector<int64_t> merged;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i)
    merged.push_back(i == a ? k * dims[a] : (i == b_dim ? tb : dims[i]));
  x = b.Reshape(x, merged);
  std::vector<int64_t> starts(dims.size(), 0);
  std::vector<int64_t> limits = merged;
  limits[a] = v.shape.dimensions(a);
  x = b.Slice(x, starts, limits);
  return {x, v.shape, target};
}

// Same tile dims, other device order: each partition receives its target
// tile from a partition that holds it. O(devices) pairs, inherent to
// collective-permute.
std::optional<PartitionedValue> TryCollectivePermute(SpmdBuilder& b,
                                                     const PartitionedValue& v,
                                                     const Sharding& target) {
  const Sharding& src = v.sharding;
  if (!src.IsTiled() || !target.IsTiled()) return std::nullopt;
  if (src.tile_assignment().dims() != target.tile_assignment().dims() ||
      src.subgroup_types() != target.subgroup_types())
    return std::nullopt;
  std::vector<int64_t> from = src.tile_assignment().Devices();
  std::vector<int64_t> to = target.tile_assignment().Devices();
  if (src.HasManualSubgroup()) {
    // Manual data never crosses its manual subgroup.
    const int64_t m = src.SubgroupDim(SubgroupType::kManual);
    std::vector<int64_t> group_of(b.module()->num_partitions(), -1);
    const TileAssignment& ta = src.tile_assignment();
    for (size_t f = 0; f < from.size(); ++f) {
      if (from[f] < 0 || from[f] >= static_cast<int64_t>(group_of.size())) return std::nullopt;
      group_of[from[f]] = (*ta.IndexOfDevice(from[f]))[m];
    }
    for (size_t f = 0; f < from.size(); ++f)
      if (to[f] < 0 || to[f] >= static_cast<int64_t>(group_of.size()) ||
          group_of[to[f]] != group_of[from[f]])
        return std::nullopt;
  }
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (size_t f = 0; f < from.size(); ++f) pairs.push_back({from[f], to[f]});
  RecordReshardPath(ReshardPath::kCollectivePermute, v, target);
  return PartitionedValue{b.CollectivePermute(v.hlo, std::move(pairs)), v.shape, target};
}

// Partial sums resolved by a reduce-scatter when the target tiles one dim,
// untiled in the source, over exactly the unreduced devices in order.
std::optional<PartitionedValue> TryReduceScatter(SpmdBuilder& b,
                                                 const PartitionedValue& v,
                                                 const Sharding& target) {
  const Sharding& src = v.sharding;
  const int64_t rank = v.shape.rank();
  if (!target.IsTiled() || target.TiledDataRank() != rank) return std::nullopt;
  if (src.kind() == Sharding::Kind::kUnreduced) {
    // Sums over every partition: a reduce-scatter works when the target
    // tiles one dim over every partition (its order gives the groups).
    const int64_t n = b.module()->num_partitions();
    for (int64_t d = 0; d < rank; ++d) {
      if (target.TileDim(d) != n || target.tile_assignment().num_devices() != n) continue;
      const int64_t len = v.shape.dimensions(d);
      std::vector<int64_t> high(rank, 0);
      high[d] = CeilDiv(len, n) * n - len;
      Instruction* x = b.PadHigh(v.hlo, high);
      x = b.ReduceScatter(x, d, target.GroupsAlongDims({d}),
                          SumReducer(b, v.shape.element_type()));
      RecordReshardPath(ReshardPath::kReduceScatter, v, target);
      return PartitionedValue{x, v.shape, target};
    }
    return std::nullopt;
  }
  const int64_t u = src.SubgroupDim(SubgroupType::kUnreduced);
  if (u < 0) return std::nullopt;
  const TileAssignment& ta = src.tile_assignment();
  for (int64_t d = 0; d < rank; ++d) {
    if (src.TileDim(d) != 1 || target.TileDim(d) != ta.dim(u)) continue;
    // Candidate: the unreduced dim takes the place of data dim d.
    std::vector<int64_t> perm, dims;
    std::vector<SubgroupType> types;
    for (int64_t i = 0; i < rank; ++i) {
      perm.push_back(i == d ? u : i);
      dims.push_back(ta.dim(perm.back()));
    }
    perm.push_back(d);
    dims.push_back(1);
    types.push_back(SubgroupType::kReplicated);
    for (size_t k = 0; k < src.subgroup_types().size(); ++k) {
      if (rank + static_cast<int64_t>(k) == u) continue;
      perm.push_back(rank + k);
      dims.push_back(ta.dim(rank + k));
      types.push_back(src.subgroup_types()[k]);
    }
    Sharding candidate = Sharding::Subgroup(ta.Transpose(perm).Reshape(dims), types);
    if (candidate != target) continue;
    const int64_t k = ta.dim(u);
    const int64_t n = v.shape.dimensions(d);
    std::vector<int64_t> high(rank, 0);
    high[d] = CeilDiv(n, k) * k - n;
    Instruction* x = b.PadHigh(v.hlo, high);
    x = b.ReduceScatter(x, d, src.GroupsAlongDims({u}),
                        SumReducer(b, v.shape.element_type()));
    RecordReshardPath(ReshardPath::kReduceScatter, v, target);
    return PartitionedValue{x, v.shape, target};
  }
  return std::nullopt;
}

// Same tile-assignment dims and subgroup types (collective-permute moves
// whole tiles between the two).
bool SameTileStructure(const Sharding& a, const Sharding& c) {
  return a.IsTiled() && c.IsTiled() && a.tile_assignment().dims() == c.tile_assignment().dims() &&
         a.subgroup_types() == c.subgroup_types();
}

int64_t LocalElements(const Shape& shape, const Sharding& s) {
  int64_t e = 1;
  for (int64_t d : s.TileShape(shape.dimensions())) e *= d;
  return e;
}

// Device orders the axis planner cannot relate (unrelated permutations):
// a collective-permute onto the other side's device list, reshaped, makes
// them related; it runs on whichever side has the smaller tiles.
std::optional<PartitionedValue> TryPermuteAndPlan(SpmdBuilder& b, const PartitionedValue& v,
                                                  const Sharding& dst) {
  const Sharding& src = v.sharding;
  const int64_t n = b.module()->num_partitions();
  if (!src.IsTiled() || !dst.IsTiled() || src.HasManualSubgroup() || dst.HasManualSubgroup() ||
      src.tile_assignment().num_devices() != n || dst.tile_assignment().num_devices() != n)
    return std::nullopt;
  // Permute first: src's tiles onto dst's devices in src's layout.
  Sharding first = Sharding::Subgroup(dst.tile_assignment().Reshape(src.tile_assignment().dims()),
                                      src.subgroup_types());
  // Permute last: dst's layout on src's devices, then onto dst's.
  Sharding last = Sharding::Subgroup(src.tile_assignment().Reshape(dst.tile_assignment().dims()),
                                     dst.subgroup_types());
  // When both arrays have the same dim sizes in another order, src's array
  // transposed into dst's order is another good middle point.
  {
    std::vector<int64_t> sd = src.tile_assignment().dims(), dd = dst.tile_assignment().dims();
    std::vector<int64_t> perm;
    std::vector<bool> used(sd.size(), false);
    for (int64_t want : dd) {
      for (size_t i = 0; i < sd.size(); ++i) {
        if (used[i] || sd[i] != want) continue;
        used[i] = true;
        perm.push_back(i);
        break;
      }
    }
    if (sd.size() == dd.size() && perm.size() == dd.size()) {
      Sharding t = Sharding::Subgroup(src.tile_assignment().Transpose(perm), dst.subgroup_types());
      if (t != dst && SameTileStructure(t, dst) && AxisReshardApplies(b, v.shape, src, t) &&
          !AxisReshardApplies(b, v.shape, src, last))
        last = t;
    }
  }
  const bool src_smaller = LocalElements(v.shape, src) < LocalElements(v.shape, dst);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool permute_first = (attempt == 0) == src_smaller;
    if (permute_first) {
      if (first == src || !SameTileStructure(src, first) ||
          !AxisReshardApplies(b, v.shape, first, dst))
        continue;
      auto cp = TryCollectivePermute(b, v, first);
      if (!cp) continue;
      if (auto out = TryAxisReshard(b, *cp, dst)) return out;
    } else {
      if (last == dst || !SameTileStructure(last, dst) ||
          !AxisReshardApplies(b, v.shape, src, last))
        continue;
      auto mid = TryAxisReshard(b, v, last);
      if (!mid) continue;
      if (auto out = TryCollectivePermute(b, *mid, dst)) return out;
    }
  }
  return std::nullopt;
}

// Records an error for a reshard that must not happen and returns `v`
// relabelled, so that partitioning can go on to report it.
PartitionedValue Unsupported(SpmdBuilder& b, const PartitionedValue& v, const Sharding& dst,
                             const std::string& why) {
  b.SetError(Status::Error("cannot reshard from " + v.sharding.ToString(false) + " to " +
                           dst.ToString(false) + ": " + why));
  return {v.hlo, v.shape, dst};
}

// The sets of devices of each manual subgroup, sorted (O(devices)).
std::vector<std::vector<int64_t>> ManualGroupSets(const Sharding& s) {
  const int64_t m = s.SubgroupDim(SubgroupType::kManual);
  std::vector<int64_t> others;
  for (int64_t d = 0; d < s.tile_assignment().num_dimensions(); ++d)
    if (d != m) others.push_back(d);
  std::vector<std::vector<int64_t>> groups = s.GroupsAlongDims(others).Expand();
  for (auto& g : groups) std::sort(g.begin(), g.end());
  std::sort(groups.begin(), groups.end());
  return groups;
}

PartitionedValue ReshardArray(SpmdBuilder& b, PartitionedValue v, const Sharding& dst) {
  if (v.sharding == dst) return v;
  const Sharding src = v.sharding;
  // Manual values are per-device data that the program itself manages; the
  // partitioner may relabel them but never move them between devices.
  // Handlers that run an op on whole values inside a manual region ask for
  // {replicated}: like XLA, the op then runs on the local manual data (for
  // partially manual values, made whole within each manual subgroup). Any
  // other target would need SPMDShardToFullShape.
  if (src.IsManual() || dst.IsManual()) {
    if (dst.IsReplicated() || (dst.IsManual() && src.IsReplicated()))
      return {v.hlo, v.shape, dst};
    return Unsupported(b, v, dst,
                       src.IsManual()
                           ? "a manual value leaves its manual region only through "
                             "SPMDShardToFullShape"
                           : "only a replicated value enters a manual region without "
                             "SPMDFullToShardShape");
  }
  if (src.HasManualSubgroup() || dst.HasManualSubgroup()) {
    if (!dst.HasManualSubgroup()) {
      if (!dst.IsReplicated())
        return Unsupported(b, v, dst,
                           "a partially manual value leaves its manual subgroups only through "
                           "SPMDShardToFullShape");
      std::vector<int64_t> all;
      for (int64_t d = 0; d < src.TiledDataRank(); ++d)
        if (src.TileDim(d) > 1) all.push_back(d);
      if (all.empty()) return {v.hlo, v.shape, dst};
      RecordReshardPath(ReshardPath::kAllGather, v, dst);
      PartitionedValue whole =
          GatherDims(b, v, all, PartiallyReplicateTiledShardingOnDims(src, all));
      return {whole.hlo, v.shape, dst};
    }
    if (!src.HasManualSubgroup()) {
      // Entering partially manual subgroups: a value that is not manual is
      // the same in every group, so each group slices its tiles from the
      // whole value.
      PartitionedValue whole = src.IsReplicated() ? v : ReshardArray(b, v, Sharding::Replicate());
      whole.sharding = Sharding::Replicate();
      std::vector<int64_t> tiled;
      for (int64_t i = 0; i < dst.TiledDataRank(); ++i)
        if (dst.TileDim(i) > 1) tiled.push_back(i);
      if (!tiled.empty()) RecordReshardPath(ReshardPath::kSlice, whole, dst);
      return SliceToTarget(b, whole, dst, tiled);
    }
    if (ManualGroupSets(src) != ManualGroupSets(dst))
      return Unsupported(b, v, dst, "the manual subgroups hold different devices");
    // Every path below collects only along data or replicated dims, so the
    // reshard happens within each manual subgroup.
    RecordReshardPath(ReshardPath::kManualGroups, v, dst);
  }
  if (HasUnreduced(src) || HasUnreduced(dst)) {
    if (auto cp = TryCollectivePermute(b, v, dst)) return *cp;
    if (auto plan = TryAxisReshard(b, v, dst)) return *plan;
  }
  // Into partial sums: lay the value out as the reduced target, then keep
  // it on the first member of each unreduced group and zero it elsewhere.
  if (HasUnreduced(dst) && !HasUnreduced(src)) {
    PartitionedValue r = ReshardArray(b, v, ReduceUnreduced(dst));
    Instruction* member = dst.kind() == Sharding::Kind::kUnreduced
        ? b.PartitionIdS32()
        : b.TileIndices(dst.tile_assignment())[dst.SubgroupDim(SubgroupType::kUnreduced)];
    Instruction* first = b.Compare(member, b.ScalarS32(0), ComparisonDirection::kEq);
    const std::vector<int64_t>& local = r.hlo->shape().dimensions();
    Instruction* zeros = b.BroadcastScalar(b.Zero(v.shape.element_type()), local);
    Instruction* kept = b.Select(b.BroadcastScalar(first, local), r.hlo, zeros);
    RecordReshardPath(ReshardPath::kToUnreduced, v, dst);
    return {kept, v.shape, dst};
  }
  if (HasUnreduced(src)) {
    if (auto rs = TryReduceScatter(b, v, dst)) return *rs;
    DeviceGroups groups =
        src.kind() == Sharding::Kind::kUnreduced
            ? AllDevices(b.module()->num_partitions())
            : src.GroupsAlongDims({src.SubgroupDim(SubgroupType::kUnreduced)});
    v.hlo = b.AllReduce(v.hlo, groups, SumReducer(b, v.shape.element_type()));
    RecordReshardPath(ReshardPath::kAllReduce, v, dst);
    v.sharding = ReduceUnreduced(src);
    return ReshardArray(b, v, dst);
  }
  // A replicated value holds every tile: slice out this partition's.
  if (src.IsReplicated() && dst.IsTiled()) {
    std::vector<int64_t> tiled;
    for (int64_t i = 0; i < dst.TiledDataRank(); ++i)
      if (dst.TileDim(i) > 1) tiled.push_back(i);
    RecordReshardPath(ReshardPath::kSlice, v, dst);
    return SliceToTarget(b, v, dst, tiled);
  }
  const int64_t rank = v.shape.rank();
  if (rank == 0) return {v.hlo, v.shape, dst};
  const std::vector<int64_t> src_t = TileDims(src, rank);
  const std::vector<int64_t> dst_t = TileDims(dst, rank);
  std::vector<int64_t> more, less;  // tiled only in dst / only in src
  for (int64_t i = 0; i < rank; ++i) {
    if (dst_t[i] > 1 && src_t[i] == 1) more.push_back(i);
    if (src_t[i] > 1 && dst_t[i] == 1) less.push_back(i);
  }
  // More tiled: every partition already holds its target tile.
  if (PartiallyReplicateTiledShardingOnDims(dst, more) == src) {
    RecordReshardPath(ReshardPath::kSlice, v, dst);
    return SliceToTarget(b, v, dst, more);
  }
  // Less tiled: gather the dims the target does not tile.
  if (!less.empty() && PartiallyReplicateTiledShardingOnDims(src, less) == dst) {
    RecordReshardPath(ReshardPath::kAllGather, v, dst);
    return GatherDims(b, v, less, dst);
  }
  // The tiling moves from one dim to another over the same devices.
  if (src.IsTiled() && dst.IsTiled() && less.size() == 1 && more.size() == 1 &&
      src_t[less[0]] == dst_t[more[0]]) {
    std::vector<int64_t> perm(src.tile_assignment().num_dimensions());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[less[0]], perm[more[0]]);
    Sharding swapped = Sharding::Subgroup(src.tile_assignment().Transpose(perm),
                                          src.subgroup_types());
    if (swapped == dst) {
      RecordReshardPath(ReshardPath::kAllToAll, v, dst);
      return AllToAllPath(b, v, less[0], more[0], dst);
    }
  }
  if (auto cp = TryCollectivePermute(b, v, dst)) return *cp;
  if (auto plan = TryAxisReshard(b, v, dst)) return *plan;
  if (auto plan = TryPermuteAndPlan(b, v, dst)) return *plan;
  // Gather what differs, then slice; gathering every tiled dim (-> fully
  // replicated) always works.
  std::vector<int64_t> differ, all;
  for (int64_t i = 0; i < rank; ++i) {
    if (src_t[i] > 1) all.push_back(i);
    if (src_t[i] > 1 && src_t[i] != dst_t[i]) differ.push_back(i);
  }
  for (const std::vector<int64_t>* gather : {&differ, &all}) {
    if (gather->empty() && gather == &differ) continue;
    Sharding mid = PartiallyReplicateTiledShardingOnDims(src, *gather);
    std::vector<int64_t> slice;
    for (int64_t i = 0; i < rank; ++i)
      if (dst_t[i] > 1 && TileDims(mid, rank)[i] == 1) slice.push_back(i);
    if (PartiallyReplicateTiledShardingOnDims(dst, slice) != mid) continue;
    RecordReshardPath(gather == &differ ? ReshardPath::kFallbackGatherSome
                                        : ReshardPath::kFallbackGatherAll,
                      v, dst);
    PartitionedValue g = gather->empty() ? v : GatherDims(b, v, *gather, mid);
    g.sharding = mid;
    return SliceToTarget(b, g, dst, slice);
  }
  b.SetError(Status::Error("no reshard path from " + src.ToString(false) + " to " +
                           dst.ToString(false)));
  return {v.hlo, v.shape, dst};
}

}  // namespace

Instruction* TileOffset(SpmdBuilder& b, const Sharding& s,
                        const std::vector<int64_t>& global_dims, int64_t dim) {
  const int64_t k = s.TileDim(dim);
  if (k == 1) return b.ScalarS32(0);
  Instruction* index = b.TileIndices(s.tile_assignment())[dim];
  const int64_t tile = CeilDiv(global_dims[dim], k);
  return b.Binary(Opcode::kMultiply, index, b.ScalarS32(tile));
}

Instruction* BroadcastFromDevice(SpmdBuilder& b, Instruction* x, int64_t device) {
  const int64_t n = b.module()->num_partitions();
  if (n == 1 || !x->shape().IsArray()) return x;
  const std::vector<int64_t>& dims = x->shape().dimensions();
  Instruction* mine = b.Compare(b.PartitionIdS32(), b.ScalarS32(device), ComparisonDirection::kEq);
  Instruction* zeros = b.BroadcastScalar(b.Zero(x->shape().element_type()), dims);
  Instruction* kept = b.Select(b.BroadcastScalar(mine, dims), x, zeros);
  return b.AllReduce(kept, AllDevices(n), SumReducer(b, x->shape().element_type()));
}

bool HasPadding(const PartitionedValue& value, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    int64_t k = value.sharding.IsTiled() ? value.sharding.TileDim(d) : 1;
    if (k > 1 && value.shape.dimensions(d) % k != 0) return true;
  }
  return false;
}

Instruction* MaskPadding(SpmdBuilder& b, const PartitionedValue& value,
                         const std::vector<int64_t>& dims, Instruction* identity) {
  const std::vector<int64_t>& local = value.hlo->shape().dimensions();
  Instruction* mask = nullptr;
  for (int64_t d : dims) {
    int64_t k = value.sharding.IsTiled() ? value.sharding.TileDim(d) : 1;
    const int64_t n = value.shape.dimensions(d);
    if (k == 1 || n % k == 0) continue;
    // valid <=> offset + iota < n
    Instruction* iota = b.Iota(PrimitiveType::S32, local, d);
    Instruction* offset = TileOffset(b, value.sharding, value.shape.dimensions(), d);
    Instruction* pos = b.Binary(Opcode::kAdd, iota, b.BroadcastScalar(offset, local));
    Instruction* valid = b.Compare(pos, b.BroadcastScalar(b.ScalarS32(n), local),
                                   ComparisonDirection::kLt);
    mask = mask == nullptr ? valid : b.Binary(Opcode::kAnd, mask, valid);
  }
  if (mask == nullptr) return value.hlo;
  const PrimitiveType type = value.hlo->shape().element_type();
  if (identity->shape().element_type() != type) identity = b.Convert(identity, type);
  return b.Select(mask, value.hlo, b.BroadcastScalar(identity, local));
}

PartitionedValue Reshard(SpmdBuilder& b, const PartitionedValue& value,
                         const Sharding& target) {
  SpmdBuilder::ScopedCause cause(b, value.hlo, value.sharding, target);  // provenance
  if (value.shape.IsTuple()) {
    if (value.sharding == target) return value;
    std::vector<Instruction*> elems;
    std::vector<Sharding> shardings;
    std::vector<Shape> local_shapes;
    for (int i = 0; i < value.shape.tuple_size(); ++i) {
      const Shape& es = value.shape.tuple_shapes(i);
      Instruction* gte = b.Add(Opcode::kGetTupleElement,
                               value.hlo->shape().tuple_shapes(i), {value.hlo});
      gte->mutable_attrs().tuple_index = i;
      PartitionedValue ev{gte, es, ElementSharding(value.sharding, value.shape, i)};
      PartitionedValue r = Reshard(b, ev, ElementSharding(target, value.shape, i));
      elems.push_back(r.hlo);
      shardings.push_back(r.sharding);
      local_shapes.push_back(r.hlo->shape());
    }
    Instruction* t = b.Add(Opcode::kTuple, Shape::Tuple(local_shapes), elems);
    return {t, value.shape, Sharding::Tuple(shardings)};
  }
  Sharding dst = NormalizeForPartitioning(target);
  if (!value.shape.IsArray() || dst.IsTuple()) return {value.hlo, value.shape, dst};
  PartitionedValue v = value;
  v.sharding = NormalizeForPartitioning(v.sharding);
  if (v.sharding != dst) CountReshardCall();
  return ReshardArray(b, v, dst);
}

ReshardPlan PlanReshard(const Shape& shape, const Sharding& from, const Sharding& to,
                        int64_t num_partitions, const Mesh* mesh) {
  ReshardPlan plan;
  if (from == to) return plan;
  ScopedReshardEstimate estimating;
  Module scratch("reshard_estimate");
  scratch.set_num_partitions(num_partitions);
  Computation* comp = scratch.AddComputation(std::make_unique<Computation>("estimate"));
  auto param = std::make_unique<Instruction>(Opcode::kParameter, "value",
                                             shape.IsArray() ? LocalShape(shape, from) : shape);
  param->mutable_attrs().parameter_number = 0;
  Instruction* value = comp->AddInstruction(std::move(param));
  SpmdModuleState state;
  state.module = &scratch;
  SpmdBuilder b(&state, comp);
  const PartitionedValue moved = Reshard(b, {value, shape, from}, to);
  if (!state.error.ok()) {
    plan.possible = false;
    return plan;
  }
  if (moved.hlo->shape().IsArray()) plan.result_elements = moved.hlo->shape().ElementCount();
  for (const auto& instr : comp->instructions()) {
    if (instr.get() == value) continue;
    plan.emitted = true;
    const Opcode op = SyncCollectiveOf(instr->opcode());
    if (op != Opcode::kAllReduce && op != Opcode::kAllGather && op != Opcode::kReduceScatter &&
        op != Opcode::kAllToAll && op != Opcode::kCollectivePermute)
      continue;
    CollectiveCost c = CostOfCollective(*instr, num_partitions, mesh);
    c.instr = nullptr;  // the scratch program goes
    const double element_bytes = static_cast<double>(
        std::max<int64_t>(1, ByteWidth(instr->shape().element_type())));
    plan.wire_elements += c.wire_bytes / element_bytes;
    plan.collectives.push_back(std::move(c));
  }
  return plan;
}

double EstimateReshard(const Shape& shape, const Sharding& from, const Sharding& to,
                       int64_t num_partitions) {
  const ReshardPlan plan = PlanReshard(shape, from, to, num_partitions);
  if (!plan.possible) return std::numeric_limits<double>::infinity();
  if (plan.wire_elements == 0 && plan.emitted)
    return 1e-3 * static_cast<double>(plan.result_elements);
  return plan.wire_elements;
}

}  // namespace meshsplit::spmd
