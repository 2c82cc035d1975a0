// One HLO instruction: opcode, result shape, operands, called computations,
// attributes, an optional sharding and the source location it was parsed
// from. Instructions are owned by their Computation.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/attributes.h"
#include "ir/literal.h"
#include "ir/opcode.h"
#include "ir/shape.h"
#include "sharding/sharding.h"
#include "support/source_loc.h"

namespace meshsplit {

class Computation;

class Instruction {
 public:
  Instruction(Opcode opcode, std::string name, Shape shape)
      : opcode_(opcode), name_(std::move(name)), shape_(std::move(shape)) {}
  Instruction(const Instruction&) = delete;
  Instruction& operator=(const Instruction&) = delete;

  Opcode opcode() const { return opcode_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  const Shape& shape() const { return shape_; }
  Shape& mutable_shape() { return shape_; }
  void set_shape(Shape s) { shape_ = std::move(s); }
  Computation* parent() const { return parent_; }

  // Operands and users. Use Computation/ReplaceOperand helpers to keep the
  // two lists consistent.
  const std::vector<Instruction*>& operands() const { return operands_; }
  Instruction* operand(int i) const { return operands_[i]; }
  int operand_count() const { return static_cast<int>(operands_.size()); }
  const std::vector<Instruction*>& users() const { return users_; }
  void AppendOperand(Instruction* operand);
  void ReplaceOperand(int i, Instruction* new_operand);
  // Makes every user of this instruction use `other` instead.
  void ReplaceAllUsesWith(Instruction* other);
  void DropAllOperands();

  // Control dependencies (`control-predecessors={a, b}`).
  const std::vector<Instruction*>& control_predecessors() const {
    return control_predecessors_;
  }
  void AddControlPredecessor(Instruction* pred) {
    control_predecessors_.push_back(pred);
  }

  // to_apply / condition+body / branch_computations / calls.
  const std::vector<Computation*>& called_computations() const {
    return called_;
  }
  void set_called_computations(std::vector<Computation*> c) {
    called_ = std::move(c);
  }
  // Named accessors for the computations of control-flow ops.
  // while: called_[0] = condition, called_[1] = body.
  // conditional: the branch computations in order (true, false for pred).
  // reduce/reduce-window/scatter/sort/all-reduce/map/call: called_[0].
  // select-and-scatter: called_[0] = select, called_[1] = scatter.
  Computation* to_apply() const { return called_.empty() ? nullptr : called_[0]; }
  Computation* while_condition() const { return called_[0]; }
  Computation* while_body() const { return called_[1]; }

  const Attributes& attrs() const { return attrs_; }
  Attributes& mutable_attrs() { return attrs_; }

  // The value of a constant.
  const Literal& literal() const { return *literal_; }
  bool has_literal() const { return literal_ != nullptr; }
  void set_literal(Literal l) { literal_ = std::make_unique<Literal>(std::move(l)); }

  const std::optional<Sharding>& sharding() const { return sharding_; }
  bool has_sharding() const { return sharding_.has_value(); }
  void set_sharding(Sharding s) { sharding_ = std::move(s); }
  void clear_sharding() { sharding_.reset(); }

  const SourceLoc& loc() const { return loc_; }
  void set_loc(SourceLoc loc) { loc_ = std::move(loc); }

  bool IsRoot() const;

 private:
  friend class Computation;
  Opcode opcode_;
  std::string name_;
  Shape shape_;
  Computation* parent_ = nullptr;
  std::vector<Instruction*> operands_;
  std::vector<Instruction*> users_;
  std::vector<Instruction*> control_predecessors_;
  std::vector<Computation*> called_;
  Attributes attrs_;
  std::unique_ptr<Literal> literal_;
  std::optional<Sharding> sharding_;
  SourceLoc loc_;
};

}  // namespace meshsplit
