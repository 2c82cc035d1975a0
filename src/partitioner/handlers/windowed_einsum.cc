// Windowed einsum (collective matmul): instead of all-gathering one operand
// of a dot before the local contraction, the operand's shards travel around
// the ring of their device group by collective-permute, one step per loop
// iteration, and each iteration contracts the shard it holds. The result
// block of that shard is written with dynamic-update-slice when the
// gathered dim reaches the result, or added to the running sum when it is
// contracting. Peak memory drops from the gathered operand to one shard, and
// the permute of the next shard can overlap the current block's compute.
#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "partitioner/handlers/dot_plan.h"

namespace meshsplit::spmd {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t IndexOf(const std::vector<int64_t>& v, int64_t x) {
  auto it = std::find(v.begin(), v.end(), x);
  return it == v.end() ? -1 : it - v.begin();
}

Instruction* Gte(SpmdBuilder& b, Instruction* tuple, int64_t i) {
  Instruction* g = b.Add(Opcode::kGetTupleElement, tuple->shape().tuple_shapes(i), {tuple});
  g->mutable_attrs().tuple_index = i;
  return g;
}

Instruction* Parameter(SpmdBuilder& b, const Shape& shape) {
  Instruction* p = b.Add(Opcode::kParameter, shape, {}, "param");
  p->mutable_attrs().parameter_number = 0;
  return p;
}

}  // namespace

