// gather and scatter with XLA's full dimension numbers, including batching
// dimensions (operand_batching_dims / input_batching_dims). Gather clamps its
// start indices so the slice fits; scatter skips an update window that does
// not fit entirely, and applies to_apply to updates in row-major update order.
#include <algorithm>
#include <cstring>

#include "runtime/kernels.h"
#include "support/small_helpers.h"

namespace meshsplit::interp {
namespace {

// Reads the index vector for one batch position of `indices`. `batch` holds
// the coordinates of the indices array without index_vector_dim.
void ReadIndexVector(const Literal& indices, int64_t index_vector_dim,
                     const std::vector<int64_t>& batch, int64_t count, std::vector<int64_t>& out) {
  const auto& dims = indices.shape().dimensions();
  std::vector<int64_t> strides = RowMajorStrides(dims);
  int64_t base = 0;
  int r = static_cast<int>(dims.size());
  for (int d = 0, j = 0; d < r; ++d) {
    if (d == index_vector_dim) continue;
    base += batch[j++] * strides[d];
  }
  int64_t step = index_vector_dim < r ? strides[index_vector_dim] : 0;
  out.resize(count);
  for (int64_t i = 0; i < count; ++i) out[i] = indices.GetInt(base + i * step);
}

std::vector<int64_t> BatchDimsOfIndices(const Literal& indices, int64_t index_vector_dim) {
  std::vector<int64_t> dims;
  const auto& d = indices.shape().dimensions();
  for (int i = 0; i < static_cast<int>(d.size()); ++i)
    if (i != index_vector_dim) dims.push_back(d[i]);
  return dims;
}

}  // namespace

StatusOr<Literal> EvalGather(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (!instr.attrs().gather_dnums) return InstrError(instr, "gather needs dimension numbers");
  const GatherDimensionNumbers& dn = *instr.attrs().gather_dnums;
  const Literal& operand = k.op(0);
  const Literal& indices = k.op(1);
  if (!IsInteger(indices.element_type())) return InstrError(instr, "gather indices must be integers");
  const auto& od = operand.shape().dimensions();
  int orank = static_cast<int>(od.size());
  const auto& slice = instr.attrs().gather_slice_sizes;
  if (static_cast<int>(slice.size()) != orank)
    return InstrError(instr, "slice_sizes has " + std::to_string(slice.size()) + " entries for operand rank " +
                                 std::to_string(orank));
  int irank = indices.shape().rank();
  if (dn.index_vector_dim < 0 || dn.index_vector_dim > irank)
    return InstrError(instr, "index_vector_dim out of range");
  int64_t nidx = dn.index_vector_dim < irank ? indices.shape().dimensions(dn.index_vector_dim) : 1;
  if (nidx != static_cast<int64_t>(dn.start_index_map.size()))
    return InstrError(instr, "index vector length " + std::to_string(nidx) + " differs from start_index_map");
  for (int64_t d : dn.start_index_map)
    if (d < 0 || d >= orank) return InstrError(instr, "start_index_map entry out of range");
  for (int d = 0; d < orank; ++d)
    if (slice[d] < 0 || slice[d] > od[d]) return InstrError(instr, "slice size exceeds the operand in dimension " + std::to_string(d));
  if (dn.operand_batching_dims.size() != dn.start_indices_batching_dims.size())
    return InstrError(instr, "operand_batching_dims and start_indices_batching_dims differ in length");
  // Operand dims that appear in the output as offset dims, in order.
  std::vector<int64_t> window_operand_dims;
  for (int d = 0; d < orank; ++d)
    if (!Contains(dn.collapsed_slice_dims, d) && !Contains(dn.operand_batching_dims, d))
      window_operand_dims.push_back(d);
  const auto& out_dims = instr.shape().dimensions();
  int out_rank = static_cast<int>(out_dims.size());
  if (window_operand_dims.size() != dn.offset_dims.size())
    return InstrError(instr, "offset_dims does not match the non-collapsed slice dimensions");
  std::vector<int64_t> ibatch = BatchDimsOfIndices(indices, dn.index_vector_dim);
  if (out_rank != static_cast<int>(ibatch.size() + dn.offset_dims.size()))
    return InstrError(instr, "gather result rank " + std::to_string(out_rank) + " is inconsistent");
  // Batch positions of the indices (without index_vector_dim) correspond to
  // the output's non-offset dims, in order. For batching dims we need to know
  // which batch position a start_indices dim becomes.
  auto indices_dim_to_batch_pos = [&](int64_t d) {
    return d < dn.index_vector_dim ? d : d - 1;
  };
  std::vector<int64_t> out_batch_dims;
  for (int d = 0; d < out_rank; ++d)
    if (!Contains(dn.offset_dims, d)) out_batch_dims.push_back(d);
  for (size_t j = 0; j < out_batch_dims.size(); ++j)
    if (out_dims[out_batch_dims[j]] != ibatch[j]) return InstrError(instr, "gather batch dimension sizes differ from the indices");
  for (size_t j = 0; j < dn.offset_dims.size(); ++j)
    if (dn.offset_dims[j] < 0 || dn.offset_dims[j] >= out_rank ||
        out_dims[dn.offset_dims[j]] != slice[window_operand_dims[j]])
      return InstrError(instr, "gather offset dimension sizes differ from slice_sizes");
  for (size_t j = 0; j < dn.operand_batching_dims.size(); ++j) {
    int64_t od_j = dn.operand_batching_dims[j], id_j = dn.start_indices_batching_dims[j];
    if (od_j < 0 || od_j >= orank || id_j < 0 || id_j >= irank || id_j == dn.index_vector_dim)
      return InstrError(instr, "batching dimension out of range");
  }
  Literal out(instr.shape());
  if (out.element_type() != operand.element_type()) return InstrError(instr, "gather changes the element type");
  int64_t elem = ByteWidth(operand.element_type());
  std::vector<int64_t> ostrides = RowMajorStrides(od);
  std::vector<int64_t> oidx(out_rank, 0), batch(ibatch.size()), ivec, start(orank);
  int64_t total = out.element_count();
  for (int64_t e = 0; e < total; ++e, NextIndex(oidx, out_dims)) {
    for (size_t j = 0; j < out_batch_dims.size(); ++j) batch[j] = oidx[out_batch_dims[j]];
    ReadIndexVector(indices, dn.index_vector_dim, batch, nidx, ivec);
    std::fill(start.begin(), start.end(), 0);
    for (int64_t i = 0; i < nidx; ++i) {
      int64_t d = dn.start_index_map[i];
      start[d] = std::clamp<int64_t>(ivec[i], 0, od[d] - slice[d]);
    }
    for (size_t j = 0; j < dn.operand_batching_dims.size(); ++j)
      start[dn.operand_batching_dims[j]] = batch[indices_dim_to_batch_pos(dn.start_indices_batching_dims[j])];
    int64_t off = 0;
    for (int d = 0; d < orank; ++d) off += start[d] * ostrides[d];
    for (size_t j = 0; j < window_operand_dims.size(); ++j)
      off += oidx[dn.offset_dims[j]] * ostrides[window_operand_dims[j]];
    std::memcpy(out.raw() + e * elem, operand.raw() + off * elem, elem);
  }
  return out;
}

StatusOr<Literal> EvalScatter(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (!instr.attrs().scatter_dnums) return InstrError(instr, "scatter needs dimension numbers");
  const ScatterDimensionNumbers& dn = *instr.attrs().scatter_dnums;
  size_t nops = k.ops.size();
  if (nops < 3 || (nops - 1) % 2 != 0) return InstrError(instr, "scatter needs operands, indices and updates");
  size_t n = (nops - 1) / 2;
  const Literal& indices = k.op(n);
  if (!IsInteger(indices.element_type())) return InstrError(instr, "scatter indices must be integers");
  // By value: operand 0's buffer (and shape) may be moved into the result.
  const std::vector<int64_t> od = k.op(0).shape().dimensions();
  int orank = static_cast<int>(od.size());
  const std::vector<int64_t> ud = k.op(n + 1).shape().dimensions();
  int urank = static_cast<int>(ud.size());
  int irank = indices.shape().rank();
  for (size_t i = 0; i < n; ++i)
    if (k.op(i).shape().dimensions() != od || k.op(n + 1 + i).shape().dimensions() != ud ||
        k.op(i).element_type() != k.op(n + 1 + i).element_type())
      return InstrError(instr, "scatter operands or updates differ in shape");
  if (dn.index_vector_dim < 0 || dn.index_vector_dim > irank) return InstrError(instr, "index_vector_dim out of range");
  int64_t nidx = dn.index_vector_dim < irank ? indices.shape().dimensions(dn.index_vector_dim) : 1;
  if (nidx != static_cast<int64_t>(dn.scatter_dims_to_operand_dims.size()))
    return InstrError(instr, "index vector length differs from scatter_dims_to_operand_dims");
  for (int64_t d : dn.scatter_dims_to_operand_dims)
    if (d < 0 || d >= orank) return InstrError(instr, "scatter_dims_to_operand_dims entry out of range");
  if (dn.input_batching_dims.size() != dn.scatter_indices_batching_dims.size())
    return InstrError(instr, "input_batching_dims and scatter_indices_batching_dims differ in length");
  std::vector<int64_t> window_operand_dims;
  for (int d = 0; d < orank; ++d)
    if (!Contains(dn.inserted_window_dims, d) && !Contains(dn.input_batching_dims, d))
      window_operand_dims.push_back(d);
  if (window_operand_dims.size() != dn.update_window_dims.size())
    return InstrError(instr, "update_window_dims does not match the operand's window dimensions");
  std::vector<int64_t> update_scatter_dims;
  for (int d = 0; d < urank; ++d)
    if (!Contains(dn.update_window_dims, d)) update_scatter_dims.push_back(d);
  std::vector<int64_t> ibatch = BatchDimsOfIndices(indices, dn.index_vector_dim);
  if (update_scatter_dims.size() != ibatch.size())
    return InstrError(instr, "updates have " + std::to_string(update_scatter_dims.size()) +
                                 " scatter dimensions, the indices " + std::to_string(ibatch.size()));
  for (size_t j = 0; j < ibatch.size(); ++j)
    if (ud[update_scatter_dims[j]] != ibatch[j]) return InstrError(instr, "update scatter dimension sizes differ from the indices");
  std::vector<int64_t> window_size(orank, 1);
  for (size_t j = 0; j < window_operand_dims.size(); ++j) {
    int64_t u = dn.update_window_dims[j];
    if (u < 0 || u >= urank) return InstrError(instr, "update_window_dims entry out of range");
    window_size[window_operand_dims[j]] = ud[u];
    if (ud[u] > od[window_operand_dims[j]]) return InstrError(instr, "update window exceeds the operand");
  }
  for (size_t j = 0; j < dn.input_batching_dims.size(); ++j) {
    int64_t a = dn.input_batching_dims[j], b = dn.scatter_indices_batching_dims[j];
    if (a < 0 || a >= orank || b < 0 || b >= irank || b == dn.index_vector_dim)
      return InstrError(instr, "batching dimension out of range");
  }
  auto indices_dim_to_batch_pos = [&](int64_t d) { return d < dn.index_vector_dim ? d : d - 1; };

  std::vector<Literal> outs;
  for (size_t i = 0; i < n; ++i) {
    outs.push_back(TakeOrCopy(k, static_cast<int>(i)));
  }
  const Computation* comb = instr.to_apply();
  // `to_apply` returning its second parameter is a plain overwrite.
  bool overwrite = comb != nullptr && comb->root() == comb->parameter(static_cast<int>(n)) && n == 1;
  PrimitiveType t = outs[0].element_type();
  ReducerKind kind = n == 1 ? ClassifyReducer(comb) : ReducerKind::kNone;
  if (t == PrimitiveType::PRED && (kind == ReducerKind::kAdd || kind == ReducerKind::kMul))
    kind = kind == ReducerKind::kAdd ? ReducerKind::kOr : ReducerKind::kAnd;
  if (!overwrite && kind == ReducerKind::kNone && comb == nullptr)
    return InstrError(instr, "scatter has no to_apply computation");
  std::vector<int64_t> ostrides = RowMajorStrides(od);
  std::vector<int64_t> uidx(urank, 0), batch(ibatch.size()), ivec, start(orank);
  int64_t total = k.op(n + 1).element_count();
  int64_t elem = ByteWidth(t);
  std::vector<Literal> scalars(2 * n);
  std::vector<const Literal*> args(2 * n);
  for (int64_t e = 0; e < total; ++e, NextIndex(uidx, ud)) {
    for (size_t j = 0; j < update_scatter_dims.size(); ++j) batch[j] = uidx[update_scatter_dims[j]];
    ReadIndexVector(indices, dn.index_vector_dim, batch, nidx, ivec);
    std::fill(start.begin(), start.end(), 0);
    for (int64_t i = 0; i < nidx; ++i) start[dn.scatter_dims_to_operand_dims[i]] = ivec[i];
    for (size_t j = 0; j < dn.input_batching_dims.size(); ++j)
      start[dn.input_batching_dims[j]] = batch[indices_dim_to_batch_pos(dn.scatter_indices_batching_dims[j])];
    bool in_bounds = true;
    for (int d = 0; d < orank && in_bounds; ++d)
      if (start[d] < 0 || start[d] > od[d] - window_size[d]) in_bounds = false;
    if (!in_bounds) continue;  // XLA skips update windows that do not fit
    int64_t off = 0;
    for (int d = 0; d < orank; ++d) off += start[d] * ostrides[d];
    for (size_t j = 0; j < window_operand_dims.size(); ++j)
      off += uidx[dn.update_window_dims[j]] * ostrides[window_operand_dims[j]];
    if (overwrite) {
      std::memcpy(outs[0].raw() + off * elem, k.op(n + 1).raw() + e * elem, elem);
      continue;
    }
    if (kind != ReducerKind::kNone) {
      if (IsStagedFloat(t)) {
        float a = static_cast<float>(outs[0].GetDouble(off));
        float b = static_cast<float>(k.op(n + 1).GetDouble(e));
        outs[0].SetDouble(off, ApplyReducerKind<float>(kind, a, b));
      } else {
        DispatchCompute(t, [&]<typename T>() {
          T* o = outs[0].data<T>();
          o[off] = ApplyReducerKind<T>(kind, o[off], k.op(n + 1).data<T>()[e]);
        });
      }
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      scalars[i] = ElementAsScalar(outs[i], off);
      scalars[n + i] = ElementAsScalar(k.op(n + 1 + i), e);
    }
    for (size_t i = 0; i < 2 * n; ++i) args[i] = &scalars[i];
    MS_ASSIGN_OR_RETURN(Literal r, k.interp.Call(*comb, args));
    std::vector<Literal> vals;
    if (r.shape().IsTuple()) {
      for (Literal& v : r.elements()) vals.push_back(std::move(v));
    } else {
      vals.push_back(std::move(r));
    }
    if (vals.size() != n) return InstrError(instr, "scatter combiner returns the wrong number of values");
    for (size_t i = 0; i < n; ++i) {
      if (!vals[i].shape().IsArray() || vals[i].element_type() != outs[i].element_type())
        return InstrError(instr, "scatter combiner returns the wrong type");
      StoreScalar(vals[i], outs[i], off);
    }
  }
  if (n == 1) return std::move(outs[0]);
  return Literal::MakeTuple(std::move(outs));
}

}  // namespace meshsplit::interp
