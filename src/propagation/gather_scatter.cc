// Gather and scatter rules: pass-through dims (operand dims sliced whole),
// index pass-through dims (indices batch dims <-> output batch dims), explicit
// batching dims, and implicit parallel dims found from iota-built indices.

#include "ir/computation.h"
#include "propagation/propagator.h"
#include "support/small_helpers.h"

namespace meshsplit::propagation {

namespace {

struct GSDims {
  std::vector<int64_t> operand_dims, indices_dims, output_dims;
  void Append(const GSDims& o) {
    operand_dims.insert(operand_dims.end(), o.operand_dims.begin(), o.operand_dims.end());
    indices_dims.insert(indices_dims.end(), o.indices_dims.begin(), o.indices_dims.end());
    output_dims.insert(output_dims.end(), o.output_dims.begin(), o.output_dims.end());
  }
};

// Output (or update) batch dim of each indices dim in `indices_dims`.
void FillOutputDims(GSDims* d, int64_t index_vector_dim, int64_t output_rank,
                    const std::vector<int64_t>& offset_dims) {
  std::vector<int64_t> batch_out;
  for (int64_t o = 0; o < output_rank; ++o)
    if (!Contains(offset_dims, o)) batch_out.push_back(o);
  d->output_dims.clear();
  for (int64_t i : d->indices_dims) {
    int64_t r = i < index_vector_dim ? i : i - 1;
    d->output_dims.push_back(r >= 0 && r < (int64_t)batch_out.size() ? batch_out[r] : -1);
  }
}

GSDims ConnectedIndicesAndOutput(int64_t indices_rank, int64_t index_vector_dim,
                                 int64_t output_rank,
                                 const std::vector<int64_t>& offset_dims) {
  GSDims r;
  for (int64_t o = 0, i = 0; o < output_rank; ++o) {
    if (Contains(offset_dims, o)) continue;
    if (i == index_vector_dim) ++i;
    if (i >= indices_rank) break;
    r.indices_dims.push_back(i);
    r.output_dims.push_back(o);
    ++i;
  }
  return r;
}

GSDims OperandPassthroughDims(const Shape& operand,
                              const std::vector<int64_t>& collapsed,
                              const std::vector<int64_t>& batching,
                              const std::vector<int64_t>& offset_dims,
                              const std::vector<int64_t>& slice_sizes) {
  GSDims r;
  int64_t skipped = 0;
  for (int64_t i = 0; i < operand.rank(); ++i) {
    if (Contains(collapsed, i) || Contains(batching, i)) {
      ++skipped;
      continue;
    }
    if (i >= (int64_t)slice_sizes.size() || slice_sizes[i] != operand.dimensions(i))
      continue;
    if (i - skipped >= (int64_t)offset_dims.size()) continue;
    r.operand_dims.push_back(i);
    r.output_dims.push_back(offset_dims[i - skipped]);
  }
  return r;
}

std::vector<int64_t> ScatterSliceSizes(const Shape& operand, const Shape& update,
                                       const ScatterDimensionNumbers& dn) {
  std::vector<int64_t> sizes(operand.rank(), 1);
  size_t k = 0;
  for (int64_t i = 0; i < operand.rank(); ++i) {
    if (Contains(dn.inserted_window_dims, i) || Contains(dn.input_batching_dims, i))
      continue;
    if (k < dn.update_window_dims.size())
      sizes[i] = update.dimensions(dn.update_window_dims[k++]);
  }
  return sizes;
}

// The dimension along which `v` counts 0,1,2,... (an iota, possibly
// broadcast, or a loop-invariant tuple element fed by one), if any.
std::optional<int64_t> IotaDimension(Propagator& p, const Instruction* v) {
  if (v->opcode() == Opcode::kIota) return v->attrs().iota_dimension;
  if (v->shape().element_type() != PrimitiveType::S32) return std::nullopt;
  if (v->opcode() == Opcode::kConstant && v->has_literal() && v->shape().IsArray()) {
    // A constant counts along dim d if every element equals its index in d.
    const Shape& shape = v->shape();
    const int rank = shape.rank();
    std::vector<bool> is_iota(rank, true);
    std::vector<int64_t> idx(rank, 0);
    const int64_t n = shape.ElementCount();
    for (int64_t k = 0; k < n; ++k) {
      const int64_t val = v->literal().GetInt(k);
      for (int d = 0; d < rank; ++d)
        if (val != idx[d]) is_iota[d] = false;
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[d] < shape.dimensions(d)) break;
        idx[d] = 0;
      }
    }
    for (int d = 0; d < rank; ++d)
      if (is_iota[d] && shape.dimensions(d) > 1) return d;
    return std::nullopt;
  }
  if (v->opcode() == Opcode::kBroadcast) {
    auto d = IotaDimension(p, v->operand(0));
    if (d && *d < (int64_t)v->attrs().dimensions.size())
      return v->attrs().dimensions[*d];
    return std::nullopt;
  }
  if (v->opcode() == Opcode::kGetTupleElement &&
      v->operand(0)->opcode() == Opcode::kParameter) {
    const Computation* c = v->parent();
    Instruction* caller = p.Caller(c);
    if (caller == nullptr) return std::nullopt;
    const int64_t idx = v->attrs().tuple_index;
    if (caller->opcode() == Opcode::kWhile &&
        caller->operand(0)->opcode() == Opcode::kTuple &&
        caller->while_body() == c) {
      const Instruction* root = c->root();
      if (root->opcode() == Opcode::kTuple && idx < root->operand_count() &&
          root->operand(idx) == v)
        return IotaDimension(p, caller->operand(0)->operand(idx));
    }
    if (caller->opcode() == Opcode::kConditional) {
      const auto& cs = caller->called_computations();
      for (size_t i = 0; i < cs.size(); ++i) {
        if (cs[i] != c) continue;
        const Instruction* arg = caller->operand(i + 1);
        if (arg->opcode() == Opcode::kTuple && idx < arg->operand_count())
          return IotaDimension(p, arg->operand(idx));
      }
    }
  }
  return std::nullopt;
}

