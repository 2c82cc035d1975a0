// Shape rules that need more than "same as the operand": dot, convolution,
// windows, gather, pad, slice, transpose, concatenate, reductions and replica
// group sizes. Pure functions of shapes and attributes (no Instruction), so
// passes that build instructions can call them too. Rules follow XLA's
// ShapeInference.
#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include "ir/shape_inference.h"
#include "ir/shape_inference_util.h"
#include "support/small_helpers.h"

namespace meshsplit {

using shape_inference_internal::Dims;
using shape_inference_internal::Err;

namespace {

// Checks that `dims` are valid dimension numbers of a rank-`rank` array,
// unique and (when `sorted`) increasing. `what` names the list.
Status CheckDimList(const char* what, const std::vector<int64_t>& dims,
                    int64_t rank, bool sorted) {
  std::set<int64_t> seen;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= rank)
      return Err(what, " ", dims[i], " is out of range for rank ", rank);
    if (!seen.insert(dims[i]).second)
      return Err(what, " ", Dims(dims), " repeats dimension ", dims[i]);
    if (sorted && i > 0 && dims[i] < dims[i - 1])
      return Err(what, " ", Dims(dims), " must be sorted");
  }
  return Status::Ok();
}

std::string Str(const Shape& s) { return s.ToString(/*print_layout=*/false); }

int64_t DilatedBound(int64_t bound, int64_t dilation) {
  return bound == 0 ? 0 : (bound - 1) * dilation + 1;
}

}  // namespace

namespace shape_inference_internal {
Status CheckDims(const char* what, const std::vector<int64_t>& dims,
                 int64_t rank, bool sorted) {
  return CheckDimList(what, dims, rank, sorted);
}

Status CheckBatchingDims(const char* operand_what, const std::vector<int64_t>& operand_dims,
                         const char* indices_what, const std::vector<int64_t>& indices_dims,
                         const Shape& operand, const Shape& indices, int64_t index_vector_dim,
                         const char* map_what, const std::vector<int64_t>& index_map) {
  if (operand_dims.size() != indices_dims.size())
    return Err(operand_what, " has ", operand_dims.size(), " entries but ", indices_what,
               " has ", indices_dims.size());
  // Unchecked, a repeated or out-of-range indices batching dim made the
  // interpreter and the partitioner read different index elements (a
  // scatter mutant that verify reported as a MISMATCH).
  MS_RETURN_IF_ERROR(CheckDimList(indices_what, indices_dims, indices.rank(), false));
  for (size_t i = 0; i < indices_dims.size(); ++i) {
    if (indices_dims[i] == index_vector_dim)
      return Err(indices_what, " ", Dims(indices_dims), " contains index_vector_dim ",
                 index_vector_dim);
    const int64_t a = operand.dimensions(operand_dims[i]);
    const int64_t b = indices.dimensions(indices_dims[i]);
    if (a != b)
      return Err("batching dimension ", operand_dims[i], " of the operand has size ", a,
                 " but its indices dimension ", indices_dims[i], " has size ", b);
  }
  for (int64_t d : operand_dims)
    if (Contains(index_map, d))
      return Err("dimension ", d, " is both a batching dimension and in ", map_what, " ",
                 Dims(index_map));
  return Status::Ok();
}
}  // namespace shape_inference_internal

StatusOr<std::vector<int64_t>> InferWindowOutputDims(
    const std::vector<int64_t>& base, const Window& window) {
  if (window.size() != base.size())
    return Err("window has ", window.size(), " dimensions but the input has rank ",
               base.size());
  std::vector<int64_t> out(base.size());
  for (size_t i = 0; i < base.size(); ++i) {
    const WindowDimension& w = window[i];
    if (w.size <= 0)
      return Err("window dimension ", i, " has non-positive size ", w.size);
    if (w.stride <= 0)
      return Err("window dimension ", i, " has non-positive stride ", w.stride);
    if (w.base_dilation <= 0 || w.window_dilation <= 0)
      return Err("window dimension ", i, " has non-positive dilation");
    int64_t padded = DilatedBound(base[i], w.base_dilation) + w.padding_low +
                     w.padding_high;
    int64_t window_extent = DilatedBound(w.size, w.window_dilation);
    if (padded < 0)
      return Err("window dimension ", i, ": padding ", w.padding_low, "_",
                 w.padding_high, " makes input size ", base[i], " negative");
    out[i] = padded < window_extent ? 0 : (padded - window_extent) / w.stride + 1;
  }
  return out;
}

