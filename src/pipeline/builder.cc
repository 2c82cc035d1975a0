#include "pipeline/builder.h"

namespace meshsplit {

Instruction* Builder::Add(Opcode op, Shape shape, std::vector<Instruction*> operands,
                          const std::string& hint) {
  auto instr = std::make_unique<Instruction>(op, module_.UniqueInstructionName(hint),
                                             std::move(shape));
  for (Instruction* o : operands) instr->AppendOperand(o);
  instr->set_loc(loc_);
  return comp_.AddInstruction(std::move(instr));
}

Instruction* Builder::Parameter(int64_t number, Shape shape, const std::string& hint) {
  auto instr = std::make_unique<Instruction>(Opcode::kParameter,
                                             module_.UniqueInstructionName(hint), std::move(shape));
  instr->mutable_attrs().parameter_number = number;
  instr->set_loc(loc_);
  return comp_.AddInstruction(std::move(instr));
}

Instruction* Builder::Scalar(PrimitiveType type, double v) {
  Instruction* c = Add(Opcode::kConstant, Shape(type, {}), {}, "constant");
  c->set_literal(Literal::ScalarOfType(type, v));
  return c;
}

Instruction* Builder::ConstantS32(int64_t v) {
  return Scalar(PrimitiveType::S32, static_cast<double>(v));
}

Instruction* Builder::Element(Instruction* tuple, int64_t index) {
  Instruction* g = Add(Opcode::kGetTupleElement, tuple->shape().tuple_shapes(static_cast<int>(index)),
                       {tuple}, "get-tuple-element");
  g->mutable_attrs().tuple_index = index;
  return g;
}

Instruction* Builder::Tuple(std::vector<Instruction*> elements) {
  std::vector<Shape> shapes;
  for (Instruction* e : elements) shapes.push_back(e->shape());
  return Add(Opcode::kTuple, Shape::Tuple(std::move(shapes)), std::move(elements), "tuple");
}

Instruction* Builder::Binary(Opcode op, Instruction* a, Instruction* b) {
  return Add(op, a->shape(), {a, b}, std::string(OpcodeName(op)));
}

Instruction* Builder::Compare(Instruction* a, Instruction* b, ComparisonDirection dir) {
  Instruction* c = Add(Opcode::kCompare, Shape(PrimitiveType::PRED, a->shape().dimensions()),
                       {a, b}, "compare");
  c->mutable_attrs().comparison_direction = dir;
  return c;
}

Instruction* Builder::Broadcast(Instruction* scalar, const std::vector<int64_t>& dims) {
  return Add(Opcode::kBroadcast, Shape(scalar->shape().element_type(), dims), {scalar},
             "broadcast");
}

Instruction* Builder::Reshape(Instruction* x, const std::vector<int64_t>& dims) {
  return Add(Opcode::kReshape, Shape(x->shape().element_type(), dims), {x}, "reshape");
}

Instruction* Builder::Transpose(Instruction* x, const std::vector<int64_t>& perm) {
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(x->shape().dimensions(static_cast<int>(p)));
  Instruction* t = Add(Opcode::kTranspose, Shape(x->shape().element_type(), dims), {x},
                       "transpose");
  t->mutable_attrs().dimensions = perm;
  return t;
}

Instruction* Builder::SliceRow(Instruction* x, Instruction* index) {
  return SliceBlock(x, {index}, {1});
}

Instruction* Builder::SliceBlock(Instruction* x, const std::vector<Instruction*>& starts,
                                 const std::vector<int64_t>& sizes) {
  std::vector<int64_t> dims = x->shape().dimensions();
  std::vector<Instruction*> operands = {x};
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d < starts.size()) dims[d] = sizes[d];
    operands.push_back(d < starts.size() ? starts[d] : ConstantS32(0));
  }
  Instruction* s = Add(Opcode::kDynamicSlice, Shape(x->shape().element_type(), dims),
                       std::move(operands), "dynamic-slice");
  s->mutable_attrs().dynamic_slice_sizes = dims;
  return s;
}

Instruction* Builder::UpdateRow(Instruction* x, Instruction* row, Instruction* index) {
  return UpdateBlock(x, row, {index});
}

Instruction* Builder::UpdateBlock(Instruction* x, Instruction* update,
                                  const std::vector<Instruction*>& starts) {
  std::vector<Instruction*> operands = {x, update};
  for (int d = 0; d < x->shape().rank(); ++d)
    operands.push_back(d < static_cast<int>(starts.size()) ? starts[d] : ConstantS32(0));
  return Add(Opcode::kDynamicUpdateSlice, x->shape(), std::move(operands),
             "dynamic-update-slice");
}

Instruction* Builder::CustomCall(const std::string& target, Instruction* x, Shape shape,
                                 const Sharding& sharding) {
  Instruction* c = Add(Opcode::kCustomCall, std::move(shape), {x}, "custom-call");
  c->mutable_attrs().custom_call_target = target;
  c->set_sharding(sharding);
  return c;
}

}  // namespace meshsplit
