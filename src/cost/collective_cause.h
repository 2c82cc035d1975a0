// Why a collective exists: maps each collective of a partitioned module back
// to the instruction of the original (sharded) module it came from, the
// reshard (from-sharding -> to-sharding) or op rule that needed it, and the
// user annotation at the root of that sharding's chain. The partitioner
// records the instruction, rule and reshard on every collective it emits
// (frontend attributes ms_instr, ms_op, ms_rule, ms_reshard, ms_value; see
// partitioner/spmd_builder.h); only collectives without them (written by
// hand, or by an older partitioner) get a cause inferred from the program.
#pragma once

#include <functional>
#include <utility>
#include <vector>
#include <string>
#include <unordered_map>

#include "ir/module.h"

namespace meshsplit {

struct CollectiveCause {
  // True when the partitioner recorded the cause; false when it was inferred
  // from the program's names (a heuristic).
  bool recorded = false;
  std::string instruction;  // input instruction being partitioned (recorded;
                            // "" for the reshard of a computation's root)
  std::string op;           // its opcode
  std::string source;       // original instruction whose value moves ("" if none)
  std::string source_op;    // its opcode
  std::string consumer;     // original instruction that needs the moved value
  std::string from_sharding;
  std::string to_sharding;
  std::string rule;         // "dot: contracting dims sharded -> partial sums", "reshard", ...
  std::string annotation;   // annotated instruction at the root of the chain
  // One line, e.g. "y (dot): dot: contracting dims sharded -> partial sums;
  // reshard y {unreduced} -> {replicated}; root annotation: y". Inferred
  // causes end in "; cause: inferred".
  std::string ToString() const;
};

// The frontend attributes of `instr` as (key, value) pairs, values
// unescaped; empty when it has none or they do not parse.
std::vector<std::pair<std::string, std::string>> FrontendAttributes(const Instruction& instr);

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
