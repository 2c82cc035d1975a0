// Computation ownership and ordering.
#include "ir/computation.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/module.h"
#include "support/check.h"

namespace meshsplit {

bool Computation::IsEntry() const {
  return parent_ != nullptr && parent_->entry() == this;
}

Instruction* Computation::AddInstruction(std::unique_ptr<Instruction> instr) {
  instr->parent_ = this;
  Instruction* raw = instr.get();
  instructions_.push_back(std::move(instr));
  if (raw->opcode() == Opcode::kParameter) {
    int64_t n = raw->attrs().parameter_number;
    if (n >= static_cast<int64_t>(parameters_.size()))
      parameters_.resize(n + 1, nullptr);
    parameters_[n] = raw;
  }
  return raw;
}

void Computation::RemoveInstruction(Instruction* instr) {
  MS_CHECK_MSG(instr->users().empty(), "removing " << instr->name() << " with users");
  MS_CHECK(root_ != instr);
  instr->DropAllOperands();
  for (auto& other : instructions_) {
    auto& preds = other->control_predecessors_;
    preds.erase(std::remove(preds.begin(), preds.end(), instr), preds.end());
  }
  auto it = std::find_if(instructions_.begin(), instructions_.end(),
                         [&](const auto& p) { return p.get() == instr; });
  MS_CHECK(it != instructions_.end());
  if (instr->opcode() == Opcode::kParameter) {
    auto pit = std::find(parameters_.begin(), parameters_.end(), instr);
    if (pit != parameters_.end()) *pit = nullptr;
  }
  instructions_.erase(it);
}

Instruction* Computation::Find(const std::string& name) const {
  for (const auto& i : instructions_)
    if (i->name() == name) return i.get();
  return nullptr;
}

std::vector<Instruction*> Computation::MakePostOrder() const {
  std::vector<Instruction*> order;
  order.reserve(instructions_.size());
  std::unordered_set<const Instruction*> visited;
  visited.reserve(instructions_.size() * 2);
  // Iterative DFS so that deep chains cannot overflow the stack.
  std::vector<std::pair<Instruction*, size_t>> stack;
  for (const auto& start : instructions_) {
    if (visited.count(start.get())) continue;
    stack.push_back({start.get(), 0});
    visited.insert(start.get());
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      size_t n_ops = node->operands().size();
      size_t n_all = n_ops + node->control_predecessors().size();
      if (next < n_all) {
        Instruction* dep = next < n_ops ? node->operands()[next]
                                        : node->control_predecessors()[next - n_ops];
        ++next;
        if (dep->parent() == this && visited.insert(dep).second)
          stack.push_back({dep, 0});
        continue;
      }
      order.push_back(node);
      stack.pop_back();
    }
  }
  return order;
}

void Computation::SortTopologically() {
  std::vector<Instruction*> order = MakePostOrder();
  std::unordered_map<Instruction*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::sort(instructions_.begin(), instructions_.end(),
            [&](const auto& a, const auto& b) {
              return position[a.get()] < position[b.get()];
            });
}

}  // namespace meshsplit
