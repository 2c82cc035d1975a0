// ONNX elementwise ops (arithmetic, comparisons, logic, unary math, Where,
// Cast) and the trivial ones (Constant, Identity, Dropout). Binary ops use
// numpy broadcasting through Context::Binary.
#include "import/onnx_context.h"

namespace meshsplit::onnx_import {
namespace {

LowerFn BinaryOp(Opcode op) {
  return [op](Context& ctx) -> Status {
    MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
    MS_ASSIGN_OR_RETURN(Instruction * b, ctx.Input(1));
    MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Binary(op, a, b));
    ctx.SetOutput(0, r);
    return Status::Ok();
  };
}

// Max and Min take one or more inputs, broadcast together.
LowerFn VariadicOp(Opcode op) {
  return [op](Context& ctx) -> Status {
    MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Input(0));
    for (int i = 1; i < ctx.InputCount(); ++i) {
      MS_ASSIGN_OR_RETURN(Instruction * b, ctx.Input(i));
      MS_ASSIGN_OR_RETURN(r, ctx.Binary(op, r, b));
    }
    ctx.SetOutput(0, r);
    return Status::Ok();
  };
}

LowerFn CompareOp(ComparisonDirection dir) {
  return [dir](Context& ctx) -> Status {
    MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
    MS_ASSIGN_OR_RETURN(Instruction * b, ctx.Input(1));
    MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Compare(dir, a, b));
    ctx.SetOutput(0, r);
    return Status::Ok();
  };
}

LowerFn UnaryOp(Opcode op) {
  return [op](Context& ctx) -> Status {
    MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
    MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Emit(op, Shape(), {a}));
    ctx.SetOutput(0, r);
    return Status::Ok();
  };
}

Status Identity(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
  ctx.SetOutput(0, a);
  return Status::Ok();
}

// Dropout at inference: the identity; the optional mask output is all true.
// Training mode drops at random, which a reproducible program cannot do: it
// is refused unless the ratio is constant 0.
Status Dropout(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
  if (ctx.HasInput(2)) {
    MS_ASSIGN_OR_RETURN(std::vector<int64_t> training, ctx.ConstInts(2));
    bool zero_ratio = false;
    if (ctx.HasInput(1)) {
      MS_ASSIGN_OR_RETURN(Instruction * ratio, ctx.Input(1));
      zero_ratio = ratio->opcode() == Opcode::kConstant &&
                   ratio->literal().element_count() == 1 && ratio->literal().GetDouble(0) == 0;
    }
    if (training.size() != 1) return ctx.Error("training_mode must have one value");
    if (training[0] && !zero_ratio)
      return ctx.Error("Dropout in training mode (random) is not supported");
  }
  ctx.SetOutput(0, a);
  if (ctx.node().output_size() > 1 && !ctx.node().output(1).empty()) {
    Attributes attrs;
    attrs.dimensions = {};
    MS_ASSIGN_OR_RETURN(Instruction * mask,
                        ctx.Emit(Opcode::kBroadcast,
                                 Shape(PrimitiveType::PRED, a->shape().dimensions()),
                                 {ctx.ScalarConstant(PrimitiveType::PRED, 1)}, attrs));
    ctx.SetOutput(1, mask);
  }
  return Status::Ok();
}

Status ConstantOp(Context& ctx) {
  const auto& node = ctx.node();
  if (const auto* a = FindAttr(node, "value")) {
    auto lit = TensorToLiteral(a->t());
    if (!lit.ok()) return ctx.Error(lit.status().message());
    ctx.SetOutput(0, ctx.Constant(std::move(*lit)));
  } else if (const auto* a = FindAttr(node, "value_float")) {
    ctx.SetOutput(0, ctx.ScalarConstant(PrimitiveType::F32, a->f()));
  } else if (const auto* a = FindAttr(node, "value_int")) {
    ctx.SetOutput(0, ctx.ScalarConstant(PrimitiveType::S64, static_cast<double>(a->i())));
  } else if (const auto* a = FindAttr(node, "value_ints")) {
    Literal l(Shape(PrimitiveType::S64, {a->ints_size()}));
    for (int i = 0; i < a->ints_size(); ++i) l.SetInt(i, a->ints(i));
    ctx.SetOutput(0, ctx.Constant(std::move(l)));
  } else if (const auto* a = FindAttr(node, "value_floats")) {
    Literal l(Shape(PrimitiveType::F32, {a->floats_size()}));
    for (int i = 0; i < a->floats_size(); ++i) l.SetDouble(i, a->floats(i));
    ctx.SetOutput(0, ctx.Constant(std::move(l)));
  } else {
    return ctx.Error("Constant without a supported value attribute");
  }
  return Status::Ok();
}