StatusOr<Shape> InferDotShape(const Shape& lhs, const Shape& rhs,
                              const DotDimensionNumbers& d,
                              PrimitiveType result_type) {
  if (!lhs.IsArray() || !rhs.IsArray())
    return Err("operands must be arrays, got ", lhs.ToString(false), " and ",
               rhs.ToString(false));
  if (d.lhs_batch_dimensions.size() != d.rhs_batch_dimensions.size())
    return Err("lhs has ", d.lhs_batch_dimensions.size(),
               " batch dimensions but rhs has ", d.rhs_batch_dimensions.size());
  if (d.lhs_contracting_dimensions.size() != d.rhs_contracting_dimensions.size())
    return Err("lhs has ", d.lhs_contracting_dimensions.size(),
               " contracting dimensions but rhs has ",
               d.rhs_contracting_dimensions.size());
  MS_RETURN_IF_ERROR(CheckDimList("lhs_batch_dims", d.lhs_batch_dimensions,
                                  lhs.rank(), false));
  MS_RETURN_IF_ERROR(CheckDimList("rhs_batch_dims", d.rhs_batch_dimensions,
                                  rhs.rank(), false));
  MS_RETURN_IF_ERROR(CheckDimList("lhs_contracting_dims",
                                  d.lhs_contracting_dimensions, lhs.rank(), false));
  MS_RETURN_IF_ERROR(CheckDimList("rhs_contracting_dims",
                                  d.rhs_contracting_dimensions, rhs.rank(), false));
  for (int64_t b : d.lhs_batch_dimensions)
    if (Contains(d.lhs_contracting_dimensions, b))
      return Err("lhs dimension ", b, " is both batch and contracting");
  for (int64_t b : d.rhs_batch_dimensions)
    if (Contains(d.rhs_contracting_dimensions, b))
      return Err("rhs dimension ", b, " is both batch and contracting");
  for (size_t i = 0; i < d.lhs_contracting_dimensions.size(); ++i) {
    int64_t l = d.lhs_contracting_dimensions[i], r = d.rhs_contracting_dimensions[i];
    if (lhs.dimensions(l) != rhs.dimensions(r))
      return Err("lhs contracting dimension ", l, " has size ", lhs.dimensions(l),
                 " but rhs contracting dimension ", r, " has size ",
                 rhs.dimensions(r));
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < d.lhs_batch_dimensions.size(); ++i) {
    int64_t l = d.lhs_batch_dimensions[i], r = d.rhs_batch_dimensions[i];
    if (lhs.dimensions(l) != rhs.dimensions(r))
      return Err("lhs batch dimension ", l, " has size ", lhs.dimensions(l),
                 " but rhs batch dimension ", r, " has size ", rhs.dimensions(r));
    dims.push_back(lhs.dimensions(l));
  }
  for (int i = 0; i < lhs.rank(); ++i)
    if (!Contains(d.lhs_batch_dimensions, i) &&
        !Contains(d.lhs_contracting_dimensions, i))
      dims.push_back(lhs.dimensions(i));
  for (int i = 0; i < rhs.rank(); ++i)
    if (!Contains(d.rhs_batch_dimensions, i) &&
        !Contains(d.rhs_contracting_dimensions, i))
      dims.push_back(rhs.dimensions(i));
  return Shape(result_type, std::move(dims));
}