std::optional<GSDims> BatchParallelDims(Propagator& p, const Instruction* operand,
                                        const Instruction* indices,
                                        const std::vector<int64_t>& slice_sizes,
                                        int64_t index_vector_dim,
                                        const std::vector<int64_t>& index_map,
                                        const std::vector<int64_t>& indices_batching,
                                        const std::vector<int64_t>& offset_dims,
                                        int64_t output_rank) {
  std::vector<int64_t> parallel_in_dim(index_map.size(), -1);
  const Instruction* orig = indices;
  while (indices->opcode() == Opcode::kCopy) indices = indices->operand(0);
  if (indices->opcode() != Opcode::kConcatenate) indices = orig;
  const int64_t irank = indices->shape().rank();
  if (indices->opcode() == Opcode::kConcatenate &&
      !indices->attrs().dimensions.empty() &&
      indices->attrs().dimensions[0] == index_vector_dim) {
    int64_t done = 0;
    for (const Instruction* op : indices->operands()) {
      const int64_t n = op->shape().rank() > index_vector_dim
                            ? op->shape().dimensions(index_vector_dim)
                            : 1;
      if (auto d = IotaDimension(p, op))
        if (*d != index_vector_dim)
          for (int64_t j = 0; j < n && done + j < (int64_t)parallel_in_dim.size(); ++j)
            parallel_in_dim[done + j] = *d;
      done += n;
    }
  } else if (auto d = IotaDimension(p, indices)) {
    if (*d != index_vector_dim) {
      const int64_t n = irank > index_vector_dim
                            ? indices->shape().dimensions(index_vector_dim)
                            : 1;
      parallel_in_dim.assign(n, *d);
    }
  }
  GSDims r;
  for (size_t i = 0; i < parallel_in_dim.size() && i < index_map.size(); ++i) {
    const int64_t idim = parallel_in_dim[i];
    const int64_t odim = index_map[i];
    if (idim == -1) continue;
    if (Contains(r.indices_dims, idim)) return std::nullopt;
    if (odim < (int64_t)slice_sizes.size() && slice_sizes[odim] == 1 &&
        !Contains(indices_batching, idim)) {
      if (idim >= irank ||
          operand->shape().dimensions(odim) != indices->shape().dimensions(idim))
        return std::nullopt;
      r.indices_dims.push_back(idim);
      r.operand_dims.push_back(odim);
    }
  }
  if (r.indices_dims.empty()) return std::nullopt;
  FillOutputDims(&r, index_vector_dim, output_rank, offset_dims);
  return r;
}

std::optional<GSDims> GatherParallelDims(Propagator& p, const Instruction* g) {
  const auto& dn = *g->attrs().gather_dnums;
  return BatchParallelDims(p, g->operand(0), g->operand(1), g->attrs().gather_slice_sizes,
                           dn.index_vector_dim, dn.start_index_map,
                           dn.start_indices_batching_dims, dn.offset_dims,
                           g->shape().rank());
}

