// ragged-dot with its rhs group dim tiled: expert parallelism. In the
// ragged non-contracting mode (lhs [b..., m, k] rows split into consecutive
// groups, rhs [b..., g, k, n] one matrix per group, batch dims optional) each partition keeps its own experts'
// matrices, multiplies every lhs row that falls in one of its groups, and
// the partial results (zero for rows of other experts) are summed by the
// reshard to the result's sharding. Only the small group_sizes vector and
// the lhs (replicated, as the rows of any expert may be anywhere) are made
// whole; the expert weights never move.
//
// Each partition's local op sees its groups at the rows the whole op gives
// them: a leading dummy group of zeros covers the rows before its first
// group (its size is the running sum of the earlier groups' sizes, in
// group_sizes' own type, which is exactly where the whole op starts the
// first local group even when sizes are negative or wrap).
#include <algorithm>

#include "partitioner/context.h"

namespace meshsplit::spmd {

// Returns true when it partitioned `instr` (status in *status); false when
// the op is not in the shape this rule handles.
bool TryRaggedDotExpertParallel(SpmdContext& ctx, const Instruction& instr, int64_t ragged_dim,
                                int64_t group_dim, Status* status) {
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  const Shape& gs = instr.operand(2)->shape();
  const Shape& out_shape = instr.shape();
  const DotDimensionNumbers& dn = *instr.attrs().dot_dnums;
  if (gs.rank() < 1 ||
      std::find(dn.lhs_contracting_dimensions.begin(), dn.lhs_contracting_dimensions.end(),
                ragged_dim) != dn.lhs_contracting_dimensions.end())
    return false;
  Sharding rhs_s = NormalizeForPartitioning(ctx.Get(instr.operand(1)).sharding);
  if (!rhs_s.IsTiled() || rhs_s.IsTuple() || rhs_s.HasManualSubgroup() || HasUnreduced(rhs_s) ||
      rhs_s.TileDim(group_dim) <= 1)
    return false;
  SpmdBuilder& b = ctx.b;
  SpmdBuilder::ScopedCause cause(b, instr, "rhs group dim sharded -> experts stay, partial sums");
  // rhs tiled along its group dim only; everything else whole.
  std::vector<int64_t> other;
  for (int64_t d = 0; d < rs.rank(); ++d)
    if (d != group_dim) other.push_back(d);
  const Sharding rhs_t = PartiallyReplicateTiledShardingOnDims(rhs_s, other);
  PartitionedValue rhs = ctx.OperandAs(instr, 1, rhs_t);
  Instruction* lhs = ctx.OperandAs(instr, 0, Sharding::Replicate()).hlo;
  Instruction* sizes = ctx.OperandAs(instr, 2, Sharding::Replicate()).hlo;
  const PrimitiveType st = gs.element_type();
  const int64_t g = rs.dimensions(group_dim);
  const int64_t local_g = rhs.hlo->shape().dimensions(group_dim);
  const int64_t tiles = rhs_t.TileDim(group_dim);

  // Padding experts (uneven g) must not enter the sums: zero matrices, and
  // size 0 in the local group_sizes (the pad below).
  Instruction* rhs_local = MaskPadding(b, rhs, {group_dim}, b.Zero(rs.element_type()));
  Instruction* first = TileOffset(b, rhs_t, rs.dimensions(), group_dim);  // s32
  // group_sizes is [p..., g]: one row of sizes per leading (batch) index;
  // every row gets its own leading dummy group.
  const int64_t last = gs.rank() - 1;
  std::vector<int64_t> pad_high(gs.rank(), 0);
  pad_high[last] = local_g * tiles - g;
  Instruction* padded_sizes = b.PadHigh(sizes, pad_high);
  std::vector<Instruction*> starts(gs.rank(), b.ScalarS32(0));
  starts[last] = first;
  std::vector<int64_t> local_dims = gs.dimensions();
  local_dims[last] = local_g;
  Instruction* local_sizes = b.DynamicSlice(padded_sizes, starts, local_dims);
  // Rows before the first local group: the running sum of the earlier sizes.
  const std::vector<int64_t>& gdims = gs.dimensions();
  Instruction* earlier = b.Compare(b.Iota(PrimitiveType::S32, gdims, last),
                                   b.BroadcastScalar(first, gdims), ComparisonDirection::kLt);
  Instruction* masked = b.Select(earlier, sizes, b.BroadcastScalar(b.Zero(st), gdims));
  std::vector<int64_t> row_dims(gdims.begin(), gdims.end() - 1);
  Instruction* before = b.Add(Opcode::kReduce, Shape(st, row_dims), {masked, b.Zero(st)});
  before->mutable_attrs().dimensions = {last};
  before->set_called_computations({b.Reducer(Opcode::kAdd, st)});
  std::vector<int64_t> one = row_dims, ext = gs.dimensions();
  one.push_back(1);
  ext[last] = local_g + 1;
  Instruction* ext_sizes =
      b.Add(Opcode::kConcatenate, Shape(st, ext), {b.Reshape(before, one), local_sizes});
  ext_sizes->mutable_attrs().dimensions = {last};
  // The dummy group's matrix is zero: pad the local experts by one in front.
  PaddingConfig front(rs.rank());
  front[group_dim].low = 1;
  std::vector<int64_t> ext_dims = rhs_local->shape().dimensions();
  ext_dims[group_dim] += 1;
  Instruction* ext_rhs = b.Add(Opcode::kPad, Shape(rs.element_type(), ext_dims),
                               {rhs_local, b.Zero(rs.element_type())});
  ext_rhs->mutable_attrs().padding = front;

  Instruction* local = ctx.Clone(instr, out_shape, {lhs, ext_rhs, ext_sizes});
  // The local results are partial sums over the partitions of the group dim.
  const Sharding partial =
      ProjectSharding(rhs_t, std::vector<int64_t>(out_shape.rank(), -1), SubgroupType::kUnreduced);
  ctx.Set(instr, Reshard(b, {local, out_shape, partial}, ctx.ShardingOf(instr)));
  *status = Status::Ok();
  (void)ls;
  return true;
}

}  // namespace meshsplit::spmd
