// ONNX shape and data-movement ops: Reshape, Flatten, (Un)Squeeze, Transpose,
// Slice, Split, Concat, Expand, Shape, ConstantOfShape, Gather,
// GatherElements, ScatterElements. Shape operands must be constants (they are
// after folding); the results are static-shaped HLO.
#include "import/onnx_context.h"

#include <numeric>

namespace meshsplit::onnx_import {
namespace {

Status ReshapeOp(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ConstInts(1));
  bool allowzero = AttrInt(ctx.node(), "allowzero", 0) != 0;
  const auto& in = x->shape().dimensions();
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowzero) {
      if (i >= in.size()) return ctx.Error("0 in the shape copies a missing dimension");
      dims[i] = in[i];
    }
    if (dims[i] == -1) {
      if (infer >= 0) return ctx.Error("more than one -1 in the target shape");
      infer = i;
    } else if (dims[i] < 0) {
      return ctx.Error("the target shape has the negative dimension " + std::to_string(dims[i]));
    } else if (__builtin_mul_overflow(known, dims[i], &known)) {
      return ctx.Error("the target shape has more than 2^63 elements");
    }
  }
  int64_t total = x->shape().ElementCount();
  if (infer >= 0) {
    if (known == 0 || total % known) return ctx.Error("cannot infer the -1 dimension");
    dims[infer] = total / known;
  }
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Reshape(x, dims));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status Flatten(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  int64_t rank = x->shape().rank();
  int64_t axis = AttrInt(ctx.node(), "axis", 1);
  if (axis < -rank || axis > rank)  // [-r, r]: r flattens to [N, 1]
    return ctx.Error("axis " + std::to_string(axis) + " out of range for rank " +
                     std::to_string(rank));
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= x->shape().dimensions(i);
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Reshape(x, {outer, inner}));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

// Axes come from the second input (opset 13) or the attribute (older).
StatusOr<std::vector<int64_t>> AxesOf(Context& ctx, int input) {
  if (ctx.HasInput(input)) return ctx.ConstInts(input);
  return AttrInts(ctx.node(), "axes");
}