std::optional<GSDims> ScatterParallelDims(Propagator& p, const Instruction* s) {
  const auto& dn = *s->attrs().scatter_dnums;
  const int n = (s->operand_count() - 1) / 2;
  const Instruction* operand = s->operand(0);
  const Instruction* update = s->operand(n + 1);
  return BatchParallelDims(p, operand, s->operand(n),
                           ScatterSliceSizes(operand->shape(), update->shape(), dn),
                           dn.index_vector_dim, dn.scatter_dims_to_operand_dims,
                           dn.scatter_indices_batching_dims, dn.update_window_dims,
                           update->shape().rank());
}

// Prefers a merge of the two, else the parallel one.
std::optional<Sharding> MergePreferParallel(std::optional<Sharding> parallel,
                                             std::optional<Sharding> passthrough) {
  if (!passthrough) return parallel;
  if (!parallel) return passthrough;
  if (MergeSharding(*parallel, &*passthrough, true)) return passthrough;
  if (MergeSharding(*passthrough, &*parallel, true)) return parallel;
  return parallel;
}

}  // namespace

bool Propagator::InferGatherFromOperands(Instruction* g, bool may_combine) {
  if (!g->attrs().gather_dnums) return false;
  const auto& dn = *g->attrs().gather_dnums;
  const Instruction* operand = g->operand(0);
  const Instruction* indices = g->operand(1);
  const int64_t out_rank = g->shape().rank();
  bool changed = false;
  auto parallel_from = [&](const GSDims& d) {
    if (IsSpatiallyPartitionedInstr(operand))
      changed |= MaybeImprove(
          g,
          PropagateShardingAlongDimsAndReplicateOthers(
              Get(operand), d.operand_dims, d.output_dims, out_rank),
          may_combine);
    if (IsSpatiallyPartitionedInstr(indices))
      changed |= MaybeImprove(
          g,
          PropagateShardingAlongDimsAndReplicateOthers(
              Get(indices), d.indices_dims, d.output_dims, out_rank),
          may_combine);
  };
  if (!dn.operand_batching_dims.empty()) {
    GSDims d;
    d.operand_dims = dn.operand_batching_dims;
    d.indices_dims = dn.start_indices_batching_dims;
    FillOutputDims(&d, dn.index_vector_dim, out_rank, dn.offset_dims);
    parallel_from(d);
  }
  if (IsSpatiallyPartitionedInstr(indices)) {
    Sharding s = Get(indices);
    if (s.IsTiled()) {
      GSDims c = ConnectedIndicesAndOutput(indices->shape().rank(),
                                           dn.index_vector_dim, out_rank,
                                           dn.offset_dims);
      s = PropagateShardingAlongDimsAndReplicateOthers(s, c.indices_dims,
                                                       c.output_dims, out_rank);
    }
    changed |= MaybeImprove(g, s, may_combine);
  }
  if (options_.is_spmd) {
    auto parallel = GatherParallelDims(*this, g);
    if (parallel) parallel_from(*parallel);
    if (IsSpatiallyPartitionedInstr(operand)) {
      Sharding filtered = PartiallyReplicateOnDims(
          Get(operand), parallel ? parallel->operand_dims : std::vector<int64_t>{});
      if (filtered.IsTiled()) {
        GSDims pd = OperandPassthroughDims(operand->shape(), dn.collapsed_slice_dims,
                                           dn.operand_batching_dims, dn.offset_dims,
                                           g->attrs().gather_slice_sizes);
        Sharding r = PropagateShardingAlongDimsAndReplicateOthers(
            filtered, pd.operand_dims, pd.output_dims, out_rank);
        if (!r.IsTileMaximal()) changed |= MaybeImprove(g, r, may_combine);
      }
    }
  }
  return changed;
}