StatusOr<Shape> InferBlockScaledDotShape(const std::vector<const Shape*>& operands,
                                         PrimitiveType result_type) {
  if (operands.size() != 4)
    return Err("block-scaled dot takes lhs, rhs, lhs_scale and rhs_scale, not ", operands.size(),
               " operands");
  for (const Shape* s : operands)
    if (!s->IsArray()) return Err("block-scaled dot operands must be arrays, got ", Str(*s));
  if (!IsFloatingPoint(result_type))
    return Err("block-scaled dot needs a floating-point result, not ",
               PrimitiveTypeName(result_type));
  const Shape& lhs = *operands[0];
  const Shape& rhs = *operands[1];
  const int64_t rank = lhs.rank();
  if ((rank != 2 && rank != 3) || rhs.rank() != rank)
    return Err("block-scaled dot operands must both have rank 2 or 3, got ", Str(lhs), " and ",
               Str(rhs));
  const char* names[2] = {"lhs", "rhs"};
  for (int i = 0; i < 2; ++i) {
    const Shape& x = *operands[i];
    const Shape& scale = *operands[i + 2];
    if (scale.rank() != rank)
      return Err(names[i], " scale ", Str(scale), " must have the rank of its operand ", Str(x));
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t n = x.dimensions(d), m = scale.dimensions(d);
      if (m <= 0 ? n != 0 : n % m != 0)
        return Err(names[i], " scale ", Str(scale), " does not divide its operand ", Str(x),
                   " into blocks along dim ", d);
    }
  }
  DotDimensionNumbers dn;
  dn.lhs_contracting_dimensions = {rank - 1};
  dn.rhs_contracting_dimensions = {rank - 1};
  if (rank == 3) {
    dn.lhs_batch_dimensions = {0};
    dn.rhs_batch_dimensions = {0};
  }
  return InferDotShape(lhs, rhs, dn, result_type);
}

StatusOr<Shape> InferRaggedDotShape(const Shape& lhs, const Shape& rhs, const Shape& group_sizes,
                                    const DotDimensionNumbers& d,
                                    const std::vector<int64_t>& lhs_ragged,
                                    const std::vector<int64_t>& rhs_group,
                                    PrimitiveType result_type) {
  MS_ASSIGN_OR_RETURN(Shape dot, InferDotShape(lhs, rhs, d, result_type));
  if (!group_sizes.IsArray() || !IsInteger(group_sizes.element_type()) ||
      group_sizes.rank() < 1)
    return Err("group_sizes must be an integer array of rank >= 1, got ",
               group_sizes.ToString(false));
  if (lhs_ragged.size() != 1) return Err("lhs_ragged_dims must list one dimension");
  if (rhs_group.size() > 1) return Err("rhs_group_dims must list at most one dimension");
  const int64_t ragged = lhs_ragged[0];
  if (ragged < 0 || ragged >= lhs.rank())
    return Err("lhs_ragged_dims ", ragged, " is out of range for lhs ", lhs.ToString(false));
  const int64_t g = group_sizes.dimensions().back();
  const int64_t prefix = group_sizes.rank() - 1;
  if (prefix > lhs.rank())
    return Err("group_sizes ", group_sizes.ToString(false), " has more leading dims than lhs ",
               lhs.ToString(false));
  for (int64_t i = 0; i < prefix; ++i)
    if (group_sizes.dimensions(i) != lhs.dimensions(i))
      return Err("group_sizes dimension ", i, " has size ", group_sizes.dimensions(i),
                 " but lhs dimension ", i, " has ", lhs.dimensions(i));
  const bool contracting = Contains(d.lhs_contracting_dimensions, ragged);
  const bool batch = Contains(d.lhs_batch_dimensions, ragged);
  if (contracting || batch) {
    if (!rhs_group.empty())
      return Err("rhs_group_dims is only allowed with a ragged non-contracting dimension");
    if (!contracting) return dot;
    std::vector<int64_t> dims = dot.dimensions();
    dims.insert(dims.begin(), g);
    return Shape(result_type, std::move(dims));
  }
  if (rhs_group.size() != 1)
    return Err("a ragged non-contracting dimension needs one rhs_group_dims");
  const int64_t group = rhs_group[0];
  if (group < 0 || group >= rhs.rank() || Contains(d.rhs_batch_dimensions, group) ||
      Contains(d.rhs_contracting_dimensions, group))
    return Err("rhs_group_dims ", group, " is not a free dimension of rhs ",
               rhs.ToString(false));
  if (rhs.dimensions(group) != g)
    return Err("rhs group dimension has size ", rhs.dimensions(group), " but there are ", g,
               " groups");
  // The dot's dims end with rhs's free dims in order; drop the group dim.
  std::vector<int64_t> dims = dot.dimensions();
  int64_t rhs_free_before = 0;
  for (int64_t i = 0; i < group; ++i)
    if (!Contains(d.rhs_batch_dimensions, i) && !Contains(d.rhs_contracting_dimensions, i))
      ++rhs_free_before;
  int64_t rhs_free = 0;
  for (int64_t i = 0; i < rhs.rank(); ++i)
    if (!Contains(d.rhs_batch_dimensions, i) && !Contains(d.rhs_contracting_dimensions, i))
      ++rhs_free;
  dims.erase(dims.end() - rhs_free + rhs_free_before);
  return Shape(result_type, std::move(dims));
}

