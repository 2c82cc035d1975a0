// A computation: an ordered list of instructions (SSA), its parameters and
// its root. Owned by a Module.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/instruction.h"

namespace meshsplit {

class Module;

class Computation {
 public:
  explicit Computation(std::string name) : name_(std::move(name)) {}
  Computation(const Computation&) = delete;
  Computation& operator=(const Computation&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  Module* parent() const { return parent_; }
  bool IsEntry() const;

  // Instructions in text order (a valid topological order after parsing).
  const std::vector<std::unique_ptr<Instruction>>& instructions() const {
    return instructions_;
  }
  int instruction_count() const { return static_cast<int>(instructions_.size()); }

  // Appends an instruction and takes ownership. Parameters are also recorded
  // by parameter_number.
  Instruction* AddInstruction(std::unique_ptr<Instruction> instr);
  // Removes an instruction with no users (its operands lose it as a user).
  void RemoveInstruction(Instruction* instr);
  // Instruction by name, or nullptr.
  Instruction* Find(const std::string& name) const;

  Instruction* root() const { return root_; }
  void set_root(Instruction* r) { root_ = r; }
  const std::vector<Instruction*>& parameters() const { return parameters_; }
  Instruction* parameter(int i) const { return parameters_[i]; }
  int parameter_count() const { return static_cast<int>(parameters_.size()); }

  // Operands before users; control predecessors before successors. Covers
  // every instruction, including dead ones.
  std::vector<Instruction*> MakePostOrder() const;

  // Sorts instructions_ into MakePostOrder() order.
  void SortTopologically();

  // Execution thread named in the text (`, execution_thread="..."`), if any.
  const std::string& execution_thread() const { return execution_thread_; }
  void set_execution_thread(std::string t) { execution_thread_ = std::move(t); }

  const SourceLoc& loc() const { return loc_; }
  void set_loc(SourceLoc loc) { loc_ = std::move(loc); }

 private:
  friend class Module;
  std::string name_;
  Module* parent_ = nullptr;
  std::vector<std::unique_ptr<Instruction>> instructions_;
  std::vector<Instruction*> parameters_;
  Instruction* root_ = nullptr;
  std::string execution_thread_;
  SourceLoc loc_;
};

}  // namespace meshsplit
