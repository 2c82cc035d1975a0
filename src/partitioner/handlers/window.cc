// reduce-window and select-and-scatter: a windowed dim tiled in the result
// is partitioned by halo exchange (halo.h) — each partition fetches the
// input its output tile reads, padded with the reduction's init value, and
// runs the op locally with adjusted padding. Dims whose window cannot be
// planned are made whole; dims the window does not reach across stay tiled.
#include <algorithm>
#include <limits>
#include <optional>

#include "partitioner/context.h"
#include "partitioner/halo.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {
namespace {

bool TrivialWindow(const WindowDimension& w) {
  return w.size == 1 && w.stride == 1 && w.padding_low == 0 && w.padding_high == 0 &&
         w.base_dilation == 1 && w.window_dilation == 1 && !w.window_reversal;
}

// Tiled, no unreduced part: a layout the halo code understands. Manual
// subgroups are fine: halos move along data dims only, so they stay inside
// each manual subgroup.
bool Usable(const Sharding& s) {
  return s.IsTiled() && !HasUnreduced(s);
}

// The computation's root is `op(param0, param1)` (or compare with a
// direction); nullptr otherwise.
const Instruction* BinaryRootOfParams(const Computation* c) {
  if (c == nullptr || c->root() == nullptr) return nullptr;
  const Instruction* root = c->root();
  if (root->operand_count() != 2) return nullptr;
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if (a->opcode() != Opcode::kParameter || b->opcode() != Opcode::kParameter) return nullptr;
  if (a->attrs().parameter_number != 0 || b->attrs().parameter_number != 1) return nullptr;
  return root;
}

// Every value of `from` converts to `to` and back unchanged (the float
// widenings; a reduce-window may mix float precisions, as XLA allows).
bool HoldsExactly(PrimitiveType to, PrimitiveType from) {
  if (to == from) return true;
  const bool narrow_float = from == PrimitiveType::F16 || from == PrimitiveType::BF16;
  if (to == PrimitiveType::F64) return narrow_float || from == PrimitiveType::F32;
  if (to == PrimitiveType::F32) return narrow_float;
  return false;
}

}  // namespace

Status HandleReduceWindow(SpmdContext& ctx, const Instruction& instr) {
  const Attributes& a = instr.attrs();
  const int64_t n_in = instr.operand_count() / 2;
  if (!a.window || n_in < 1 || instr.operand_count() != 2 * n_in)
    return ctx.Fallback(instr);
  const Shape& in0 = instr.operand(0)->shape();
  const Shape& out0_shape = instr.shape().IsTuple() ? instr.shape().tuple_shapes(0) : instr.shape();
  if (!in0.IsArray() || static_cast<int64_t>(a.window->size()) != in0.rank())
    return ctx.Fallback(instr);
  Sharding out = ctx.ShardingOf(instr);
  Sharding out0 = NormalizeForPartitioning(ElementSharding(out, instr.shape(), 0));
  if (out0.IsTuple()) return ctx.Fallback(instr);
  if (!out0.IsTiled()) out0 = Sharding::Replicate();
  const int64_t rank = in0.rank();
  // Windowed dims tiled in the result: plan their halos, or make them whole.
  std::vector<std::optional<WindowedDimPlan>> plans(rank);
  std::vector<int64_t> whole;
  // The halo pads each input with its init value, which must then be of the
  // input's element type; a narrower input cannot hold a wider init exactly.
  bool usable = Usable(out0);
  for (int64_t i = 0; i < n_in; ++i)
    usable = usable && HoldsExactly(instr.operand(i)->shape().element_type(),
                                    instr.operand(n_in + i)->shape().element_type());
  for (int64_t d = 0; d < rank; ++d) {
    const WindowDimension& w = (*a.window)[d];
    const int64_t tiles = out0.IsTiled() ? out0.TileDim(d) : 1;
    if (TrivialWindow(w) || tiles == 1) continue;
    if (usable)
      plans[d] = PlanWindowedDim(w, CeilDiv(out0_shape.dimensions(d), tiles));
    if (!plans[d]) whole.push_back(d);
  }
  Sharding mid = whole.empty() ? out0 : PartiallyReplicateTiledShardingOnDims(out0, whole);
  std::vector<Instruction*> operands(instr.operand_count());
  for (int64_t i = 0; i < n_in; ++i)
    operands[n_in + i] = ctx.OperandAs(instr, n_in + i, Sharding::Replicate()).hlo;
  Window window = *a.window;
  for (int64_t i = 0; i < n_in; ++i) {
    PartitionedValue v = ctx.OperandAs(instr, i, mid);
    Instruction* pad = operands[n_in + i];
    const PrimitiveType type = v.shape.element_type();
    for (int64_t d = 0; d < rank; ++d) {
      if (!plans[d]) continue;
      SpmdBuilder::ScopedCause rule(ctx.b, instr, "windowed dim sharded -> halo exchange");
      if (pad->shape().element_type() != type) pad = ctx.b.Convert(pad, type);
      v.hlo = ExchangeHaloWindow(ctx.b, v, d, plans[d]->input, pad);
      window[d] = plans[d]->local;
    }
    operands[i] = v.hlo;
  }
  Sharding mid_all = mid;
  if (instr.shape().IsTuple())
    mid_all = Sharding::Tuple(std::vector<Sharding>(instr.shape().tuple_size(), mid));
  Instruction* r = ctx.Clone(instr, LocalShape(instr.shape(), mid_all), operands);
  r->mutable_attrs().window = window;
  ctx.Set(instr, Reshard(ctx.b, {r, instr.shape(), mid_all}, out));
  return Status::Ok();
}

