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
#include <map>
#include <optional>
#include <set>

#include "partitioner/handlers/dot_plan.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {
namespace {

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

// The loop's initial state: a tuple of `state`, whose shape is the loop's.
Instruction* StateTuple(SpmdBuilder& b, const std::vector<Instruction*>& state) {
  std::vector<Shape> shapes;
  for (Instruction* v : state) shapes.push_back(v->shape());
  return b.Add(Opcode::kTuple, Shape::Tuple(shapes), state);
}

// The loop condition "state[0] < limit" over a state of `state_shape`.
std::unique_ptr<Computation> CounterBelow(SpmdContext& ctx, const Instruction& instr,
                                          const Shape& state_shape, int64_t limit) {
  auto cond = std::make_unique<Computation>(ctx.shared().ComputationName(instr.name() + ".window_cond"));
  SpmdBuilder cb(&ctx.b.state(), cond.get());
  Instruction* p = Parameter(cb, state_shape);
  Instruction* counter = Gte(cb, p, 0);
  cond->set_root(cb.Compare(counter, cb.ScalarS32(limit), ComparisonDirection::kLt));
  return cond;
}

// The while loop over `init`; the module takes over `cond` and `body`.
Instruction* WhileLoop(SpmdContext& ctx, const Instruction& instr, Instruction* init,
                       std::unique_ptr<Computation> cond, std::unique_ptr<Computation> body) {
  Instruction* loop = ctx.b.Add(Opcode::kWhile, init->shape(), {init}, instr.name() + ".windowed");
  loop->set_called_computations({cond.get(), body.get()});
  ctx.shared().computations.push_back(std::move(cond));
  ctx.shared().computations.push_back(std::move(body));
  return loop;
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
  const std::vector<int64_t> tt = TileDims(target, rank);
  int64_t d = -1;
  for (int64_t i = 0; i < rank; ++i) {
    if (s.TileDim(i) > 1 && tt[i] == 1) {
      if (d >= 0) return nullptr;
      d = i;
    }
  }
  if (d < 0 || PartiallyReplicateTiledShardingOnDims(s, {d}) != target) return nullptr;
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

  const int64_t k = s.TileDim(d);
  // Bidirectional: shards travel both ways, two per iteration; a ring of
  // odd size would visit one shard twice, so it stays one-way.
  const bool both_ways = ctx.options.bidirectional_windowed_einsum && k % 2 == 0 && k > 2;
  const int64_t iterations = both_ways ? k / 2 : k;
  if (ctx.options.max_windowed_einsum_iterations >= 0 &&
      iterations > ctx.options.max_windowed_einsum_iterations)
    return nullptr;

  SpmdBuilder& b = ctx.b;
  const PartitionedValue other = make_other();
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

  // Device j of each ring receives from device j+1 (`from_next`), so in
  // iteration i it holds the shard of ring position (j + i) mod k. Both
  // ways, a second shard comes from device j-1 (`from_prev`), starting one
  // step ahead: position (j - 1 - i) mod k.
  std::vector<std::pair<int64_t, int64_t>> from_next, from_prev;
  for (const std::vector<int64_t>& ring : rings)
    for (int64_t j = 0; j < k; ++j) {
      from_next.push_back({ring[(j + 1) % k], ring[j]});
      from_prev.push_back({ring[(j + k - 1) % k], ring[j]});
    }
  std::vector<Instruction*> state = {zero_i, shard, other_hlo, acc};
  if (both_ways) state.push_back(b.CollectivePermute(shard, from_prev));
  Instruction* init = StateTuple(b, state);
  const Shape& state_shape = init->shape();

  std::unique_ptr<Computation> cond = CounterBelow(ctx, instr, state_shape, iterations);
  // Body: contract the held shard(s), place or add their blocks, pass them on.
  auto body = std::make_unique<Computation>(ctx.shared().ComputationName(instr.name() + ".window_body"));
  {
    SpmdBuilder bb(&b.state(), body.get());
    Instruction* p = Parameter(bb, state_shape);
    Instruction* i = Gte(bb, p, 0);
    Instruction* a = Gte(bb, p, 1);
    Instruction* other_in = Gte(bb, p, 2);
    Instruction* sum = Gte(bb, p, 3);
    Instruction* mine = bb.TileIndices(s.tile_assignment())[d];
    // The block of the shard at ring position `idx`, placed or added.
    auto contract = [&](Instruction* held, Instruction* idx, Instruction* running) {
      Instruction* offset = bb.Binary(Opcode::kMultiply, idx, bb.ScalarS32(t));
      Instruction* other_block = other_in;
      if (e >= 0) {
        std::vector<Instruction*> starts(other_in->shape().rank(), bb.ScalarS32(0));
        starts[e] = offset;
        std::vector<int64_t> sizes = other_in->shape().dimensions();
        sizes[e] = t;
        other_block = bb.DynamicSlice(other_in, starts, sizes);
      }
      Instruction* l = gathered == 0 ? held : other_block;
      Instruction* r = gathered == 0 ? other_block : held;
      auto dot = std::make_unique<Instruction>(
          instr.opcode(), b.module()->UniqueInstructionName(instr.name() + ".window"),
          Shape(out_type, block_dims));
      dot->mutable_attrs() = instr.attrs();
      dot->set_loc(instr.loc());
      dot->AppendOperand(l);
      dot->AppendOperand(r);
      Instruction* block = bb.AddInstruction(std::move(dot));
      if (o < 0) return bb.Binary(Opcode::kAdd, running, block);
      std::vector<Instruction*> operands = {running, block};
      for (int64_t j = 0; j < static_cast<int64_t>(acc_dims.size()); ++j)
        operands.push_back(j == o ? offset : bb.ScalarS32(0));
      return bb.Add(Opcode::kDynamicUpdateSlice, running->shape(), operands);
    };
    // One instruction per statement, so the emitted order does not depend on
    // the compiler's argument-evaluation order.
    Instruction* mine_plus_i = bb.Binary(Opcode::kAdd, mine, i);
    Instruction* k_const = bb.ScalarS32(k);
    Instruction* idx = bb.Binary(Opcode::kRemainder, mine_plus_i, k_const);
    Instruction* next_sum = contract(a, idx, sum);
    Instruction* next_i = bb.Binary(Opcode::kAdd, i, bb.ScalarS32(1));
    std::vector<Instruction*> next = {next_i, bb.CollectivePermute(a, from_next), other_in};
    if (both_ways) {
      Instruction* back = Gte(bb, p, 4);
      Instruction* k_minus_1 = bb.ScalarS32(k - 1);
      Instruction* shifted = bb.Binary(Opcode::kAdd, mine, k_minus_1);
      Instruction* back_pos = bb.Binary(Opcode::kSubtract, shifted, i);
      Instruction* back_idx = bb.Binary(Opcode::kRemainder, back_pos, bb.ScalarS32(k));
      next_sum = contract(back, back_idx, next_sum);
      next.push_back(next_sum);
      next.push_back(bb.CollectivePermute(back, from_prev));
    } else {
      next.push_back(next_sum);
    }
    body->set_root(bb.Add(Opcode::kTuple, state_shape, next));
  }
  Instruction* loop = WhileLoop(ctx, instr, init, std::move(cond), std::move(body));
  Instruction* result = Gte(b, loop, 3);
  if (o >= 0 && acc_dims[o] != local_out.dimensions(o)) {
    std::vector<int64_t> starts(acc_dims.size(), 0);
    result = b.Slice(result, starts, local_out.dimensions());
  }
  return result;
}

// The reduce-scatter loop. The plain form contracts the whole local
// operands into partial sums of the whole (local) result and
// reduce-scatters them over the ring of partitions that hold partial sums
// of the same block; here the running sum of one result block travels the
// ring instead: in step i device j adds its contribution to block
// (j + i + 1) mod k and passes the sum to device j - 1, so after k steps
// device j holds the complete block j. Both ways, a second sum per block
// travels the other way and each collects half of the contributions (k/2
// steps). Each step contracts only the slices of the operands that reach
// its block, so the whole partial result is never materialized.
Instruction* TryWindowedReduceScatter(SpmdContext& ctx, const Instruction& instr,
                                      const ContractionSpace& space, const PartitionedValue& lhs,
                                      const PartitionedValue& rhs, const Sharding& partial,
                                      const Sharding& out_sharding) {
  const PartitionOptions& opts = ctx.options;
  if (!opts.windowed_einsum_reduce_scatter || opts.windowed_einsum_threshold_bytes < 0)
    return nullptr;
  if (instr.opcode() != Opcode::kDot) return nullptr;
  const Sharding out = NormalizeForPartitioning(out_sharding);
  if (!out.IsTiled() || HasUnreduced(out) || out.HasManualSubgroup()) return nullptr;
  const int64_t rank = instr.shape().rank();
  // The partial sums' layout as a tile assignment with an unreduced
  // subgroup dim `u` ({unreduced} alone: every partition, in id order).
  TileAssignment pta;
  int64_t u = -1;
  if (partial.IsTiled() && !partial.HasManualSubgroup() && partial.TiledDataRank() == rank) {
    u = partial.SubgroupDim(SubgroupType::kUnreduced);
    pta = partial.tile_assignment();
  } else if (partial.IsUnreduced() && !partial.IsTuple()) {
    std::vector<int64_t> dims(rank, 1);
    dims.push_back(ctx.num_partitions);
    pta = TileAssignment::Iota(dims);
    u = rank;
  }
  if (u < 0) return nullptr;
  const int64_t k = pta.dim(u);
  if (k < 2 || out.TiledDataRank() != rank) return nullptr;
  // Both ways: two running sums per block, one travelling each way, each
  // collecting half of the ring's contributions (rings of even size > 2).
  const bool both_ways = opts.bidirectional_windowed_einsum && k % 2 == 0 && k > 2;
  const int64_t m = both_ways ? k / 2 : k;  // contributions per running sum
  if (opts.max_windowed_einsum_iterations >= 0 && m > opts.max_windowed_einsum_iterations)
    return nullptr;
  // The result dim the sums are scattered over: out tiles it k ways, the
  // partial sums not at all, every other dim alike.
  int64_t o = -1;
  for (int64_t i = 0; i < rank; ++i) {
    if (out.TileDim(i) == pta.dim(i)) continue;
    if (o >= 0 || pta.dim(i) != 1 || out.TileDim(i) != k) return nullptr;
    o = i;
  }
  if (o < 0) return nullptr;
  // Device by device: out's tile index is the partial tile's index with the
  // unreduced position as the index along o (so block j of a ring belongs
  // to its member j).
  const std::vector<int64_t> devices = pta.Devices();
  if (static_cast<int64_t>(devices.size()) != out.tile_assignment().num_devices()) return nullptr;
  for (int64_t dev : devices) {
    std::optional<std::vector<int64_t>> pi = pta.IndexOfDevice(dev);
    std::optional<std::vector<int64_t>> oi = out.TileIndexForDevice(dev);
    if (!pi || !oi) return nullptr;
    for (int64_t i = 0; i < rank; ++i)
      if ((*oi)[i] != (i == o ? (*pi)[u] : (*pi)[i])) return nullptr;
  }
  if (LocalShape(instr.shape(), partial).ByteSize() <= opts.windowed_einsum_threshold_bytes)
    return nullptr;
  const int64_t it = space.out_to_iter[o];
  const int64_t n = instr.shape().dimensions(o);
  const int64_t t = CeilDiv(n, k);

  SpmdBuilder& b = ctx.b;
  SpmdBuilder::ScopedCause rule(b, instr, "windowed einsum: reduce-scatter loop");
  // Operands padded with zeros to whole blocks along the scattered dim
  // (every operand dim that maps to it: a free dim, or a batch dim of both).
  auto pad = [&](Instruction* x, const std::vector<int64_t>& to_iter) {
    std::vector<int64_t> high(x->shape().rank(), 0);
    bool any = false;
    for (int64_t i = 0; i < x->shape().rank(); ++i)
      if (to_iter[i] == it) {
        high[i] = k * t - x->shape().dimensions(i);
        any |= high[i] != 0;
      }
    return any ? b.PadHigh(x, high) : x;
  };
  Instruction* l0 = pad(lhs.hlo, space.lhs_to_iter);
  Instruction* r0 = pad(rhs.hlo, space.rhs_to_iter);
  const PrimitiveType out_type = instr.shape().element_type();
  std::vector<int64_t> block_dims = LocalShape(instr.shape(), partial).dimensions();
  block_dims[o] = t;

  // The contribution of this device's operands to block `idx`.
  auto contribution = [&](SpmdBuilder& bb, Instruction* l, Instruction* r, Instruction* idx) {
    Instruction* offset = bb.Binary(Opcode::kMultiply, idx, bb.ScalarS32(t));
    auto slice = [&](Instruction* x, const std::vector<int64_t>& to_iter) {
      std::vector<Instruction*> starts(x->shape().rank(), bb.ScalarS32(0));
      std::vector<int64_t> sizes = x->shape().dimensions();
      bool any = false;
      for (int64_t i = 0; i < x->shape().rank(); ++i)
        if (to_iter[i] == it) {
          starts[i] = offset;
          sizes[i] = t;
          any = true;
        }
      return any ? bb.DynamicSlice(x, starts, sizes) : x;
    };
    auto dot = std::make_unique<Instruction>(
        instr.opcode(), b.module()->UniqueInstructionName(instr.name() + ".window"),
        Shape(out_type, block_dims));
    dot->mutable_attrs() = instr.attrs();
    dot->set_loc(instr.loc());
    dot->AppendOperand(slice(l, space.lhs_to_iter));
    dot->AppendOperand(slice(r, space.rhs_to_iter));
    return bb.AddInstruction(std::move(dot));
  };
  // Rings: the partitions holding partial sums of one block, in unreduced
  // order; device j receives the running sum from device j + 1.
  std::map<std::vector<int64_t>, std::vector<int64_t>> rings;
  for (int64_t dev : devices) {
    std::vector<int64_t> index = *pta.IndexOfDevice(dev);
    const int64_t pos = index[u];
    index[u] = 0;
    std::vector<int64_t>& ring = rings[index];
    ring.resize(k, -1);
    ring[pos] = dev;
  }
  std::vector<std::pair<int64_t, int64_t>> from_next, from_prev;
  for (const auto& [key, ring] : rings)
    for (int64_t j = 0; j < k; ++j) {
      from_next.push_back({ring[(j + 1) % k], ring[j]});
      from_prev.push_back({ring[(j + k - 1) % k], ring[j]});
    }
  // Block (mine + shift ± step) mod k; shifts keep the sum non-negative.
  auto block_index = [&](SpmdBuilder& bb, Instruction* step, int64_t shift, bool minus) {
    Instruction* mine = bb.TileIndices(pta)[u];
    Instruction* base = bb.Binary(Opcode::kAdd, mine, bb.ScalarS32(shift));
    Instruction* at = bb.Binary(minus ? Opcode::kSubtract : Opcode::kAdd, base, step);
    return bb.Binary(Opcode::kRemainder, at, bb.ScalarS32(k));
  };
  // Step i = 0 .. m-1 at partition j: the forward sum (received from j+1)
  // is block (j + i + 1 - m) mod k: the sum of block b visits partitions
  // b+m-1 down to b and ends at its owner. The backward sum (received from
  // j-1) is block (j - i + m) mod k: it visits b-m up to b-1 and reaches
  // the owner with one more pass after the last step. One way, m = k and
  // the forward sum visits the whole ring.
  // Steps 0 .. m-2 run in the loop (add, pass on), step m-1 after it.
  const int64_t fwd_shift = k + 1 - m, bwd_shift = k + m;
  Instruction* acc = b.BroadcastScalar(b.Zero(out_type), block_dims);
  Instruction* zero_i = b.ScalarS32(0);
  std::vector<Instruction*> state = {zero_i, l0, r0, acc};
  if (both_ways) state.push_back(acc);
  Instruction* init = StateTuple(b, state);
  const Shape& state_shape = init->shape();
  std::unique_ptr<Computation> cond = CounterBelow(ctx, instr, state_shape, m - 1);
  auto body = std::make_unique<Computation>(ctx.shared().ComputationName(instr.name() + ".window_body"));
  {
    SpmdBuilder bb(&b.state(), body.get());
    Instruction* p = Parameter(bb, state_shape);
    Instruction* step = Gte(bb, p, 0);
    Instruction* l = Gte(bb, p, 1);
    Instruction* r = Gte(bb, p, 2);
    // (Each contribution is emitted before the sum it joins, so the text
    // order does not depend on argument evaluation order.)
    Instruction* fwd_part = contribution(bb, l, r, block_index(bb, step, fwd_shift, false));
    Instruction* fwd = bb.Binary(Opcode::kAdd, Gte(bb, p, 3), fwd_part);
    Instruction* next_step = bb.Binary(Opcode::kAdd, step, bb.ScalarS32(1));
    std::vector<Instruction*> next = {next_step, l, r, bb.CollectivePermute(fwd, from_next)};
    if (both_ways) {
      Instruction* bwd_part = contribution(bb, l, r, block_index(bb, step, bwd_shift, true));
      Instruction* bwd = bb.Binary(Opcode::kAdd, Gte(bb, p, 4), bwd_part);
      next.push_back(bb.CollectivePermute(bwd, from_prev));
    }
    body->set_root(bb.Add(Opcode::kTuple, state_shape, next));
  }
  Instruction* loop = WhileLoop(ctx, instr, init, std::move(cond), std::move(body));
  // Step m-1: the forward sum's block is this partition's own.
  Instruction* last_step = b.ScalarS32(m - 1);
  Instruction* fwd_part = contribution(b, l0, r0, block_index(b, last_step, fwd_shift, false));
  Instruction* result = b.Binary(Opcode::kAdd, Gte(b, loop, 3), fwd_part);
  if (both_ways) {
    Instruction* bwd_part = contribution(b, l0, r0, block_index(b, last_step, bwd_shift, true));
    Instruction* bwd = b.Binary(Opcode::kAdd, Gte(b, loop, 4), bwd_part);
    result = b.Binary(Opcode::kAdd, result, b.CollectivePermute(bwd, from_prev));
  }
  return result;
}

}  // namespace meshsplit::spmd
