// A module: computations (callees before callers) with one entry, plus the
// header attributes (num_partitions, entry_computation_layout, ...).
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/computation.h"

namespace meshsplit {

class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }

  // A deep copy: the same computations (in order, with the same names,
  // instructions in the same order, operands, control edges, attributes,
  // literals, shardings and source locations), entry, header and reserved
  // names. The copy shares nothing with this module.
  std::unique_ptr<Module> Clone() const;

  const std::vector<std::unique_ptr<Computation>>& computations() const {
    return computations_;
  }
  Computation* AddComputation(std::unique_ptr<Computation> c);
  Computation* entry() const { return entry_; }
  void set_entry(Computation* c) { entry_ = c; }
  Computation* FindComputation(const std::string& name) const;
  void RemoveComputation(Computation* c);
  // Removes `c` from the module without destroying it (to move it into
  // another module).
  std::unique_ptr<Computation> ReleaseComputation(Computation* c);

  // Computations ordered callees before callers (the entry last).
  std::vector<Computation*> MakeComputationPostOrder() const;

  // Header: `HloModule name, key=value, ...`. num_partitions and
  // replica_count are interpreted; the rest is kept verbatim in order.
  int64_t num_partitions() const { return num_partitions_; }
  void set_num_partitions(int64_t n) { num_partitions_ = n; }
  int64_t replica_count() const { return replica_count_; }
  void set_replica_count(int64_t n) { replica_count_ = n; }
  const std::vector<std::pair<std::string, std::string>>& header_attrs() const {
    return header_attrs_;
  }
  std::vector<std::pair<std::string, std::string>>& mutable_header_attrs() {
    return header_attrs_;
  }

  // A name not used by any instruction of the module, derived from `prefix`
  // ("add" -> "add.7").
  std::string UniqueInstructionName(const std::string& prefix);
  // Records a name as used (the parser calls this for every instruction).
  void ReserveName(const std::string& name);
  bool IsNameUsed(const std::string& name) const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<Computation>> computations_;
  Computation* entry_ = nullptr;
  int64_t num_partitions_ = 1;
  int64_t replica_count_ = 1;
  std::vector<std::pair<std::string, std::string>> header_attrs_;
  std::unordered_set<std::string> used_names_;
  int64_t next_suffix_ = 0;
};

}  // namespace meshsplit