Status Unsqueeze(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(ctx, 1));
  int64_t out_rank = x->shape().rank() + axes.size();
  std::vector<bool> is_new(out_rank, false);
  for (int64_t a : axes) {
    MS_ASSIGN_OR_RETURN(int64_t n, NormAxis(ctx, a, out_rank));
    if (is_new[n]) return ctx.Error("axis " + std::to_string(a) + " is given twice");
    is_new[n] = true;
  }
  std::vector<int64_t> dims;
  int k = 0;
  for (int64_t i = 0; i < out_rank; ++i)
    dims.push_back(is_new[i] ? 1 : x->shape().dimensions(k++));
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Reshape(x, dims));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status Squeeze(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(ctx, 1));
  int64_t rank = x->shape().rank();
  std::vector<bool> drop(rank, axes.empty());
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) drop[i] = x->shape().dimensions(i) == 1;
  for (int64_t a : axes) {
    MS_ASSIGN_OR_RETURN(int64_t n, NormAxis(ctx, a, rank));
    if (x->shape().dimensions(n) != 1) return ctx.Error("squeezed axis is not of size 1");
    drop[n] = true;
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i]) dims.push_back(x->shape().dimensions(i));
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Reshape(x, dims));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status TransposeOp(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  std::vector<int64_t> perm = AttrInts(ctx.node(), "perm");
  if (perm.empty())
    for (int64_t i = x->shape().rank() - 1; i >= 0; --i) perm.push_back(i);
  Attributes attrs;
  attrs.dimensions = perm;
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Emit(Opcode::kTranspose, Shape(), {x}, attrs));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status SliceOp(Context& ctx) {
  if (FindAttr(ctx.node(), "starts") || FindAttr(ctx.node(), "ends") ||
      FindAttr(ctx.node(), "axes"))
    return ctx.Error("starts/ends/axes as attributes (opset < 10) are not supported; "
                     "give them as inputs");
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ctx.ConstInts(1));
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ctx.ConstInts(2));
  std::vector<int64_t> axes, steps;
  if (ctx.HasInput(3)) { MS_ASSIGN_OR_RETURN(axes, ctx.ConstInts(3)); }
  if (ctx.HasInput(4)) { MS_ASSIGN_OR_RETURN(steps, ctx.ConstInts(4)); }
  int64_t rank = x->shape().rank();
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(i);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      (!steps.empty() && steps.size() != starts.size()))
    return ctx.Error("starts, ends, axes and steps have different lengths (" +
                     std::to_string(starts.size()) + ", " + std::to_string(ends.size()) +
                     ", " + std::to_string(axes.size()) + ", " +
                     std::to_string(steps.size()) + ")");
  Attributes attrs;
  for (int64_t d = 0; d < rank; ++d) attrs.slice.push_back({0, x->shape().dimensions(d), 1});
  for (size_t i = 0; i < axes.size(); ++i) {
    MS_ASSIGN_OR_RETURN(int64_t a, NormAxis(ctx, axes[i], rank));
    int64_t dim = x->shape().dimensions(a);
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step <= 0) return ctx.Error("only positive Slice steps are supported");
    auto clamp = [&](int64_t v) {
      if (v < 0) v += dim;
      return std::clamp<int64_t>(v, 0, dim);
    };
    int64_t s = clamp(starts[i]), e = clamp(ends[i]);
    attrs.slice[a] = {s, std::max(s, e), step};
  }
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Emit(Opcode::kSlice, Shape(), {x}, attrs));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status Split(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  int64_t rank = x->shape().rank();
  MS_ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx, AttrInt(ctx.node(), "axis", 0), rank));
  std::vector<int64_t> sizes;
  if (ctx.HasInput(1)) {
    MS_ASSIGN_OR_RETURN(sizes, ctx.ConstInts(1));
  } else {
    sizes = AttrInts(ctx.node(), "split");
  }
  int n = ctx.node().output_size();
  if (n == 0) return ctx.Error("Split has no outputs");
  int64_t dim = x->shape().dimensions(axis);
  if (sizes.empty()) {
    if (dim % n) return ctx.Error("dimension does not split evenly");
    sizes.assign(n, dim / n);
  }
  if (static_cast<int>(sizes.size()) != n) return ctx.Error("split sizes do not match outputs");
  int64_t total = 0;
  for (int64_t size : sizes)
    if (size < 0 || __builtin_add_overflow(total, size, &total))
      return ctx.Error("split sizes must be non-negative and sum to the dimension (" +
                       std::to_string(dim) + ")");
  if (total != dim)
    return ctx.Error("split sizes sum to " + std::to_string(total) + ", not the dimension (" +
                     std::to_string(dim) + ")");
  int64_t start = 0;
  for (int i = 0; i < n; ++i) {
    Attributes attrs;
    for (int64_t d = 0; d < rank; ++d) attrs.slice.push_back({0, x->shape().dimensions(d), 1});
    attrs.slice[axis] = {start, start + sizes[i], 1};
    start += sizes[i];
    MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Emit(Opcode::kSlice, Shape(), {x}, attrs));
    ctx.SetOutput(i, r);
  }
  return Status::Ok();
}

Status Concat(Context& ctx) {
  std::vector<Instruction*> ins;
  for (int i = 0; i < ctx.InputCount(); ++i) {
    MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(i));
    ins.push_back(x);
  }
  MS_ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx, AttrInt(ctx.node(), "axis", 0),
                                             ins[0]->shape().rank()));
  Attributes attrs;
  attrs.dimensions = {axis};
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Emit(Opcode::kConcatenate, Shape(), ins, attrs));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status Expand(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.ConstInts(1));
  // The result is broadcast(x.shape, shape): a 1 in `shape` keeps x's dim.
  const auto& xd = x->shape().dimensions();
  size_t rank = std::max(shape.size(), xd.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i + xd.size() >= rank ? xd[i + xd.size() - rank] : 1;
    int64_t b = i + shape.size() >= rank ? shape[i + shape.size() - rank] : 1;
    out[i] = a == 1 ? b : a;
  }
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.BroadcastTo(x, out));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status ShapeOp(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  int64_t rank = x->shape().rank();
  int64_t start = AttrInt(ctx.node(), "start", 0), end = AttrInt(ctx.node(), "end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  Literal l(Shape(PrimitiveType::S64, {end - start}));
  for (int64_t i = start; i < end; ++i) l.SetInt(i - start, x->shape().dimensions(i));
  ctx.SetOutput(0, ctx.Constant(std::move(l)));
  return Status::Ok();
}

// A broadcast scalar rather than a literal, so large zero tensors stay small.
Status ConstantOfShape(Context& ctx) {
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ConstInts(0));
  Literal value = Literal::ScalarF32(0);
  if (const auto* a = FindAttr(ctx.node(), "value")) {
    auto lit = TensorToLiteral(a->t());
    if (!lit.ok()) return ctx.Error(lit.status().message());
    if (lit->element_count() != 1)
      return ctx.Error("the value attribute must hold one element, it has " +
                       std::to_string(lit->element_count()));
    value = Literal(Shape(lit->element_type(), {}));
    std::memcpy(value.raw(), lit->raw(), value.size_bytes());
  }
  PrimitiveType t = value.element_type();
  Attributes attrs;
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Emit(Opcode::kBroadcast, Shape(t, dims),
                                                {ctx.Constant(std::move(value))}, attrs));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

