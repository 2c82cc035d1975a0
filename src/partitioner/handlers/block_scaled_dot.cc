// The block-scaled dot custom-call (lhs, rhs, lhs_scale, rhs_scale; see
// runtime/kernels_block_scaled_dot.cc) partitioned as a dot: the contraction
// core (handlers/dot.cc) plans the lhs and rhs layouts, and each scale is
// resharded to exactly its operand's layout, so every partition holds the
// scales of the blocks it holds. That needs tiles that start on block
// boundaries and contracting dims without padding (whose NaN-filled scale
// padding would poison the zeroed operand padding): when some dim the
// planner might tile does not divide into whole blocks on every partition
// count, the op runs on whole values instead (the fallback, with a warning).
#include <string>

#include "ir/custom_call_targets.h"
#include "partitioner/context.h"
#include "partitioner/handlers/dot_plan.h"

namespace meshsplit::spmd {
namespace {

// Per-dim block sizes of an operand and its scale, or an empty vector when
// the scale does not divide the operand into blocks. An empty operand dim
// has no blocks (its block size would be 0, which BlocksAlign divides by).
std::vector<int64_t> BlockSizes(const Shape& x, const Shape& scale) {
  if (!x.IsArray() || !scale.IsArray() || x.rank() != scale.rank()) return {};
  std::vector<int64_t> block(x.rank());
  for (int d = 0; d < x.rank(); ++d) {
    const int64_t n = x.dimensions(d), m = scale.dimensions(d);
    if (n <= 0 || m <= 0 || n % m != 0) return {};
    block[d] = n / m;
  }
  return block;
}

// True when any tiling by a divisor of `n` partitions cuts `x` only at
// block boundaries and leaves its contracting (last) dim unpadded.
bool BlocksAlign(const Shape& x, const std::vector<int64_t>& block, int64_t n) {
  for (int d = 0; d < x.rank(); ++d) {
    const bool contracting = d == x.rank() - 1;
    if ((block[d] > 1 || contracting) && x.dimensions(d) % (n * block[d]) != 0) return false;
  }
  return true;
}

}  // namespace

bool IsBlockScaledDot(const Instruction& instr) {
  return instr.opcode() == Opcode::kCustomCall &&
         instr.attrs().custom_call_target == kBlockScaledDotTarget && instr.operand_count() == 4;
}

Status HandleBlockScaledDot(SpmdContext& ctx, const Instruction& instr) {
  const Shape& lhs = instr.operand(0)->shape();
  const Shape& rhs = instr.operand(1)->shape();
  const int rank = lhs.rank();
  if (!lhs.IsArray() || !rhs.IsArray() || (rank != 2 && rank != 3) || rhs.rank() != rank ||
      !instr.shape().IsArray() || instr.shape().rank() != rank)
    return ctx.Fallback(instr, "block-scaled dot of unexpected shapes");
  const std::vector<int64_t> lblock = BlockSizes(lhs, instr.operand(2)->shape());
  const std::vector<int64_t> rblock = BlockSizes(rhs, instr.operand(3)->shape());
  if (lblock.empty() || rblock.empty())
    return ctx.Fallback(instr, "block-scaled dot scales that do not block their operands");
  if (!BlocksAlign(lhs, lblock, ctx.num_partitions) ||
      !BlocksAlign(rhs, rblock, ctx.num_partitions))
    return ctx.Fallback(instr, "block-scaled dot blocks that partitions would split");
  const Sharding out = ctx.ShardingOf(instr);
  if (out.IsManual()) {
    // Inside a manual region every value is already local.
    std::vector<Instruction*> ops;
    for (int i = 0; i < 4; ++i) ops.push_back(ctx.OperandAs(instr, i, out).hlo);
    ctx.Set(instr, {ctx.Clone(instr, instr.shape(), ops), instr.shape(), out});
    return Status::Ok();
  }
  // Iteration space [batch?, lhs free, rhs free, contracting]: lhs is
  // [b, m, k], rhs [b, n, k], the result [b, m, n].
  std::vector<int64_t> lhs_to_iter, rhs_to_iter, out_to_iter;
  int64_t n_iter;
  if (rank == 3) {
    lhs_to_iter = {0, 1, 3};
    rhs_to_iter = {0, 2, 3};
    out_to_iter = {0, 1, 2};
    n_iter = 4;
  } else {
    lhs_to_iter = {0, 2};
    rhs_to_iter = {1, 2};
    out_to_iter = {0, 1};
    n_iter = 3;
  }
  auto make_local = [&](const PartitionedValue& l, const PartitionedValue& r,
                        const Shape& local_shape) {
    PartitionedValue ls = Reshard(ctx.b, ctx.Get(instr.operand(2)), l.sharding);
    PartitionedValue rs = Reshard(ctx.b, ctx.Get(instr.operand(3)), r.sharding);
    return ctx.Clone(instr, local_shape, {l.hlo, r.hlo, ls.hlo, rs.hlo});
  };
  return PartitionContraction(
      ctx, instr, MakeContractionSpace(instr, lhs_to_iter, rhs_to_iter, out_to_iter, n_iter),
      make_local);
}

}  // namespace meshsplit::spmd
