// Instruction use-def bookkeeping.
#include "ir/instruction.h"

#include <algorithm>

#include "ir/computation.h"
#include "support/check.h"

namespace meshsplit {

namespace {
void RemoveOneUse(std::vector<Instruction*>& users, Instruction* user) {
  auto it = std::find(users.begin(), users.end(), user);
  if (it != users.end()) users.erase(it);
}
}  // namespace

void Instruction::AppendOperand(Instruction* operand) {
  MS_CHECK(operand != nullptr);
  operands_.push_back(operand);
  if (std::find(operand->users_.begin(), operand->users_.end(), this) ==
      operand->users_.end())
    operand->users_.push_back(this);
}

void Instruction::ReplaceOperand(int i, Instruction* new_operand) {
  Instruction* old = operands_[i];
  if (old == new_operand) return;
  operands_[i] = new_operand;
  if (std::find(operands_.begin(), operands_.end(), old) == operands_.end())
    RemoveOneUse(old->users_, this);
  if (std::find(new_operand->users_.begin(), new_operand->users_.end(),
                this) == new_operand->users_.end())
    new_operand->users_.push_back(this);
}

void Instruction::ReplaceAllUsesWith(Instruction* other) {
  MS_CHECK(other != this);
  std::vector<Instruction*> users = users_;
  for (Instruction* user : users) {
    for (int i = 0; i < user->operand_count(); ++i)
      if (user->operands_[i] == this) user->ReplaceOperand(i, other);
  }
  if (parent_ != nullptr && parent_->root() == this) parent_->set_root(other);
}

void Instruction::DropAllOperands() {
  for (Instruction* op : operands_) RemoveOneUse(op->users_, this);
  operands_.clear();
}

bool Instruction::IsRoot() const {
  return parent_ != nullptr && parent_->root() == this;
}

}  // namespace meshsplit
