// Module ownership, computation order and unique names.
#include "ir/module.h"

#include <algorithm>
#include <unordered_set>

#include "support/check.h"

namespace meshsplit {

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