// Indices as s64 with negative values wrapped by `dim`.
StatusOr<Instruction*> NormalizeIndices(Context& ctx, Instruction* idx, int64_t dim) {
  MS_ASSIGN_OR_RETURN(idx, ctx.Convert(idx, PrimitiveType::S64));
  if (idx->opcode() == Opcode::kConstant) {
    // ONNX makes an index outside [-dim, dim-1] an error; HLO would clamp
    // it, a silently different answer. Only constant indices can be checked
    // here.
    bool any_negative = false;
    for (int64_t i = 0; i < idx->shape().ElementCount(); ++i) {
      const int64_t v = idx->literal().GetInt(i);
      if (v < -dim || v >= dim)
        return ctx.Error("index " + std::to_string(v) + " is out of range for a dimension of " +
                         std::to_string(dim));
      any_negative |= v < 0;
    }
    if (!any_negative) return idx;
  }
  Instruction* zero = ctx.ScalarConstant(PrimitiveType::S64, 0);
  MS_ASSIGN_OR_RETURN(Instruction * neg, ctx.Compare(ComparisonDirection::kLt, idx, zero));
  MS_ASSIGN_OR_RETURN(Instruction * wrapped,
                      ctx.Binary(Opcode::kAdd, idx, ctx.ScalarConstant(PrimitiveType::S64, dim)));
  return ctx.Emit(Opcode::kSelect, Shape(), {neg, wrapped, idx});
}

Status GatherOp(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * data, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * idx, ctx.Input(1));
  int64_t r = data->shape().rank();
  MS_ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx, AttrInt(ctx.node(), "axis", 0), r));
  MS_ASSIGN_OR_RETURN(idx, NormalizeIndices(ctx, idx, data->shape().dimensions(axis)));
  int64_t q = idx->shape().rank();
  // Output = data[:axis] + indices + data[axis+1:]; index_vector_dim = q
  // (an implicit trailing 1).
  GatherDimensionNumbers dn;
  for (int64_t i = 0; i < axis; ++i) dn.offset_dims.push_back(i);
  for (int64_t i = axis + 1; i < r; ++i) dn.offset_dims.push_back(i - 1 + q);
  dn.collapsed_slice_dims = {axis};
  dn.start_index_map = {axis};
  dn.index_vector_dim = q;
  Attributes attrs;
  attrs.gather_dnums = dn;
  attrs.gather_slice_sizes = data->shape().dimensions();
  attrs.gather_slice_sizes[axis] = 1;
  MS_ASSIGN_OR_RETURN(Instruction * out, ctx.Emit(Opcode::kGather, Shape(), {data, idx}, attrs));
  ctx.SetOutput(0, out);
  return Status::Ok();
}

// Full coordinates for an elementwise gather/scatter along `axis`: iotas for
// every other dim and `idx` for `axis`, stacked on a trailing dim.
StatusOr<Instruction*> FullIndices(Context& ctx, Instruction* idx, int64_t axis) {
  const auto& dims = idx->shape().dimensions();
  std::vector<int64_t> col = dims;
  col.push_back(1);
  std::vector<Instruction*> parts;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    Instruction* part;
    if (d == axis) {
      MS_ASSIGN_OR_RETURN(part, ctx.Reshape(idx, col));
    } else {
      Attributes a;
      a.iota_dimension = d;
      MS_ASSIGN_OR_RETURN(part, ctx.Emit(Opcode::kIota, Shape(PrimitiveType::S64, col), {}, a));
    }
    parts.push_back(part);
  }
  Attributes attrs;
  attrs.dimensions = {static_cast<int64_t>(dims.size())};
  return ctx.Emit(Opcode::kConcatenate, Shape(), parts, attrs);
}