// select-and-scatter along a tiled windowed dim: operand tile i (elements
// [i*T, (i+1)*T)) receives scatters only from the windows overlapping it.
// With T a multiple of the stride those windows are a source range starting
// at an affine function of i; each partition fetches that source range and
// the operand elements its windows cover (halo exchange), runs the op
// locally and keeps the middle T elements. The operand halo is padded with
// a value the select never prefers (the lowest value for a >=/> select, the
// highest for <=/<), the source halo with zeros, so the scatter must be an
// add. Other cases make the dim whole.
Status HandleSelectAndScatter(SpmdContext& ctx, const Instruction& instr) {
  const Attributes& a = instr.attrs();
  if (!a.window || instr.operand_count() != 3 || instr.called_computations().size() != 2 ||
      !instr.shape().IsArray())
    return ctx.Fallback(instr);
  const Shape& shape = instr.shape();
  const int64_t rank = shape.rank();
  if (static_cast<int64_t>(a.window->size()) != rank) return ctx.Fallback(instr);
  Sharding out = NormalizeForPartitioning(ctx.ShardingOf(instr));
  if (!out.IsTiled()) out = Sharding::Replicate();
  // Pad value for the operand halo, from the select's comparison.
  const PrimitiveType type = shape.element_type();
  std::optional<double> operand_pad;
  const Instruction* sel = BinaryRootOfParams(instr.called_computations()[0]);
  const Instruction* sca = BinaryRootOfParams(instr.called_computations()[1]);
  const bool is_float = type == PrimitiveType::F16 || type == PrimitiveType::BF16 ||
                        type == PrimitiveType::F32 || type == PrimitiveType::F64;
  if (sel != nullptr && sel->opcode() == Opcode::kCompare && is_float) {
    ComparisonDirection dir = sel->attrs().comparison_direction.value_or(ComparisonDirection::kEq);
    if (dir == ComparisonDirection::kGe || dir == ComparisonDirection::kGt)
      operand_pad = -std::numeric_limits<double>::infinity();
    else if (dir == ComparisonDirection::kLe || dir == ComparisonDirection::kLt)
      operand_pad = std::numeric_limits<double>::infinity();
  }
  const bool scatter_add = sca != nullptr && sca->opcode() == Opcode::kAdd;

  struct Plan {
    HaloWindow operand, source;
    int64_t keep_offset;
  };
  std::vector<std::optional<Plan>> plans(rank);
  std::vector<int64_t> whole;
  const bool usable = Usable(out) && operand_pad.has_value() && scatter_add;
  for (int64_t d = 0; d < rank; ++d) {
    const WindowDimension& w = (*a.window)[d];
    const int64_t tiles = out.IsTiled() ? out.TileDim(d) : 1;
    if (TrivialWindow(w) || tiles == 1) continue;
    const int64_t tile = CeilDiv(shape.dimensions(d), tiles);
    const int64_t s = w.stride, k = w.size, lo = w.padding_low;
    bool ok = usable && s >= 1 && k >= 1 && w.base_dilation == 1 && w.window_dilation == 1 &&
              !w.window_reversal && tile % s == 0;
    if (ok) {
      // Windows j with j*s - lo <= (i+1)*T - 1 and j*s - lo + k - 1 >= i*T.
      const int64_t j_first = -FloorDiv(-(lo - k + 1), s);  // ceil((lo-k+1)/s)
      const int64_t j_last = FloorDiv(tile - 1 + lo, s);
      const int64_t count = j_last - j_first + 1;
      const int64_t op_first = j_first * s - lo;  // relative to i*T
      const int64_t op_size = (count - 1) * s + k;
      ok = count >= 1 && op_first <= 0 && op_first + op_size >= tile;
      if (ok)
        plans[d] = Plan{HaloWindow{op_first, tile, op_size},
                        HaloWindow{j_first, tile / s, count}, -op_first};
    }
    if (!plans[d]) whole.push_back(d);
  }
  Sharding mid = whole.empty() ? out : PartiallyReplicateTiledShardingOnDims(out, whole);
  SpmdBuilder& b = ctx.b;
  PartitionedValue operand = ctx.OperandAs(instr, 0, mid);
  PartitionedValue source = ctx.OperandAs(instr, 1, mid);
  Instruction* init = ctx.OperandAs(instr, 2, Sharding::Replicate()).hlo;
  Window window = *a.window;
  std::vector<int64_t> starts(rank, 0), limits = LocalShape(shape, mid).dimensions();
  bool any = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (!plans[d]) continue;
    any = true;
    Instruction* low = b.ScalarConstant(type, *operand_pad);
    SpmdBuilder::ScopedCause rule(b, instr, "windowed dim sharded -> halo exchange");
    operand.hlo = ExchangeHaloWindow(b, operand, d, plans[d]->operand, low);
    source.hlo = ExchangeHaloWindow(b, source, d, plans[d]->source, b.Zero(type));
    window[d].padding_low = 0;
    window[d].padding_high = 0;
    starts[d] = plans[d]->keep_offset;
    limits[d] += starts[d];
  }
  Instruction* r = ctx.Clone(instr, operand.hlo->shape(), {operand.hlo, source.hlo, init});
  r->mutable_attrs().window = window;
  if (any) r = b.Slice(r, starts, limits);
  ctx.Set(instr, Reshard(b, {r, shape, mid}, out));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