StatusOr<Shape> InferConvolutionShape(const Shape& lhs, const Shape& rhs,
                                      const ConvolutionDimensionNumbers& d,
                                      const std::optional<Window>& window,
                                      int64_t feature_group_count,
                                      int64_t batch_group_count,
                                      PrimitiveType result_type) {
  if (!lhs.IsArray() || !rhs.IsArray())
    return Err("operands must be arrays, got ", lhs.ToString(false), " and ",
               rhs.ToString(false));
  const int64_t num_spatial = d.input_spatial_dimensions.size();
  if (d.kernel_spatial_dimensions.size() != num_spatial ||
      d.output_spatial_dimensions.size() != num_spatial)
    return Err("dim_labels have ", num_spatial, " input, ",
               d.kernel_spatial_dimensions.size(), " kernel and ",
               d.output_spatial_dimensions.size(), " output spatial dimensions");
  if (lhs.rank() != num_spatial + 2)
    return Err("lhs ", lhs.ToString(false), " has rank ", lhs.rank(),
               " but dim_labels need rank ", num_spatial + 2);
  if (rhs.rank() != num_spatial + 2)
    return Err("rhs ", rhs.ToString(false), " has rank ", rhs.rank(),
               " but dim_labels need rank ", num_spatial + 2);
  if (feature_group_count <= 0)
    return Err("feature_group_count must be positive, got ", feature_group_count);
  if (batch_group_count <= 0)
    return Err("batch_group_count must be positive, got ", batch_group_count);
  if (feature_group_count > 1 && batch_group_count > 1)
    return Err("feature_group_count ", feature_group_count,
               " and batch_group_count ", batch_group_count,
               " cannot both be greater than 1");
  std::vector<int64_t> in_dims = d.input_spatial_dimensions;
  in_dims.push_back(d.input_batch_dimension);
  in_dims.push_back(d.input_feature_dimension);
  std::vector<int64_t> k_dims = d.kernel_spatial_dimensions;
  k_dims.push_back(d.kernel_input_feature_dimension);
  k_dims.push_back(d.kernel_output_feature_dimension);
  std::vector<int64_t> o_dims = d.output_spatial_dimensions;
  o_dims.push_back(d.output_batch_dimension);
  o_dims.push_back(d.output_feature_dimension);
  MS_RETURN_IF_ERROR(CheckDimList("input dim_labels", in_dims, lhs.rank(), false));
  MS_RETURN_IF_ERROR(CheckDimList("kernel dim_labels", k_dims, rhs.rank(), false));
  MS_RETURN_IF_ERROR(CheckDimList("output dim_labels", o_dims, num_spatial + 2, false));

  const int64_t input_batch = lhs.dimensions(d.input_batch_dimension);
  const int64_t input_features = lhs.dimensions(d.input_feature_dimension);
  const int64_t kernel_in = rhs.dimensions(d.kernel_input_feature_dimension);
  const int64_t kernel_out = rhs.dimensions(d.kernel_output_feature_dimension);
  if (input_features % feature_group_count != 0 ||
      input_features / feature_group_count != kernel_in)
    return Err("input feature dimension ", d.input_feature_dimension,
               " has size ", input_features,
               " but kernel input feature size ", kernel_in,
               " times feature_group_count ", feature_group_count, " is ",
               kernel_in * feature_group_count);
  if (kernel_out % feature_group_count != 0)
    return Err("kernel output feature size ", kernel_out,
               " is not divisible by feature_group_count ", feature_group_count);
  if (input_batch % batch_group_count != 0)
    return Err("input batch size ", input_batch,
               " is not divisible by batch_group_count ", batch_group_count);
  if (kernel_out % batch_group_count != 0)
    return Err("kernel output feature size ", kernel_out,
               " is not divisible by batch_group_count ", batch_group_count);

  Window win;
  if (window.has_value()) {
    win = *window;
  } else {
    for (int64_t i = 0; i < num_spatial; ++i) {
      WindowDimension w;
      w.size = rhs.dimensions(d.kernel_spatial_dimensions[i]);
      win.push_back(w);
    }
  }
  if (static_cast<int64_t>(win.size()) != num_spatial)
    return Err("window has ", win.size(), " dimensions but the convolution has ",
               num_spatial, " spatial dimensions");
  std::vector<int64_t> base;
  for (int64_t i = 0; i < num_spatial; ++i) {
    int64_t k = rhs.dimensions(d.kernel_spatial_dimensions[i]);
    if (win[i].size != k)
      return Err("window dimension ", i, " has size ", win[i].size,
                 " but kernel spatial dimension ", d.kernel_spatial_dimensions[i],
                 " has size ", k);
    base.push_back(lhs.dimensions(d.input_spatial_dimensions[i]));
  }
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> spatial, InferWindowOutputDims(base, win));
  std::vector<int64_t> dims(num_spatial + 2);
  dims[d.output_batch_dimension] = input_batch / batch_group_count;
  dims[d.output_feature_dimension] = kernel_out;
  for (int64_t i = 0; i < num_spatial; ++i)
    dims[d.output_spatial_dimensions[i]] = spatial[i];
  return Shape(result_type, std::move(dims));
}

