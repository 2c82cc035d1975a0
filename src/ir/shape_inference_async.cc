// Shape rules of fusion and the asynchronous start / update / done opcodes,
// with XLA's tuple layouts (hlo_instructions.cc, shape_inference.cc). The
// per-opcode switch in shape_inference.cc sends these ops here; the sync
// collective a start wraps is inferred there and passed in.
#include "ir/shape_inference_async.h"

#include "ir/computation.h"
#include "ir/shape_inference_util.h"

namespace meshsplit {

using shape_inference_internal::Err;

namespace {

std::string Str(const Shape& s) { return s.ToString(/*print_layout=*/false); }

Shape OperandTuple(const Instruction& instr) {
  std::vector<Shape> ops;
  for (const Instruction* o : instr.operands()) ops.push_back(o->shape());
  return Shape::Tuple(std::move(ops));
}

// The called computation must take the operands' shapes.
Status CheckParameters(const Instruction& instr, const Computation* c, const char* role) {
  if (c == nullptr) return Err(role, " computation is missing");
  if (c->parameter_count() != instr.operand_count())
    return Err(role, " computation %", c->name(), " has ", c->parameter_count(),
               " parameters but the instruction has ", instr.operand_count(), " operands");
  for (int i = 0; i < c->parameter_count(); ++i) {
    const Instruction* p = c->parameter(i);
    if (p == nullptr) return Err(role, " computation %", c->name(), " has no parameter ", i);
    if (!p->shape().Compatible(instr.operand(i)->shape()))
      return Err("parameter ", i, " of ", role, " computation %", c->name(), " has shape ",
                 Str(p->shape()), " but operand ", i, " has shape ",
                 Str(instr.operand(i)->shape()));
  }
  if (c->root() == nullptr) return Err(role, " computation %", c->name(), " has no root");
  return Status::Ok();
}

// The context elements a start's declared tuple carries after its first
// `skip` elements, or `fallback` when the declaration has none. XLA's
// contexts are scalars (u32[] / s32[]) whose value means nothing to us.
StatusOr<std::vector<Shape>> Contexts(const Shape& declared, int skip,
                                      const std::vector<Shape>& fallback) {
  if (!declared.IsTuple() || declared.tuple_size() <= skip) return fallback;
  std::vector<Shape> out;
  for (int i = skip; i < declared.tuple_size(); ++i) {
    const Shape& c = declared.tuple_shapes(i);
    if (!c.IsArray() || c.rank() != 0)
      return Err("context element ", i, " must be a scalar but is declared ", Str(c));
    out.push_back(c);
  }
  return out;
}

// The operand of a done / update must come from the matching start (XLA's
// verifier insists; the partitioner and the interpreter pair them up).
Status OperandIs(const Instruction& instr, std::initializer_list<Opcode> allowed) {
  const Opcode got = instr.operand(0)->opcode();
  std::string names;
  for (Opcode o : allowed) {
    if (o == got) return Status::Ok();
    names += (names.empty() ? "" : " or ") + std::string(OpcodeName(o));
  }
  return Err("operand must be ", names, " but is ", OpcodeName(got), " %",
             instr.operand(0)->name());
}

StatusOr<Shape> Element(const Instruction& instr, int index, int min_size) {
  const Shape& t = instr.operand(0)->shape();
  if (!t.IsTuple() || t.tuple_size() < min_size)
    return Err("operand must be a tuple of at least ", min_size, " elements but has shape ",
               Str(t));
  return t.tuple_shapes(index);
}

}  // namespace

const Shape& DeclaredStartResult(const Instruction& instr) {
  const Shape& d = instr.shape();
  if ((instr.opcode() == Opcode::kAllGatherStart ||
       instr.opcode() == Opcode::kCollectivePermuteStart) &&
      d.IsTuple() && d.tuple_size() >= 2)
    return d.tuple_shapes(1);
  return d;
}

Opcode SyncCollectiveOf(Opcode op) {
  switch (op) {
    case Opcode::kAllReduceStart: return Opcode::kAllReduce;
    case Opcode::kAllGatherStart: return Opcode::kAllGather;
    case Opcode::kCollectivePermuteStart: return Opcode::kCollectivePermute;
    default: return op;
  }
}

StatusOr<Shape> InferCollectiveStartShape(const Instruction& instr, const Shape& sync_result) {
  const int n = instr.operand_count();
  switch (instr.opcode()) {
    case Opcode::kAllReduceStart:
      return sync_result;  // XLA: the start already has the result's shape
    case Opcode::kAllGatherStart: {
      // (operand, result); with several operands ((operands...), (results...)).
      Shape in = n == 1 ? instr.operand(0)->shape() : OperandTuple(instr);
      return Shape::Tuple({std::move(in), sync_result});
    }
    case Opcode::kCollectivePermuteStart: {
      // (operand, result, u32[], u32[]). The in-place form (buffers and
      // offsets as operands) states its element shapes itself.
      const Shape& d = instr.shape();
      if (n != 1) {
        if (!d.IsTuple() || d.tuple_size() < 2)
          return Err("result must be a tuple (input, output, context...) but is declared ",
                     Str(d));
        return d;
      }
      MS_ASSIGN_OR_RETURN(std::vector<Shape> ctx,
                          Contexts(d, 2, {Shape(PrimitiveType::U32, {}),
                                          Shape(PrimitiveType::U32, {})}));
      std::vector<Shape> elems = {instr.operand(0)->shape(), sync_result};
      for (Shape& c : ctx) elems.push_back(std::move(c));
      return Shape::Tuple(std::move(elems));
    }
    default:
      return Err("internal: not a collective start");
  }
}

StatusOr<Shape> InferAsyncOrFusionShape(const Instruction& instr) {
  const auto& called = instr.called_computations();
  switch (instr.opcode()) {
    case Opcode::kFusion: {
      if (called.size() != 1)
        return Err("expects one fused computation (calls=) but has ", called.size());
      MS_RETURN_IF_ERROR(CheckParameters(instr, called[0], "fused"));
      return called[0]->root()->shape();
    }
    case Opcode::kAsyncStart: {
      // ((operands...), wrapped result, context...).
      if (called.size() != 1)
        return Err("expects one wrapped computation (calls=) but has ", called.size());
      MS_RETURN_IF_ERROR(CheckParameters(instr, called[0], "wrapped"));
      MS_ASSIGN_OR_RETURN(std::vector<Shape> ctx, Contexts(instr.shape(), 2, {}));
      std::vector<Shape> elems = {OperandTuple(instr), called[0]->root()->shape()};
      for (Shape& c : ctx) elems.push_back(std::move(c));
      return Shape::Tuple(std::move(elems));
    }
    case Opcode::kAsyncUpdate:
    case Opcode::kAsyncDone: {
      MS_RETURN_IF_ERROR(
          OperandIs(instr, {Opcode::kAsyncStart, Opcode::kAsyncUpdate}));
      MS_ASSIGN_OR_RETURN(Shape result, Element(instr, 1, 2));
      if (called.size() > 1)
        return Err("expects at most one wrapped computation but has ", called.size());
      if (called.size() == 1 && called[0] != nullptr && called[0]->root() != nullptr &&
          !called[0]->root()->shape().Compatible(result))
        return Err("wrapped computation %", called[0]->name(), " returns ",
                   Str(called[0]->root()->shape()), " but the start holds ", Str(result));
      if (instr.opcode() == Opcode::kAsyncUpdate) return instr.operand(0)->shape();
      return result;
    }
    case Opcode::kAllReduceDone:
      MS_RETURN_IF_ERROR(OperandIs(instr, {Opcode::kAllReduceStart}));
      return instr.operand(0)->shape();
    case Opcode::kAllGatherDone:
      MS_RETURN_IF_ERROR(OperandIs(instr, {Opcode::kAllGatherStart}));
      return Element(instr, 1, 2);
    case Opcode::kCollectivePermuteDone:
      MS_RETURN_IF_ERROR(OperandIs(instr, {Opcode::kCollectivePermuteStart}));
      return Element(instr, 1, 2);
    case Opcode::kCopyStart: {
      // (destination, source, context): both buffers have the operand's shape.
      const Shape& x = instr.operand(0)->shape();
      MS_ASSIGN_OR_RETURN(std::vector<Shape> ctx,
                          Contexts(instr.shape(), 2, {Shape(PrimitiveType::U32, {})}));
      std::vector<Shape> elems = {x, x};
      for (Shape& c : ctx) elems.push_back(std::move(c));
      return Shape::Tuple(std::move(elems));
    }
    case Opcode::kCopyDone:
      MS_RETURN_IF_ERROR(OperandIs(instr, {Opcode::kCopyStart}));
      return Element(instr, 0, 2);
    default:
      return Err("internal: not a fusion or async opcode");
  }
}

}  // namespace meshsplit
