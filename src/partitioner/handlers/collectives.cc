// Collectives already present in the input (written by hand inside manual
// regions). They run as written on each partition's local value; inside a
// partially manual region the partitioner still splits each manual subgroup
// among its devices, so a hand-written collective may only connect devices
// of one manual subgroup — anything else is rejected here.
#include <algorithm>
#include <vector>

#include "partitioner/context.h"

namespace meshsplit::spmd {
namespace {

std::string GroupText(const std::vector<int64_t>& g) {
  std::string s = "{";
  for (size_t i = 0; i < g.size(); ++i) s += (i ? "," : "") + std::to_string(g[i]);
  return s + "}";
}

// Each device's position in `t` read row-major, by device id (-1: not in
// it). One pass, where asking IndexOfDevice per pair of a collective-permute
// costs an allocation each (a pipeline's stage shift has a pair per device).
std::vector<int64_t> FlatIndexByDevice(const TileAssignment& t) {
  const std::vector<int64_t> devices = t.Devices();
  int64_t most = -1;
  for (int64_t d : devices) most = std::max(most, d);
  std::vector<int64_t> at(most + 1, -1);
  for (size_t i = 0; i < devices.size(); ++i) at[devices[i]] = static_cast<int64_t>(i);
  return at;
}

// The product of `dims` from `from` on: the row-major stride of dim from - 1.
int64_t TrailingProduct(const std::vector<int64_t>& dims, size_t from) {
  int64_t p = 1;
  for (size_t d = from; d < dims.size(); ++d) p *= dims[d];
  return p;
}

// Rejects a cross-partition collective whose device groups mix manual
// subgroups of the instruction's partially manual sharding.
Status CheckManualSubgroups(const Instruction& instr) {
  if (!instr.has_sharding()) return Status::Ok();
  const Sharding& s = *instr.sharding();
  if (!s.IsTiled() || !s.HasManualSubgroup()) return Status::Ok();
  // Without a channel id the groups name replicas, not partitions.
  const Attributes& a = instr.attrs();
  if (!a.channel_id.has_value() && !a.use_global_device_ids) return Status::Ok();
  const int64_t manual_dim = s.SubgroupDim(SubgroupType::kManual);
  if (manual_dim < 0) return Status::Ok();
  // A manual subgroup: the devices that differ only in their manual index,
  // numbered by their other coordinates.
  const std::vector<int64_t> flat = FlatIndexByDevice(s.tile_assignment());
  const std::vector<int64_t>& dims = s.tile_assignment().dims();
  const int64_t inner = TrailingProduct(dims, manual_dim + 1), outer = inner * dims[manual_dim];
  auto subgroup_of = [&](int64_t d) -> int64_t {
    if (d < 0 || d >= static_cast<int64_t>(flat.size()) || flat[d] < 0) return -1;
    return flat[d] / outer * inner + flat[d] % inner;
  };

  const std::string op(OpcodeName(instr.opcode()));
  auto check = [&](const std::vector<int64_t>& g) -> Status {
    if (g.empty()) return Status::Ok();
    const int64_t first = subgroup_of(g[0]);
    for (int64_t d : g) {
      const int64_t subgroup = subgroup_of(d);
      if (subgroup < 0)
        return Status::Error(op + " %" + instr.name() + ": device " + std::to_string(d) +
                                 " of group " + GroupText(g) + " is not in the sharding " +
                                 s.ToString(false),
                             instr.loc());
      if (subgroup != first)
        return Status::Error("Manual " + op + " across devices that belong to different " +
                                 "manual subgroups: %" + instr.name() + " groups " +
                                 GroupText(g) + " but its sharding " + s.ToString(false) +
                                 " puts devices " + std::to_string(g[0]) + " and " +
                                 std::to_string(d) + " in different manual subgroups",
                             instr.loc());
    }
    return Status::Ok();
  };
  if (instr.opcode() == Opcode::kCollectivePermute) {
    std::vector<int64_t> pair(2);
    for (const auto& [src, dst] : a.source_target_pairs) {
      pair[0] = src;
      pair[1] = dst;
      MS_RETURN_IF_ERROR(check(pair));
    }
  } else if (a.replica_groups.has_value() && !a.replica_groups->empty()) {
    for (const std::vector<int64_t>& g : a.replica_groups->Expand()) MS_RETURN_IF_ERROR(check(g));
  }
  return Status::Ok();
}

}  // namespace

// XLA's partitioner accepts a cross-partition all-reduce (one with a
// channel id) only where its meaning per partition is clear: replicated
// (every partition holds the whole value) or in a (partially) manual
// region, there with one operand and, when partially manual, global device
// ids. A tiled one would reduce tiles of different data together.
Status CheckCrossPartitionAllReduce(const Instruction& instr) {
  if (instr.opcode() != Opcode::kAllReduce || !instr.attrs().channel_id.has_value() ||
      !instr.has_sharding())
    return Status::Ok();
  const Sharding& s = *instr.sharding();
  if (s.IsTuple()) return Status::Ok();
  const bool manual = s.IsManual(), partial = s.IsTiled() && s.HasManualSubgroup();
  if ((manual || partial) && instr.operand_count() != 1)
    return Status::Error("all-reduce %" + instr.name() +
                             ": only single-operand cross-partition all-reduces are supported in "
                             "manual partitioning mode",
                         instr.loc());
  if (partial && !instr.attrs().use_global_device_ids)
    return Status::Error("all-reduce %" + instr.name() +
                             ": a cross-partition all-reduce in partially manual mode must use "
                             "global device ids",
                         instr.loc());
  if (!manual && !partial && !IsTriviallyReplicated(NormalizeForPartitioning(s))) {
    bool tiles_data = false;
    if (s.IsTiled())
      for (int64_t d = 0; d < s.TiledDataRank(); ++d) tiles_data |= s.TileDim(d) > 1;
    if (tiles_data)
      return Status::Error("all-reduce %" + instr.name() + ": a cross-partition all-reduce must be "
                               "replicated or in a (partially) manual region, not " +
                               s.ToString(false),
                           instr.loc());
  }
  return Status::Ok();
}

namespace {

// A collective-permute in a partially manual region whose pairs join devices
// holding the same tile of the data dims: each device's local tile is what
// its target needs, so the permute runs on local tiles (a pipeline's stage
// shift keeps its data and model tiling this way) instead of on whole values.
bool PermutesWholeTiles(const Instruction& instr, const Sharding& s) {
  if (instr.opcode() != Opcode::kCollectivePermute || instr.operand_count() != 1) return false;
  if (!s.IsTiled() || !s.HasManualSubgroup() || instr.shape().IsTuple()) return false;
  // Devices hold the same data tile when their row-major positions agree
  // on the data dims, i.e. divided by the subgroup dims' product.
  const std::vector<int64_t> flat = FlatIndexByDevice(s.tile_assignment());
  const int64_t per_tile = TrailingProduct(s.tile_assignment().dims(), s.TiledDataRank());
  auto tile_of = [&](int64_t d) -> int64_t {
    if (d < 0 || d >= static_cast<int64_t>(flat.size()) || flat[d] < 0) return -1;
    return flat[d] / per_tile;
  };
  for (const auto& [src, dst] : instr.attrs().source_target_pairs) {
    const int64_t a = tile_of(src), b = tile_of(dst);
    if (a < 0 || b < 0 || a != b) return false;
  }
  return true;
}

}  // namespace

Status HandleInputCollective(SpmdContext& ctx, const Instruction& instr) {
  MS_RETURN_IF_ERROR(CheckManualSubgroups(instr));
  MS_RETURN_IF_ERROR(CheckCrossPartitionAllReduce(instr));
  const Sharding s = ctx.ShardingOf(instr);
  if (PermutesWholeTiles(instr, s)) {
    PartitionedValue local = Reshard(ctx.b, ctx.Get(instr.operand(0)), s);
    Instruction* permuted = ctx.Clone(instr, local.hlo->shape(), {local.hlo});
    ctx.Set(instr, {permuted, instr.shape(), s});
    return Status::Ok();
  }
  return ctx.Fallback(instr);
}

}  // namespace meshsplit::spmd