StatusOr<Shape> InferGatherShape(const Shape& operand, const Shape& indices,
                                 const GatherDimensionNumbers& d,
                                 const std::vector<int64_t>& slice_sizes) {
  if (!operand.IsArray() || !indices.IsArray())
    return Err("operands must be arrays");
  if (!IsInteger(indices.element_type()))
    return Err("start indices must be integers, got ", indices.ToString(false));
  if (d.index_vector_dim < 0 || d.index_vector_dim > indices.rank())
    return Err("index_vector_dim ", d.index_vector_dim,
               " is out of range for start indices of rank ", indices.rank());
  // The start indices with an explicit index vector dimension.
  std::vector<int64_t> idx = indices.dimensions();
  if (d.index_vector_dim == indices.rank()) idx.push_back(1);
  const int64_t index_vector_size = idx[d.index_vector_dim];
  if (static_cast<int64_t>(d.start_index_map.size()) != index_vector_size)
    return Err("start_index_map has ", d.start_index_map.size(),
               " entries but the index vector has size ", index_vector_size);
  MS_RETURN_IF_ERROR(CheckDimList("start_index_map", d.start_index_map,
                                  operand.rank(), false));
  MS_RETURN_IF_ERROR(CheckDimList("collapsed_slice_dims", d.collapsed_slice_dims,
                                  operand.rank(), true));
  MS_RETURN_IF_ERROR(CheckDimList("operand_batching_dims", d.operand_batching_dims,
                                  operand.rank(), true));
  if (static_cast<int64_t>(slice_sizes.size()) != operand.rank())
    return Err("slice_sizes has ", slice_sizes.size(),
               " entries but the operand has rank ", operand.rank());
  for (int i = 0; i < operand.rank(); ++i) {
    if (slice_sizes[i] < 0 || slice_sizes[i] > operand.dimensions(i))
      return Err("slice size ", slice_sizes[i], " of dimension ", i,
                 " is out of range for operand dimension of size ",
                 operand.dimensions(i));
  }
  for (int64_t c : d.collapsed_slice_dims) {
    if (slice_sizes[c] > 1)
      return Err("collapsed slice dimension ", c, " has slice size ",
                 slice_sizes[c], " (must be 0 or 1)");
    if (Contains(d.operand_batching_dims, c))
      return Err("dimension ", c, " is both collapsed and a batching dimension");
  }
  for (int64_t b : d.operand_batching_dims)
    if (slice_sizes[b] > 1)
      return Err("operand batching dimension ", b, " has slice size ",
                 slice_sizes[b], " (must be 0 or 1)");
  MS_RETURN_IF_ERROR(shape_inference_internal::CheckBatchingDims(
      "operand_batching_dims", d.operand_batching_dims, "start_indices_batching_dims",
      d.start_indices_batching_dims, operand, indices, d.index_vector_dim, "start_index_map",
      d.start_index_map));
  const int64_t window_rank = operand.rank() - d.collapsed_slice_dims.size() -
                              d.operand_batching_dims.size();
  if (static_cast<int64_t>(d.offset_dims.size()) != window_rank)
    return Err("offset_dims has ", d.offset_dims.size(),
               " entries but operand rank ", operand.rank(), " minus ",
               d.collapsed_slice_dims.size(), " collapsed and ",
               d.operand_batching_dims.size(), " batching dimensions is ",
               window_rank);
  const int64_t batch_rank = static_cast<int64_t>(idx.size()) - 1;
  const int64_t out_rank = d.offset_dims.size() + batch_rank;
  MS_RETURN_IF_ERROR(CheckDimList("offset_dims", d.offset_dims, out_rank, true));
  std::vector<int64_t> window_sizes;
  for (int i = 0; i < operand.rank(); ++i)
    if (!Contains(d.collapsed_slice_dims, i) && !Contains(d.operand_batching_dims, i))
      window_sizes.push_back(slice_sizes[i]);
  std::vector<int64_t> batch_sizes;
  for (int64_t i = 0; i < static_cast<int64_t>(idx.size()); ++i)
    if (i != d.index_vector_dim) batch_sizes.push_back(idx[i]);
  std::vector<int64_t> dims;
  size_t wi = 0, bi = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    if (Contains(d.offset_dims, i)) dims.push_back(window_sizes[wi++]);
    else dims.push_back(batch_sizes[bi++]);
  }
  Shape result(operand.element_type(), std::move(dims));
  // XLA allows a slice size of 0 on a collapsed or batching dimension, but
  // then a result with elements reads them from an empty slice (undefined:
  // the clamped start may even be past the operand's end), so such a gather
  // is refused here rather than given some value.
  if (result.ElementCount() > 0) {
    for (int64_t c : d.collapsed_slice_dims)
      if (slice_sizes[c] == 0)
        return Err("collapsed slice dimension ", c,
                   " has slice size 0, so the result's elements come from an empty slice");
    for (int64_t b : d.operand_batching_dims)
      if (slice_sizes[b] == 0)
        return Err("operand batching dimension ", b,
                   " has slice size 0, so the result's elements come from an empty slice");
  }
  return result;
}