Status Cast(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
  auto type = OnnxType(static_cast<int32_t>(AttrInt(ctx.node(), "to", 0)));
  if (!type.ok()) return ctx.Error(type.status().message());
  Instruction* r;
  if (a->shape().element_type() == PrimitiveType::PRED && *type != PrimitiveType::PRED) {
    MS_ASSIGN_OR_RETURN(r, ctx.Emit(Opcode::kConvert, Shape(*type, a->shape().dimensions()), {a}));
  } else {
    MS_ASSIGN_OR_RETURN(r, ctx.Convert(a, *type));
  }
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status Where(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * c, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(1));
  MS_ASSIGN_OR_RETURN(Instruction * b, ctx.Input(2));
  MS_RETURN_IF_ERROR(ctx.BroadcastPair(a, b));
  MS_RETURN_IF_ERROR(ctx.BroadcastPair(c, a));
  MS_RETURN_IF_ERROR(ctx.BroadcastPair(a, b));  // b may need c's dims
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Emit(Opcode::kSelect, Shape(), {c, a, b}));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

// x^2 (LayerNorm's variance) becomes a multiply: exact and cheaper.
Status Pow(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * b, ctx.Input(1));
  if (b->opcode() == Opcode::kConstant && b->shape().ElementCount() == 1 &&
      b->literal().GetDouble(0) == 2.0) {
    MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Emit(Opcode::kMultiply, Shape(), {a, a}));
    ctx.SetOutput(0, r);
    return Status::Ok();
  }
  MS_ASSIGN_OR_RETURN(b, ctx.Convert(b, a->shape().element_type()));
  MS_ASSIGN_OR_RETURN(Instruction * r, ctx.Binary(Opcode::kPower, a, b));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status Reciprocal(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * r,
                      ctx.Binary(Opcode::kDivide,
                                 ctx.ScalarConstant(a->shape().element_type(), 1), a));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

Status Relu(Context& ctx) {
  MS_ASSIGN_OR_RETURN(Instruction * a, ctx.Input(0));
  MS_ASSIGN_OR_RETURN(Instruction * r,
                      ctx.Binary(Opcode::kMaximum, a,
                                 ctx.ScalarConstant(a->shape().element_type(), 0)));
  ctx.SetOutput(0, r);
  return Status::Ok();
}

}  // namespace

void RegisterElementwiseOps(OpTable& t) {
  t["Add"] = {BinaryOp(Opcode::kAdd), 2, 2};
  t["Sub"] = {BinaryOp(Opcode::kSubtract), 2, 2};
  t["Mul"] = {BinaryOp(Opcode::kMultiply), 2, 2};
  t["Div"] = {BinaryOp(Opcode::kDivide), 2, 2};
  t["Max"] = {VariadicOp(Opcode::kMaximum), 1, OpRule::kVariadic};
  t["Min"] = {VariadicOp(Opcode::kMinimum), 1, OpRule::kVariadic};
  t["And"] = {BinaryOp(Opcode::kAnd), 2, 2};
  t["Or"] = {BinaryOp(Opcode::kOr), 2, 2};
  t["Xor"] = {BinaryOp(Opcode::kXor), 2, 2};
  t["Equal"] = {CompareOp(ComparisonDirection::kEq), 2, 2};
  t["Less"] = {CompareOp(ComparisonDirection::kLt), 2, 2};
  t["LessOrEqual"] = {CompareOp(ComparisonDirection::kLe), 2, 2};
  t["Greater"] = {CompareOp(ComparisonDirection::kGt), 2, 2};
  t["GreaterOrEqual"] = {CompareOp(ComparisonDirection::kGe), 2, 2};
  t["Not"] = {UnaryOp(Opcode::kNot), 1, 1};
  t["Neg"] = {UnaryOp(Opcode::kNegate), 1, 1};
  t["Abs"] = {UnaryOp(Opcode::kAbs), 1, 1};
  t["Sqrt"] = {UnaryOp(Opcode::kSqrt), 1, 1};
  t["Exp"] = {UnaryOp(Opcode::kExp), 1, 1};
  t["Log"] = {UnaryOp(Opcode::kLog), 1, 1};
  t["Tanh"] = {UnaryOp(Opcode::kTanh), 1, 1};
  t["Erf"] = {UnaryOp(Opcode::kErf), 1, 1};
  t["Sigmoid"] = {UnaryOp(Opcode::kLogistic), 1, 1};
  t["Floor"] = {UnaryOp(Opcode::kFloor), 1, 1};
  t["Ceil"] = {UnaryOp(Opcode::kCeil), 1, 1};
  t["Pow"] = {Pow, 2, 2};
  t["Reciprocal"] = {Reciprocal, 1, 1};
  t["Relu"] = {Relu, 1, 1};
  t["Where"] = {Where, 3, 3};
  t["Cast"] = {Cast, 1, 1, {"to"}};
  t["Constant"] = {ConstantOp, 0, 0,
        {"sparse_value", "value", "value_float", "value_floats", "value_int", "value_ints",
         "value_string", "value_strings"}};
  t["Identity"] = {Identity, 1, 1};
  t["Dropout"] = {Dropout, 1, 3, {"ratio", "seed"}};
}

}  // namespace meshsplit::onnx_import
