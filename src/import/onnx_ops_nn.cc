// ONNX contractions, reductions and normalisations: MatMul (numpy batching),
// Gemm, ReduceSum/Mean/Max/Min, Softmax, LogSoftmax.
#include "import/onnx_context.h"

#include <limits>

namespace meshsplit::onnx_import {
namespace {

StatusOr<Instruction*> Dot(Context& ctx, Instruction* a, Instruction* b,
                           DotDimensionNumbers dn) {
  Attributes attrs;
  attrs.dot_dnums = std::move(dn);
  return ctx.Emit(Opcode::kDot, Shape(), {a, b}, attrs);
}

Status MatMul(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * b, ctx.Input(1));
  // ONNX MatMul takes no scalars (numpy.matmul neither); the batch and
  // contraction dims below assume rank >= 1. Found by fuzz_onnx.
  if (!a->shape().IsArray() || !b->shape().IsArray() || a->shape().rank() == 0 ||
      b->shape().rank() == 0)
    return ctx.Error("MatMul operands must have rank at least 1 (got " +
                     a->shape().ToString(false) + " and " + b->shape().ToString(false) + ")");
  bool a_vec = a->shape().rank() == 1, b_vec = b->shape().rank() == 1;
  if (a_vec) { MS_ASSIGN_OR_RETURN(a, ctx.Reshape(a, {1, a->shape().dimensions(0)})); }
  if (b_vec) { MS_ASSIGN_OR_RETURN(b, ctx.Reshape(b, {b->shape().dimensions(0), 1})); }
  int64_t ra = a->shape().rank(), rb = b->shape().rank();
  Instruction* r;
  if (rb == 2) {
    // [..., M, K] x [K, N]: no batch dims needed, the result is [..., M, N].
    DotDimensionNumbers dn;
    dn.lhs_contracting_dimensions = {ra - 1};
    dn.rhs_contracting_dimensions = {0};
    MS_ASSIGN_OR_RETURN(r, Dot(ctx, a, b, dn));
  } else {
    // Broadcast the batch dims of both to their common shape.
    std::vector<int64_t> ab(a->shape().dimensions().begin(), a->shape().dimensions().end() - 2);
    std::vector<int64_t> bb(b->shape().dimensions().begin(), b->shape().dimensions().end() - 2);
    size_t nb = std::max(ab.size(), bb.size());
    std::vector<int64_t> batch(nb);
    for (size_t i = 0; i < nb; ++i) {
      int64_t x = i + ab.size() >= nb ? ab[i + ab.size() - nb] : 1;
      int64_t y = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
      if (x != y && x != 1 && y != 1) return ctx.Error("MatMul batch dims do not broadcast");
      batch[i] = x == 1 ? y : x;
    }
    auto with = [&](Instruction* x) {
      std::vector<int64_t> d = batch;
      d.push_back(x->shape().dimensions(x->shape().rank() - 2));
      d.push_back(x->shape().dimensions(x->shape().rank() - 1));
      return d;
    };
    MS_ASSIGN_OR_RETURN(a, ctx.BroadcastTo(a, with(a)));
    MS_ASSIGN_OR_RETURN(b, ctx.BroadcastTo(b, with(b)));
    DotDimensionNumbers dn;
    for (size_t i = 0; i < nb; ++i) {
      dn.lhs_batch_dimensions.push_back(i);
      dn.rhs_batch_dimensions.push_back(i);
    }
    dn.lhs_contracting_dimensions = {static_cast<int64_t>(nb) + 1};
    dn.rhs_contracting_dimensions = {static_cast<int64_t>(nb)};
    MS_ASSIGN_OR_RETURN(r, Dot(ctx, a, b, dn));
  }
  if (a_vec || b_vec) {
    std::vector<int64_t> d = r->shape().dimensions();
    if (b_vec) d.erase(d.end() - 1);
    if (a_vec) d.erase(d.end() - 1 - (b_vec ? 0 : 1));
    MS_ASSIGN_OR_RETURN(r, ctx.Reshape(r, d));
  }
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status Gemm(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * b, ctx.Input(1));
  const auto& node = ctx.node();
  float alpha = AttrFloat(node, "alpha", 1), beta = AttrFloat(node, "beta", 1);
  DotDimensionNumbers dn;
  dn.lhs_contracting_dimensions = {AttrInt(node, "transA", 0) ? 0 : 1};
  dn.rhs_contracting_dimensions = {AttrInt(node, "transB", 0) ? 1 : 0};
  MS_ASSIGN_OR_RETURN(Instruction * r, Dot(ctx, a, b, dn));
  PrimitiveType t = r->shape().element_type();
  if (alpha != 1) {
    MS_ASSIGN_OR_RETURN(r, ctx.Binary(Opcode::kMultiply, r, ctx.ScalarConstant(t, alpha)));
  }
  if (ctx.HasInput(2) && beta != 0) {
    MS_ASSIGN_OR_RETURN(Instruction * c, ctx.Input(2));
    if (beta != 1) {
      MS_ASSIGN_OR_RETURN(c, ctx.Binary(Opcode::kMultiply, c, ctx.ScalarConstant(t, beta)));
    }
    MS_ASSIGN_OR_RETURN(c, ctx.BroadcastTo(c, r->shape().dimensions()));
    MS_ASSIGN_OR_RETURN(r, ctx.Emit(Opcode::kAdd, Shape(), {r, c}));
  }
  ctx.SetOutput(0, r);
  return Status::Ok();
}

enum class ReduceKind { kSum, kMean, kMax, kMin };

LowerFn ReduceOp(ReduceKind kind) {
  return [kind](Context& ctx) -> Status {
    MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
    std::vector<int64_t> axes;
    if (ctx.HasInput(1)) {
      MS_ASSIGN_OR_RETURN(axes, ctx.ConstInts(1));
    } else {
      axes = AttrInts(ctx.node(), "axes");
    }
    bool keepdims = AttrInt(ctx.node(), "keepdims", 1) != 0;
    int64_t rank = x->shape().rank();
    if (axes.empty()) {
      if (AttrInt(ctx.node(), "noop_with_empty_axes", 0)) {
        ctx.SetOutput(0, x);
        return Status::Ok();
      }
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    }
    std::vector<bool> reduced(rank, false);
    int64_t count = 1;
    for (int64_t& a : axes) {
      MS_ASSIGN_OR_RETURN(a, NormAxis(ctx, a, rank));
      reduced[a] = true;
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    for (int64_t a : axes) count *= x->shape().dimensions(a);
    double inf = std::numeric_limits<double>::infinity();
    Opcode op = kind == ReduceKind::kMax   ? Opcode::kMaximum
                : kind == ReduceKind::kMin ? Opcode::kMinimum
                                           : Opcode::kAdd;
    double init = kind == ReduceKind::kMax ? -inf : kind == ReduceKind::kMin ? inf : 0.0;
    MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Reduce(x, axes, op, init));
    if (kind == ReduceKind::kMean) {
      MS_ASSIGN_OR_RETURN(r, ctx.Binary(Opcode::kDivide, r,
                                        ctx.ScalarConstant(r->shape().element_type(), count)));
    }
    if (keepdims) {
      std::vector<int64_t> dims = x->shape().dimensions();
      for (int64_t a : axes) dims[a] = 1;
      MS_ASSIGN_OR_RETURN(r, ctx.Reshape(r, dims));
    }
    ctx.SetOutput(0, r);
    return Status::Ok();
  };
}

// Softmax over the axis (opset 13; before, over the dims from it on):
// exp(x - max) / sum; LogSoftmax: (x - max) - log(sum(exp(x - max))).
LowerFn SoftmaxOp(bool log) {
  return [log](Context& ctx) -> Status {
    MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
    int64_t rank = x->shape().rank();
    // Before opset 13 the axis (default 1) splits the input into a matrix and
    // the softmax runs over each row: over every dimension from `axis` on.
    const bool rows = ctx.opset() < 13;
    MS_ASSIGN_OR_RETURN(int64_t axis,
                        NormAxis(ctx, AttrInt(ctx.node(), "axis", rows ? 1 : -1), rank));
    std::vector<int64_t> dims = {axis};
    if (rows)
      for (int64_t d = axis + 1; d < rank; ++d) dims.push_back(d);
    std::vector<int64_t> kept = x->shape().dimensions();
    for (int64_t d : dims) kept[d] = 1;
    MS_ASSIGN_OR_RETURN(Instruction * mx, ctx.Reduce(x, dims, Opcode::kMaximum,
                                                     -std::numeric_limits<double>::infinity()));
    MS_ASSIGN_OR_RETURN(mx, ctx.Reshape(mx, kept));
    MS_ASSIGN_OR_RETURN(Instruction * shifted, ctx.Binary(Opcode::kSubtract, x, mx));
    MS_ASSIGN_OR_RETURN(Instruction * e, ctx.Emit(Opcode::kExp, Shape(), {shifted}));
    MS_ASSIGN_OR_RETURN(Instruction * sum, ctx.Reduce(e, dims, Opcode::kAdd, 0));
    MS_ASSIGN_OR_RETURN(sum, ctx.Reshape(sum, kept));
    Instruction* r;
    if (log) {
      MS_ASSIGN_OR_RETURN(Instruction * ls, ctx.Emit(Opcode::kLog, Shape(), {sum}));
      MS_ASSIGN_OR_RETURN(r, ctx.Binary(Opcode::kSubtract, shifted, ls));
    } else {
      MS_ASSIGN_OR_RETURN(r, ctx.Binary(Opcode::kDivide, e, sum));
    }
    ctx.SetOutput(0, r);
    return Status::Ok();
  };
}

}  // namespace

void RegisterNnOps(OpTable& t) {
  t["MatMul"] = {MatMul, 2, 2};
  t["Gemm"] = {Gemm, 2, 3, {"alpha", "beta", "transA", "transB"}};
  t["ReduceSum"] = {ReduceOp(ReduceKind::kSum), 1, 2,
        {"axes", "keepdims", "noop_with_empty_axes"}};
  t["ReduceMean"] = {ReduceOp(ReduceKind::kMean), 1, 1, {"axes", "keepdims"}};
  t["ReduceMax"] = {ReduceOp(ReduceKind::kMax), 1, 1, {"axes", "keepdims"}};
  t["ReduceMin"] = {ReduceOp(ReduceKind::kMin), 1, 1, {"axes", "keepdims"}};
  t["Softmax"] = {SoftmaxOp(false), 1, 1, {"axis"}};
  t["LogSoftmax"] = {SoftmaxOp(true), 1, 1, {"axis"}};
}

}  // namespace meshsplit::onnx_import