std::optional<Sharding> Propagator::GatherOperandFromUser(const Instruction* instr,
                                                           const Instruction* g) {
  if (!g->attrs().gather_dnums) return std::nullopt;
  const auto& dn = *g->attrs().gather_dnums;
  const Sharding& out = Get(g);
  if (instr == g->operand(1)) {
    if (!out.IsTiled()) return out;
    GSDims c = ConnectedIndicesAndOutput(instr->shape().rank(), dn.index_vector_dim,
                                         g->shape().rank(), dn.offset_dims);
    return PropagateShardingAlongDimsAndReplicateOthers(
        out, c.output_dims, c.indices_dims, instr->shape().rank());
  }
  if (!options_.is_spmd) return std::nullopt;
  const int64_t op_rank = g->operand(0)->shape().rank();
  std::optional<Sharding> parallel;
  if (!out.IsTiled()) {
    parallel = out;
  } else {
    GSDims pd;
    if (!dn.operand_batching_dims.empty()) {
      pd.operand_dims = dn.operand_batching_dims;
      pd.indices_dims = dn.start_indices_batching_dims;
      FillOutputDims(&pd, dn.index_vector_dim, g->shape().rank(), dn.offset_dims);
    }
    if (auto implicit = GatherParallelDims(*this, g)) pd.Append(*implicit);
    if (!pd.operand_dims.empty())
      parallel = PropagateShardingAlongDimsAndReplicateOthers(
          out, pd.output_dims, pd.operand_dims, op_rank);
  }
  std::optional<Sharding> passthrough;
  if (!out.IsTiled()) {
    passthrough = out;
  } else {
    GSDims pd = OperandPassthroughDims(g->operand(0)->shape(), dn.collapsed_slice_dims,
                                       dn.operand_batching_dims, dn.offset_dims,
                                       g->attrs().gather_slice_sizes);
    Sharding r = PropagateShardingAlongDimsAndReplicateOthers(
        out, pd.output_dims, pd.operand_dims, op_rank);
    if (!r.IsTileMaximal()) passthrough = r;
  }
  return MergePreferParallel(parallel, passthrough);
}

bool Propagator::InferScatterFromOperands(Instruction* s, bool may_combine) {
  if (!s->attrs().scatter_dnums) return false;
  const auto& dn = *s->attrs().scatter_dnums;
  const int n = (s->operand_count() - 1) / 2;
  const Instruction* indices = s->operand(n);
  const Shape& shape = n == 1 ? s->shape() : s->shape().tuple_shapes(0);
  const int64_t rank = shape.rank();
  bool changed = false;
  auto parallel_from = [&](const GSDims& d) {
    for (int i = 0; i < n; ++i)
      if (IsSpatiallyPartitionedInstr(s->operand(i)))
        changed |= MaybeImproveSub(
            s,
            PropagateShardingAlongDimsAndReplicateOthers(
                Get(s->operand(i)), d.operand_dims, d.operand_dims, rank),
            i, may_combine);
    if (IsSpatiallyPartitionedInstr(indices)) {
      Sharding from_idx = PropagateShardingAlongDimsAndReplicateOthers(
          Get(indices), d.indices_dims, d.operand_dims, rank);
      for (int i = 0; i < n; ++i)
        changed |= MaybeImproveSub(s, from_idx, i, may_combine);
    }
    for (int i = 0; i < n; ++i)
      if (IsSpatiallyPartitionedInstr(s->operand(n + 1 + i)))
        changed |= MaybeImproveSub(s,
                                   PropagateShardingAlongDimsAndReplicateOthers(
                                       Get(s->operand(n + 1 + i)),
                                       d.output_dims, d.operand_dims, rank),
                                   i, may_combine);
  };
  if (!dn.input_batching_dims.empty()) {
    GSDims d;
    d.operand_dims = dn.input_batching_dims;
    d.indices_dims = dn.scatter_indices_batching_dims;
    FillOutputDims(&d, dn.index_vector_dim, s->operand(n + 1)->shape().rank(),
                   dn.update_window_dims);
    parallel_from(d);
  }
  if (!options_.is_spmd) {
    for (int i = 0; i < n; ++i)
      changed |= MaybeImproveSub(s, Sharding::Replicate(), i, may_combine);
    return changed;
  }
  for (int i = 0; i < n; ++i)
    if (IsSpatiallyPartitionedInstr(s->operand(i)))
      changed |= MaybeImproveSub(s, Get(s->operand(i)), i, may_combine);
  bool any_update = false;
  for (int i = 0; i < n; ++i)
    any_update |= IsSpatiallyPartitionedInstr(s->operand(n + 1 + i));
  if (!IsSpatiallyPartitionedInstr(indices) && !any_update) return changed;
  if (auto parallel = ScatterParallelDims(*this, s)) parallel_from(*parallel);
  const Shape& op_shape = s->operand(0)->shape();
  const std::vector<int64_t> slice =
      ScatterSliceSizes(op_shape, s->operand(n + 1)->shape(), dn);
  for (int i = 0; i < n; ++i) {
    const Instruction* u = s->operand(n + 1 + i);
    if (!IsSpatiallyPartitionedInstr(u)) continue;
    const Sharding& us = Get(u);
    std::optional<Sharding> r;
    if (!us.IsTiled()) {
      r = us;
    } else {
      GSDims pd = OperandPassthroughDims(op_shape, dn.inserted_window_dims,
                                         dn.input_batching_dims,
                                         dn.update_window_dims, slice);
      Sharding x = PropagateShardingAlongDimsAndReplicateOthers(
          us, pd.output_dims, pd.operand_dims, rank);
      if (!x.IsTileMaximal()) r = x;
    }
    if (r) changed |= MaybeImproveSub(s, *r, i, may_combine);
  }
  return changed;
}

