// Module ownership, computation order and unique names.
#include "ir/module.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/computation.h"
#include "ir/instruction.h"

#include "support/check.h"

namespace meshsplit {

std::unique_ptr<Module> Module::Clone() const {
  auto out = std::make_unique<Module>(name_);
  std::unordered_map<const Computation*, Computation*> computations;
  std::unordered_map<const Instruction*, Instruction*> instructions;
  for (const auto& c : computations_) {
    auto copy = std::make_unique<Computation>(c->name());
    copy->set_execution_thread(c->execution_thread());
    copy->set_loc(c->loc());
    for (const auto& in : c->instructions()) {
      auto i = std::make_unique<Instruction>(in->opcode(), in->name(), in->shape());
      i->mutable_attrs() = in->attrs();
      if (in->has_literal()) i->set_literal(in->literal());
      if (in->has_sharding()) i->set_sharding(*in->sharding());
      i->set_loc(in->loc());
      instructions[in.get()] = copy->AddInstruction(std::move(i));
    }
    computations[c.get()] = out->AddComputation(std::move(copy));
  }
  // Edges second: operands may come later in an instruction list that a
  // transform left out of topological order, and calls may name any
  // computation.
  for (const auto& c : computations_) {
    Computation* copy = computations.at(c.get());
    if (c->root() != nullptr) copy->set_root(instructions.at(c->root()));
    for (const auto& in : c->instructions()) {
      Instruction* i = instructions.at(in.get());
      for (const Instruction* o : in->operands()) i->AppendOperand(instructions.at(o));
      for (const Instruction* p : in->control_predecessors())
        i->AddControlPredecessor(instructions.at(p));
      std::vector<Computation*> called;
      for (const Computation* cc : in->called_computations()) called.push_back(computations.at(cc));
      i->set_called_computations(std::move(called));
    }
  }
  if (entry_ != nullptr) out->entry_ = computations.at(entry_);
  out->num_partitions_ = num_partitions_;
  out->replica_count_ = replica_count_;
  out->header_attrs_ = header_attrs_;
  out->used_names_ = used_names_;
  out->next_suffix_ = next_suffix_;
  return out;
}

Computation* Module::AddComputation(std::unique_ptr<Computation> c) {
  c->parent_ = this;
  computations_.push_back(std::move(c));
  return computations_.back().get();
}

Computation* Module::FindComputation(const std::string& name) const {
  for (const auto& c : computations_)
    if (c->name() == name) return c.get();
  return nullptr;
}

void Module::RemoveComputation(Computation* c) {
  auto it = std::find_if(computations_.begin(), computations_.end(),
                         [&](const auto& p) { return p.get() == c; });
  MS_CHECK(it != computations_.end());
  computations_.erase(it);
}

std::unique_ptr<Computation> Module::ReleaseComputation(Computation* c) {
  auto it = std::find_if(computations_.begin(), computations_.end(),
                         [&](const auto& p) { return p.get() == c; });
  MS_CHECK(it != computations_.end());
  std::unique_ptr<Computation> owned = std::move(*it);
  computations_.erase(it);
  if (entry_ == c) entry_ = nullptr;
  owned->parent_ = nullptr;
  return owned;
}

std::vector<Computation*> Module::MakeComputationPostOrder() const {
  std::vector<Computation*> order;
  std::unordered_set<const Computation*> visited;
  // DFS over call edges; callees first. Computations not reachable from the
  // entry keep their relative order, before the entry.
  std::vector<std::pair<Computation*, bool>> stack;
  auto visit = [&](Computation* root) {
    if (visited.count(root)) return;
    stack.push_back({root, false});
    while (!stack.empty()) {
      auto [c, expanded] = stack.back();
      stack.pop_back();
      if (expanded) {
        order.push_back(c);
        continue;
      }
      if (visited.count(c)) continue;
      visited.insert(c);
      stack.push_back({c, true});
      for (const auto& instr : c->instructions()) {
        const auto& called = instr->called_computations();
        for (auto it = called.rbegin(); it != called.rend(); ++it)
          if (!visited.count(*it)) stack.push_back({*it, false});
      }
    }
  };
  for (const auto& c : computations_)
    if (c.get() != entry_) visit(c.get());
  if (entry_ != nullptr) visit(entry_);
  return order;
}

void Module::ReserveName(const std::string& name) { used_names_.insert(name); }

bool Module::IsNameUsed(const std::string& name) const {
  return used_names_.count(name) > 0;
}

std::string Module::UniqueInstructionName(const std::string& prefix) {
  std::string base = prefix.empty() ? "v" : prefix;
  // Strip a trailing ".N" so clones of "add.3" become "add.17", not "add.3.1".
  size_t dot = base.rfind('.');
  if (dot != std::string::npos && dot + 1 < base.size() &&
      std::all_of(base.begin() + dot + 1, base.end(), ::isdigit))
    base = base.substr(0, dot);
  if (!IsNameUsed(base)) {
    ReserveName(base);
    return base;
  }
  for (;;) {
    std::string candidate = base + "." + std::to_string(++next_suffix_);
    if (!IsNameUsed(candidate)) {
      ReserveName(candidate);
      return candidate;
    }
  }
}

}  // namespace meshsplit