Instruction* TryWindowedEinsum(SpmdContext& ctx, const Instruction& instr,
                               const ContractionSpace& space, int gathered,
                               const PartitionedValue& operand, const Sharding& target,
                               const std::function<PartitionedValue()>& make_other,
                               const Sharding& partial) {
  const int64_t threshold = ctx.options.windowed_einsum_threshold_bytes;
  if (threshold < 0) return nullptr;
  const Sharding s = NormalizeForPartitioning(operand.sharding);
  if (!s.IsTiled() || HasUnreduced(s) || s.HasManualSubgroup()) return nullptr;
  const Shape& shape = operand.shape;
  const int64_t rank = shape.rank();
  // Exactly one data dim is gathered, and nothing else changes.
  const std::vector<int64_t> tt = TileCounts(target, rank);
  int64_t d = -1;
  for (int64_t i = 0; i < rank; ++i) {
    if (s.TileDim(i) > 1 && tt[i] == 1) {
      if (d >= 0) return nullptr;
      d = i;
    }
  }
  if (d < 0 || ReplicateDims(s, {d}) != target) return nullptr;
  const std::vector<int64_t>& to_iter = gathered == 0 ? space.lhs_to_iter : space.rhs_to_iter;
  const std::vector<int64_t>& other_to_iter =
      gathered == 0 ? space.rhs_to_iter : space.lhs_to_iter;
  const int64_t it = to_iter[d];
  if (it < 0) return nullptr;
  const int64_t o = IndexOf(space.out_to_iter, it);
  if (!space.contracting[it] && o < 0) return nullptr;
  if (LocalShape(shape, target).ByteSize() <= threshold) return nullptr;
  // Every member of a ring must compute its own block of the result (or
  // its own partial sum): a ring whose members all compute the same values
  // would only repeat the work, each member summing in its own order.
  if (!partial.IsTiled()) return nullptr;
  const std::vector<std::vector<int64_t>> rings = s.GroupsAlongDims({d}).Expand();
  const int64_t repl_dim = partial.SubgroupDim(SubgroupType::kReplicated);
  for (const std::vector<int64_t>& ring : rings) {
    std::set<std::vector<int64_t>> seen;
    for (int64_t dev : ring) {
      std::optional<std::vector<int64_t>> index = partial.tile_assignment().IndexOfDevice(dev);
      if (!index) return nullptr;
      if (repl_dim >= 0) (*index)[repl_dim] = 0;
      if (!seen.insert(*index).second) return nullptr;
    }
  }
  // The other operand's planned layout cannot tile the windowed dim: the
  // plan does not tile it (the target leaves it whole).
  const int64_t e = IndexOf(other_to_iter, it);

  SpmdBuilder& b = ctx.b;
  const PartitionedValue other = make_other();
  const int64_t k = s.TileDim(d);
  const int64_t n = shape.dimensions(d);
  const int64_t t = CeilDiv(n, k);
  const PrimitiveType out_type = instr.shape().element_type();

  // Loop-invariant inputs: the traveling shard with its contracting padding
  // zeroed (it carries its own mask around the ring), the other operand
  // padded with zeros to whole shards along the windowed dim, and the
  // result buffer.
  std::vector<int64_t> contracting_dims;
  for (int64_t i = 0; i < rank; ++i)
    if (to_iter[i] >= 0 && space.contracting[to_iter[i]]) contracting_dims.push_back(i);
  Instruction* shard = MaskPadding(b, {operand.hlo, shape, s}, contracting_dims,
                                   b.Zero(shape.element_type()));
  Instruction* other_hlo = other.hlo;
  if (e >= 0) {
    std::vector<int64_t> high(other_hlo->shape().rank(), 0);
    high[e] = k * t - other_hlo->shape().dimensions(e);
    other_hlo = b.PadHigh(other_hlo, high);
  }
  Shape local_out = LocalShape(instr.shape(), partial);
  std::vector<int64_t> acc_dims = local_out.dimensions();
  std::vector<int64_t> block_dims = acc_dims;
  if (o >= 0) {
    acc_dims[o] = k * t;
    block_dims[o] = t;
  }
  Instruction* acc = b.BroadcastScalar(b.Zero(out_type), acc_dims);
  Instruction* zero_i = b.ScalarS32(0);
  Shape state_shape = Shape::Tuple(
      {zero_i->shape(), shard->shape(), other_hlo->shape(), acc->shape()});
  Instruction* init = b.Add(Opcode::kTuple, state_shape, {zero_i, shard, other_hlo, acc});

  // Device j of each ring receives from device j+1, so in iteration i it
  // holds the shard of ring position (j + i) mod k.
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (const std::vector<int64_t>& ring : rings)
    for (int64_t j = 0; j < k; ++j) pairs.push_back({ring[(j + 1) % k], ring[j]});

  // Condition: i < k.
  auto cond = std::make_unique<Computation>(ctx.shared().ComputationName(instr.name() + ".window_cond"));
  {
    SpmdBuilder cb(&b.state(), cond.get());
    Instruction* p = Parameter(cb, state_shape);
    Instruction* i = Gte(cb, p, 0);
    cond->set_root(cb.Compare(i, cb.ScalarS32(k), ComparisonDirection::kLt));
  }
  // Body: contract the held shard, place or add its block, pass it on.
  auto body = std::make_unique<Computation>(ctx.shared().ComputationName(instr.name() + ".window_body"));
  {
    SpmdBuilder bb(&b.state(), body.get());
    Instruction* p = Parameter(bb, state_shape);
    Instruction* i = Gte(bb, p, 0);
    Instruction* a = Gte(bb, p, 1);
    Instruction* other_in = Gte(bb, p, 2);
    Instruction* sum = Gte(bb, p, 3);
    Instruction* mine = bb.TileIndices(s.tile_assignment())[d];
    Instruction* idx = bb.Binary(Opcode::kRemainder, bb.Binary(Opcode::kAdd, mine, i),
                                 bb.ScalarS32(k));
    Instruction* offset = bb.Binary(Opcode::kMultiply, idx, bb.ScalarS32(t));
    Instruction* other_block = other_in;
    if (e >= 0) {
      std::vector<Instruction*> starts(other_in->shape().rank(), bb.ScalarS32(0));
      starts[e] = offset;
      std::vector<int64_t> sizes = other_in->shape().dimensions();
      sizes[e] = t;
      other_block = bb.DynamicSlice(other_in, starts, sizes);
    }
    Instruction* l = gathered == 0 ? a : other_block;
    Instruction* r = gathered == 0 ? other_block : a;
    auto dot = std::make_unique<Instruction>(
        instr.opcode(), b.module()->UniqueInstructionName(instr.name() + ".window"),
        Shape(out_type, block_dims));
    dot->mutable_attrs() = instr.attrs();
    dot->set_loc(instr.loc());
    dot->AppendOperand(l);
    dot->AppendOperand(r);
    Instruction* block = bb.AddInstruction(std::move(dot));
    Instruction* next_sum;
    if (o >= 0) {
      std::vector<Instruction*> operands = {sum, block};
      for (int64_t j = 0; j < static_cast<int64_t>(acc_dims.size()); ++j)
        operands.push_back(j == o ? offset : bb.ScalarS32(0));
      next_sum = bb.Add(Opcode::kDynamicUpdateSlice, sum->shape(), operands);
    } else {
      next_sum = bb.Binary(Opcode::kAdd, sum, block);
    }
    Instruction* next_a = bb.CollectivePermute(a, pairs);
    Instruction* next_i = bb.Binary(Opcode::kAdd, i, bb.ScalarS32(1));
    body->set_root(bb.Add(Opcode::kTuple, state_shape, {next_i, next_a, other_in, next_sum}));
  }
  Instruction* loop = b.Add(Opcode::kWhile, state_shape, {init}, instr.name() + ".windowed");
  loop->set_called_computations({cond.get(), body.get()});
  ctx.shared().computations.push_back(std::move(cond));
  ctx.shared().computations.push_back(std::move(body));
  Instruction* result = Gte(b, loop, 3);
  if (o >= 0 && acc_dims[o] != local_out.dimensions(o)) {
    std::vector<int64_t> starts(acc_dims.size(), 0);
    result = b.Slice(result, starts, local_out.dimensions());
  }
  return result;
}

}  // namespace meshsplit::spmd

namespace meshsplit {

int64_t& DefaultWindowedEinsumThresholdBytes() {
  static int64_t threshold = -1;
  return threshold;
}

}  // namespace meshsplit