StatusOr<Shape> InferPadShape(const Shape& operand, const PaddingConfig& pad) {
  if (!operand.IsArray()) return Err("operand must be an array");
  if (static_cast<int64_t>(pad.size()) != operand.rank())
    return Err("padding has ", pad.size(), " dimensions but the operand ",
               operand.ToString(false), " has rank ", operand.rank());
  std::vector<int64_t> dims;
  for (int i = 0; i < operand.rank(); ++i) {
    const PaddingDimension& p = pad[i];
    if (p.interior < 0)
      return Err("dimension ", i, " has negative interior padding ", p.interior);
    int64_t n = operand.dimensions(i);
    int64_t size = p.low + p.high + n + std::max<int64_t>(n - 1, 0) * p.interior;
    if (size < 0)
      return Err("padding ", p.low, "_", p.high, "_", p.interior,
                 " makes dimension ", i, " of size ", n, " negative (", size, ")");
    dims.push_back(size);
  }
  return Shape(operand.element_type(), std::move(dims));
}

StatusOr<Shape> InferSliceShape(const Shape& operand,
                                const std::vector<SliceDimension>& slice) {
  if (!operand.IsArray()) return Err("operand must be an array");
  if (static_cast<int64_t>(slice.size()) != operand.rank())
    return Err("slice has ", slice.size(), " dimensions but the operand ",
               operand.ToString(false), " has rank ", operand.rank());
  std::vector<int64_t> dims;
  for (int i = 0; i < operand.rank(); ++i) {
    const SliceDimension& s = slice[i];
    if (s.stride <= 0)
      return Err("dimension ", i, " has non-positive stride ", s.stride);
    if (s.start < 0 || s.start > s.limit || s.limit > operand.dimensions(i))
      return Err("slice [", s.start, ":", s.limit, "] of dimension ", i,
                 " is out of bounds for size ", operand.dimensions(i));
    dims.push_back((s.limit - s.start + s.stride - 1) / s.stride);
  }
  return Shape(operand.element_type(), std::move(dims));
}