Status GatherElements(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * data, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * idx, ctx.Input(1));
  int64_t r = data->shape().rank();
  MS_ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx, AttrInt(ctx.node(), "axis", 0), r));
  MS_ASSIGN_OR_RETURN(idx, NormalizeIndices(ctx, idx, data->shape().dimensions(axis)));
  MS_ASSIGN_OR_RETURN(Instruction * full, FullIndices(ctx, idx, axis));
  GatherDimensionNumbers dn;
  for (int64_t i = 0; i < r; ++i) {
    dn.collapsed_slice_dims.push_back(i);
    dn.start_index_map.push_back(i);
  }
  dn.index_vector_dim = r;
  Attributes attrs;
  attrs.gather_dnums = dn;
  attrs.gather_slice_sizes.assign(r, 1);
  MS_ASSIGN_OR_RETURN(Instruction * out, ctx.Emit(Opcode::kGather, Shape(), {data, full}, attrs));
  ctx.SetOutput(0, out);
  return Status::Ok();
}

Status ScatterElements(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * data, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * idx, ctx.Input(1));
  MS_ASSIGN_OR_RETURN(Instruction * upd, ctx.Input(2));
  int64_t r = data->shape().rank();
  MS_ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx, AttrInt(ctx.node(), "axis", 0), r));
  MS_ASSIGN_OR_RETURN(idx, NormalizeIndices(ctx, idx, data->shape().dimensions(axis)));
  MS_ASSIGN_OR_RETURN(Instruction * full, FullIndices(ctx, idx, axis));
  const auto* red = FindAttr(ctx.node(), "reduction");
  std::string reduction = red ? red->s() : "none";
  PrimitiveType t = data->shape().element_type();
  Computation* combiner;
  if (reduction == "add") {
    combiner = ctx.Reducer(Opcode::kAdd, t);
  } else if (reduction == "mul") {
    combiner = ctx.Reducer(Opcode::kMultiply, t);
  } else if (reduction == "none") {
    // Replacement: a computation returning its second parameter. ONNX leaves
    // duplicate indices undefined, so any order is acceptable.
    auto comp = std::make_unique<Computation>(ctx.module()->UniqueInstructionName("replace"));
    Shape scalar(t, {});
    Instruction* last = nullptr;
    for (int i = 0; i < 2; ++i) {
      auto p = std::make_unique<Instruction>(
          Opcode::kParameter, ctx.module()->UniqueInstructionName(i ? "new" : "old"), scalar);
      p->mutable_attrs().parameter_number = i;
      last = comp->AddInstruction(std::move(p));
    }
    comp->set_root(last);
    combiner = ctx.module()->AddComputation(std::move(comp));
  } else {
    return ctx.Error("unsupported ScatterElements reduction '" + reduction + "'");
  }
  ScatterDimensionNumbers dn;
  for (int64_t i = 0; i < r; ++i) {
    dn.inserted_window_dims.push_back(i);
    dn.scatter_dims_to_operand_dims.push_back(i);
  }
  dn.index_vector_dim = r;
  Attributes attrs;
  attrs.scatter_dnums = dn;
  MS_ASSIGN_OR_RETURN(Instruction * out, ctx.Emit(Opcode::kScatter, Shape(), {data, full, upd},
                                                  attrs, {combiner}));
  ctx.SetOutput(0, out);
  return Status::Ok();
}

}  // namespace

void RegisterTensorOps(OpTable& t) {
  t["Reshape"] = {ReshapeOp, 2, 2, {"allowzero"}};
  t["Flatten"] = {Flatten, 1, 1, {"axis"}};
  t["Unsqueeze"] = {Unsqueeze, 1, 2, {"axes"}};
  t["Squeeze"] = {Squeeze, 1, 2, {"axes"}};
  t["Transpose"] = {TransposeOp, 1, 1, {"perm"}};
  t["Slice"] = {SliceOp, 1, 5, {"axes", "ends", "starts"}};
  t["Split"] = {Split, 1, 2, {"axis", "split"}};
  t["Concat"] = {Concat, 1, OpRule::kVariadic, {"axis"}};
  t["Expand"] = {Expand, 2, 2};
  t["Shape"] = {ShapeOp, 1, 1, {"end", "start"}};
  t["ConstantOfShape"] = {ConstantOfShape, 1, 1, {"value"}};
  t["Gather"] = {GatherOp, 2, 2, {"axis"}};
  t["GatherElements"] = {GatherElements, 2, 2, {"axis"}};
  t["ScatterElements"] = {ScatterElements, 3, 3, {"axis", "reduction"}};
}

}  // namespace meshsplit::onnx_import
