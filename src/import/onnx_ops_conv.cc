// ONNX convolution-family ops for CNNs (NCHW): Conv, MaxPool, AveragePool,
// GlobalAveragePool, GlobalMaxPool and BatchNormalization (inference form).
// Only explicit padding (auto_pad NOTSET or VALID) is supported.
#include "import/onnx_context.h"

#include <limits>

namespace meshsplit::onnx_import {
namespace {

// Spatial attributes shared by Conv and the pools, with ONNX defaults.
struct SpatialAttrs {
  std::vector<int64_t> kernel, strides, dilations, pads_lo, pads_hi;

  // The window of spatial dim i (convolution and pooling alike).
  WindowDimension WindowDim(size_t i) const {
    WindowDimension d;
    d.size = kernel[i];
    d.stride = strides[i];
    d.padding_low = pads_lo[i];
    d.padding_high = pads_hi[i];
    d.window_dilation = dilations[i];
    return d;
  }
};

StatusOr<SpatialAttrs> ReadSpatial(Context& ctx, int64_t spatial,
                                   std::vector<int64_t> kernel) {
  const auto& node = ctx.node();
  const auto* pad = FindAttr(node, "auto_pad");
  if (pad && pad->s() != "NOTSET" && pad->s() != "VALID")
    return ctx.Error("auto_pad " + pad->s() + " is not supported (give explicit pads)");
  SpatialAttrs s;
  s.kernel = AttrInts(node, "kernel_shape");
  if (s.kernel.empty()) s.kernel = std::move(kernel);
  s.strides = AttrInts(node, "strides");
  s.dilations = AttrInts(node, "dilations");
  std::vector<int64_t> pads = AttrInts(node, "pads");
  if (s.strides.empty()) s.strides.assign(spatial, 1);
  if (s.dilations.empty()) s.dilations.assign(spatial, 1);
  if (pads.empty()) pads.assign(2 * spatial, 0);
  if (static_cast<int64_t>(s.kernel.size()) != spatial ||
      static_cast<int64_t>(s.strides.size()) != spatial ||
      static_cast<int64_t>(s.dilations.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return ctx.Error("kernel_shape/strides/dilations/pads do not match the spatial rank");
  s.pads_lo.assign(pads.begin(), pads.begin() + spatial);
  s.pads_hi.assign(pads.begin() + spatial, pads.end());
  return s;
}

Status Conv(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * w, ctx.Input(1));
  int64_t rank = x->shape().rank();
  if (rank < 3 || w->shape().rank() != rank) return ctx.Error("expects NC... input and OI... weights");
  int64_t spatial = rank - 2;
  std::vector<int64_t> kernel(w->shape().dimensions().begin() + 2, w->shape().dimensions().end());
  MS_ASSIGN_OR_RETURN(SpatialAttrs s, ReadSpatial(ctx, spatial, kernel));
  ConvolutionDimensionNumbers dn;
  dn.input_batch_dimension = 0;
  dn.input_feature_dimension = 1;
  dn.kernel_output_feature_dimension = 0;
  dn.kernel_input_feature_dimension = 1;
  dn.output_batch_dimension = 0;
  dn.output_feature_dimension = 1;
  Window window;
  for (int64_t i = 0; i < spatial; ++i) {
    dn.input_spatial_dimensions.push_back(2 + i);
    dn.kernel_spatial_dimensions.push_back(2 + i);
    dn.output_spatial_dimensions.push_back(2 + i);
    window.push_back(s.WindowDim(i));
  }
  Attributes attrs;
  attrs.conv_dnums = dn;
  attrs.window = window;
  attrs.feature_group_count = AttrInt(ctx.node(), "group", 1);
  MS_ASSIGN_OR_RETURN(Instruction * y, ctx.Emit(Opcode::kConvolution, Shape(), {x, w}, attrs));
  if (ctx.HasInput(2)) {
    MS_ASSIGN_OR_RETURN(Instruction * b, ctx.Input(2));
    Attributes battrs;
    battrs.dimensions = {1};
    MS_ASSIGN_OR_RETURN(b, ctx.Emit(Opcode::kBroadcast, y->shape(), {b}, battrs));
    MS_ASSIGN_OR_RETURN(y, ctx.Emit(Opcode::kAdd, Shape(), {y, b}));
  }
  ctx.SetOutput(0, y);
  return Status::Ok();
}

// reduce-window over the spatial dims of an NC... tensor.
StatusOr<Instruction*> Pool(Context& ctx, Instruction* x, const SpatialAttrs& s, Opcode op,
                            double init) {
  Window window(2);  // N and C: size 1
  for (size_t i = 0; i < s.kernel.size(); ++i) window.push_back(s.WindowDim(i));
  Attributes attrs;
  attrs.window = window;
  PrimitiveType t = x->shape().element_type();
  return ctx.Emit(Opcode::kReduceWindow, Shape(), {x, ctx.ScalarConstant(t, init)}, attrs,
                  {ctx.Reducer(op, t)});
}

LowerFn PoolOp(bool max) {
  return [max](Context& ctx) -> Status {
    MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
    int64_t spatial = x->shape().rank() - 2;
    if (spatial < 1) return ctx.Error("expects an NC... input");
    if (ctx.node().output_size() > 1 && !ctx.node().output(1).empty())
      return ctx.Error("the Indices output is not supported");
    MS_ASSIGN_OR_RETURN(SpatialAttrs s, ReadSpatial(ctx, spatial, {}));
    if (AttrInt(ctx.node(), "ceil_mode", 0)) return ctx.Error("ceil_mode=1 is not supported");
    Instruction* y;
    if (max) {
      MS_ASSIGN_OR_RETURN(y, Pool(ctx, x, s, Opcode::kMaximum,
                                  -std::numeric_limits<double>::infinity()));
    } else {
      bool padded = false;
      for (size_t i = 0; i < s.pads_lo.size(); ++i) padded |= s.pads_lo[i] || s.pads_hi[i];
      if (padded && !AttrInt(ctx.node(), "count_include_pad", 0))
        return ctx.Error("AveragePool with padding needs count_include_pad=1");
      MS_ASSIGN_OR_RETURN(y, Pool(ctx, x, s, Opcode::kAdd, 0));
      int64_t count = 1;
      for (int64_t k : s.kernel)
        if (__builtin_mul_overflow(count, k, &count))
          return ctx.Error("the pooling window has more than 2^63 elements");
      MS_ASSIGN_OR_RETURN(y, ctx.Binary(Opcode::kDivide, y,
                                        ctx.ScalarConstant(y->shape().element_type(), count)));
    }
    ctx.SetOutput(0, y);
    return Status::Ok();
  };
}

LowerFn GlobalPool(bool max) {
  return [max](Context& ctx) -> Status {
    MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
    if (x->shape().rank() < 2) return ctx.Error("expects an NC... input");
    std::vector<int64_t> dims, kept = x->shape().dimensions();
    int64_t count = 1;
    for (int64_t d = 2; d < x->shape().rank(); ++d) {
      dims.push_back(d);
      count *= kept[d];
      kept[d] = 1;
    }
    Instruction* y;
    if (max) {
      MS_ASSIGN_OR_RETURN(y, ctx.Reduce(x, dims, Opcode::kMaximum,
                                        -std::numeric_limits<double>::infinity()));
    } else {
      MS_ASSIGN_OR_RETURN(y, ctx.Reduce(x, dims, Opcode::kAdd, 0));
      MS_ASSIGN_OR_RETURN(y, ctx.Binary(Opcode::kDivide, y,
                                        ctx.ScalarConstant(y->shape().element_type(), count)));
    }
    MS_ASSIGN_OR_RETURN(y, ctx.Reshape(y, kept));
    ctx.SetOutput(0, y);
    return Status::Ok();
  };
}

// Inference form: (x - mean) / sqrt(var + eps) * scale + bias, per channel.
Status BatchNormalization(Context& ctx) {
  if (AttrInt(ctx.node(), "training_mode", 0))
    return ctx.Error("training_mode=1 is not supported");
  if (AttrInt(ctx.node(), "spatial", 1) != 1)
    return ctx.Error("spatial=0 (statistics per element, opset < 9) is not supported");
  MS_ASSIGN_OR_RETURN(Instruction * x, ctx.Input(0));
  std::vector<Instruction*> p(4);
  for (int i = 0; i < 4; ++i) {
    MS_ASSIGN_OR_RETURN(Instruction * v, ctx.Input(i + 1));
    Attributes a;
    a.dimensions = {1};
    MS_ASSIGN_OR_RETURN(p[i], ctx.Emit(Opcode::kBroadcast, x->shape(), {v}, a));
  }
  PrimitiveType t = x->shape().element_type();
  MS_ASSIGN_OR_RETURN(Instruction * var_eps,
                      ctx.Binary(Opcode::kAdd, p[3],
                                 ctx.ScalarConstant(t, AttrFloat(ctx.node(), "epsilon", 1e-5f))));
  MS_ASSIGN_OR_RETURN(Instruction * inv, ctx.Emit(Opcode::kRsqrt, Shape(), {var_eps}));
  MS_ASSIGN_OR_RETURN(Instruction * y, ctx.Emit(Opcode::kSubtract, Shape(), {x, p[2]}));
  MS_ASSIGN_OR_RETURN(y, ctx.Emit(Opcode::kMultiply, Shape(), {y, inv}));
  MS_ASSIGN_OR_RETURN(y, ctx.Emit(Opcode::kMultiply, Shape(), {y, p[0]}));
  MS_ASSIGN_OR_RETURN(y, ctx.Emit(Opcode::kAdd, Shape(), {y, p[1]}));
  ctx.SetOutput(0, y);
  return Status::Ok();
}

}  // namespace

void RegisterConvOps(OpTable& t) {
  t["Conv"] = {Conv, 2, 3, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}};
  t["MaxPool"] = {PoolOp(true), 1, 1,
        {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}};
  t["AveragePool"] = {PoolOp(false), 1, 1,
        {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}};
  t["GlobalAveragePool"] = {GlobalPool(false), 1, 1};
  t["GlobalMaxPool"] = {GlobalPool(true), 1, 1};
  t["BatchNormalization"] = {BatchNormalization, 5, 5,
        {"epsilon", "momentum", "spatial", "training_mode"}};
}

}  // namespace meshsplit::onnx_import