StatusOr<Shape> InferTransposeShape(const Shape& operand,
                                    const std::vector<int64_t>& perm) {
  if (!operand.IsArray()) return Err("operand must be an array");
  if (static_cast<int64_t>(perm.size()) != operand.rank())
    return Err("dimensions ", Dims(perm), " is not a permutation of rank ",
               operand.rank());
  MS_RETURN_IF_ERROR(CheckDimList("dimensions", perm, operand.rank(), false));
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(operand.dimensions(p));
  return Shape(operand.element_type(), std::move(dims));
}

StatusOr<Shape> InferConcatenateShape(const std::vector<const Shape*>& ops,
                                      int64_t dim) {
  if (ops.empty()) return Err("needs at least one operand");
  const Shape& first = *ops[0];
  for (size_t i = 0; i < ops.size(); ++i)
    if (!ops[i]->IsArray()) return Err("operand ", i, " is not an array");
  if (dim < 0 || dim >= first.rank())
    return Err("dimension ", dim, " is out of range for rank ", first.rank());
  std::vector<int64_t> dims = first.dimensions();
  for (size_t i = 1; i < ops.size(); ++i) {
    const Shape& s = *ops[i];
    if (s.element_type() != first.element_type())
      return Err("operand ", i, " has element type ",
                 PrimitiveTypeName(s.element_type()), " but operand 0 has ",
                 PrimitiveTypeName(first.element_type()));
    if (s.rank() != first.rank())
      return Err("operand ", i, " has rank ", s.rank(), " but operand 0 has rank ",
                 first.rank());
    for (int d = 0; d < s.rank(); ++d) {
      if (d == dim) continue;
      if (s.dimensions(d) != first.dimensions(d))
        return Err("operand ", i, " dimension ", d, " has size ", s.dimensions(d),
                   " but operand 0 has size ", first.dimensions(d));
    }
    dims[dim] += s.dimensions(dim);
  }
  return Shape(first.element_type(), std::move(dims));
}

StatusOr<std::vector<int64_t>> InferReducedDims(
    const Shape& operand, const std::vector<int64_t>& reduced) {
  MS_RETURN_IF_ERROR(CheckDimList("dimensions", reduced, operand.rank(), false));
  std::vector<int64_t> dims;
  for (int i = 0; i < operand.rank(); ++i)
    if (!Contains(reduced, i)) dims.push_back(operand.dimensions(i));
  return dims;
}

namespace shape_inference_internal {
Status CheckReplicaGroupIds(const ReplicaGroups& g) {
  if (g.is_iota) return ReplicaGroupSize(g).status();
  std::set<int64_t> seen;
  for (const auto& group : g.groups)
    for (int64_t id : group) {
      if (id < 0) return Err("replica groups contain negative id ", id);
      if (!seen.insert(id).second)
        return Err("replica groups contain id ", id, " more than once");
    }
  return Status::Ok();
}
}  // namespace shape_inference_internal

StatusOr<std::optional<int64_t>> ReplicaGroupSize(const ReplicaGroups& g) {
  if (g.is_iota) {
    if (g.group_dims.size() != 2)
      return Err("iota replica groups need [num_groups,group_size], got ",
                 Dims(g.group_dims));
    int64_t total = 1;
    for (int64_t r : g.reshape_dims) total *= r;
    if (g.group_dims[0] * g.group_dims[1] != total)
      return Err("replica groups ", Dims(g.group_dims), " hold ",
                 g.group_dims[0] * g.group_dims[1], " devices but the iota has ",
                 total);
    return std::optional<int64_t>(g.group_dims[1]);
  }
  if (g.groups.empty()) return std::optional<int64_t>();
  std::set<int64_t> seen;
  for (size_t i = 0; i < g.groups.size(); ++i) {
    if (g.groups[i].size() != g.groups[0].size())
      return Err("replica group ", i, " has ", g.groups[i].size(),
                 " members but group 0 has ", g.groups[0].size());
    for (int64_t id : g.groups[i]) {
      if (id < 0) return Err("replica groups contain negative id ", id);
      if (!seen.insert(id).second)
        return Err("replica groups contain id ", id, " more than once");
    }
  }
  return std::optional<int64_t>(static_cast<int64_t>(g.groups[0].size()));
}

}  // namespace meshsplit