std::optional<Sharding> Propagator::ScatterOperandFromUser(const Instruction* instr,
                                                            const Instruction* s) {
  if (!s->attrs().scatter_dnums) return std::nullopt;
  const auto& dn = *s->attrs().scatter_dnums;
  const int n = (s->operand_count() - 1) / 2;
  const Sharding& us = Get(s);
  for (int i = 0; i < n; ++i)
    if (s->operand(i) == instr)
      return us.IsTuple() ? GetSubSharding(us, s->shape(), i) : us;
  const Instruction* indices = s->operand(n);
  const int64_t update_rank = s->operand(n + 1)->shape().rank();
  const GSDims c = ConnectedIndicesAndOutput(indices->shape().rank(),
                                             dn.index_vector_dim, update_rank,
                                             dn.update_window_dims);
  if (instr == indices) {
    std::vector<Sharding> shardings;
    for (int i = 0; i < n; ++i) {
      const Instruction* u = s->operand(n + 1 + i);
      if (!IsSpatiallyPartitionedInstr(u)) continue;
      const Sharding& x = Get(u);
      shardings.push_back(
          x.IsTiled()
              ? PropagateShardingAlongDimsAndReplicateOthers(
                    x, c.output_dims, c.indices_dims, indices->shape().rank())
              : x);
    }
    if (shardings.empty()) return std::nullopt;
    return FindCommonSharding(shardings);
  }
  int update_index = -1;
  for (int i = 0; i < n; ++i)
    if (s->operand(n + 1 + i) == instr) update_index = i;
  if (update_index < 0) return std::nullopt;
  Sharding from_indices = Sharding::Replicate();
  if (IsSpatiallyPartitionedInstr(indices)) {
    from_indices = Get(indices);
    if (from_indices.IsTiled())
      from_indices = PropagateShardingAlongDimsAndReplicateOthers(
          from_indices, c.indices_dims, c.output_dims, update_rank);
  }
  if (options_.is_spmd) {
    Sharding out = us.IsTuple() ? GetSubSharding(us, s->shape(), update_index) : us;
    const Shape& op_shape = s->operand(0)->shape();
    std::optional<Sharding> parallel, passthrough;
    if (!out.IsTiled()) {
      parallel = out;
    } else {
      GSDims pd;
      if (!dn.input_batching_dims.empty()) {
        pd.operand_dims = dn.input_batching_dims;
        pd.indices_dims = dn.scatter_indices_batching_dims;
        FillOutputDims(&pd, dn.index_vector_dim, update_rank, dn.update_window_dims);
      }
      if (auto implicit = ScatterParallelDims(*this, s)) pd.Append(*implicit);
      if (!pd.operand_dims.empty())
        parallel = PropagateShardingAlongDimsAndReplicateOthers(
            out, pd.operand_dims, pd.output_dims, update_rank);
      GSDims pt = OperandPassthroughDims(
          op_shape, dn.inserted_window_dims, dn.input_batching_dims,
          dn.update_window_dims,
          ScatterSliceSizes(op_shape, s->operand(n + 1)->shape(), dn));
      Sharding x = PropagateShardingAlongDimsAndReplicateOthers(
          out, pt.operand_dims, pt.output_dims, update_rank);
      if (!x.IsTileMaximal()) passthrough = x;
    }
    auto from_output = MergePreferParallel(parallel, passthrough);
    if (from_output) {
      if (!from_output->IsManual()) MergeShardingIfCompatible(from_indices, &*from_output);
      if (!from_output->IsTileMaximal()) return from_output;
    }
  }
  if (!from_indices.IsTileMaximal()) return from_indices;
  return std::nullopt;
}

}  // namespace meshsplit::propagation
