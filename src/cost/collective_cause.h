// Why a collective exists: maps each collective of a partitioned module back
// to the instruction of the original (sharded) module it came from, the
// reshard (from-sharding -> to-sharding) or op rule that needed it, and the
// user annotation at the root of that sharding's chain. The partitioner marks
// nothing, so this reads the program: it follows the collective's operands
// and users to the nearest instructions that keep an original name.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>

#include "ir/module.h"

namespace meshsplit {

struct CollectiveCause {
  std::string source;       // original instruction whose value moves ("" if none)
  std::string source_op;    // its opcode
  std::string consumer;     // original instruction that needs the moved value
  std::string from_sharding;
  std::string to_sharding;
  std::string rule;         // "reshard", "partial-sum of dot", ...
  std::string annotation;   // annotated instruction at the root of the chain
  // One line: "o (dot): partial-sum of dot -> {replicated}; root annotation: w2".
  std::string ToString() const;
};

// `original`: the module after propagation (instructions carry shardings).
// `root_annotation(name)` returns the annotated instruction that the
// sharding of `name` was derived from ("" when unknown); may be empty.
class CollectiveCauseFinder {
 public:
  CollectiveCauseFinder(const Module& original,
                        std::function<std::string(const std::string&)> root_annotation);
  CollectiveCause Find(const Instruction& collective) const;

 private:
  std::unordered_map<std::string, const Instruction*> by_name_;
  std::function<std::string(const std::string&)> root_annotation_;
};

}  // namespace meshsplit
