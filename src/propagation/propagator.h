// Internal state of one propagation run: the working shardings of every
// instruction, the caller/callee map of control flow, user-provided shardings,
// shard groups, and the forward/backward inference rules (split over
// infer_forward.cc, infer_backward.cc and gather_scatter.cc).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/computation.h"
#include "ir/module.h"
#include "propagation/propagation.h"
#include "propagation/sharding_ops.h"
#include "rules/op_rules.h"
#include "sharding/sharding.h"
#include "support/check.h"

namespace meshsplit::propagation {

// Instruction -> dense id, open addressing (the hottest lookup of the pass).
class PtrIndex {
 public:
  void Reserve(size_t n) {
    size_t cap = 16;
    int bits = 4;
    while (cap < 2 * n) cap <<= 1, ++bits;
    keys_.assign(cap, nullptr);
    vals_.assign(cap, -1);
    shift_ = 64 - bits;
    size_ = 0;
  }
  void Put(const void* k, int v) {
    if (keys_.empty() || 2 * (size_ + 1) > keys_.size()) Grow();
    size_t h = Hash(k);
    while (keys_[h] != nullptr && keys_[h] != k) h = (h + 1) & (keys_.size() - 1);
    if (keys_[h] == nullptr) ++size_;
    keys_[h] = k;
    vals_[h] = v;
  }
  int Find(const void* k) const {
    if (keys_.empty()) return -1;
    size_t h = Hash(k);
    while (keys_[h] != nullptr) {
      if (keys_[h] == k) return vals_[h];
      h = (h + 1) & (keys_.size() - 1);
    }
    return -1;
  }

 private:
  // Fibonacci hashing: the top bits of the product index the table.
  size_t Hash(const void* p) const {
    return static_cast<size_t>(
        (reinterpret_cast<uintptr_t>(p) * 0x9e3779b97f4a7c15ULL) >> shift_);
  }
  void Grow() {
    std::vector<const void*> keys = std::move(keys_);
    std::vector<int> vals = std::move(vals_);
    Reserve(std::max<size_t>(16, keys.size()));
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != nullptr) Put(keys[i], vals[i]);
  }
  std::vector<const void*> keys_;
  std::vector<int> vals_;
  int shift_ = 60;
  size_t size_ = 0;
};

class Propagator {
 public:
  Propagator(Module& module, const PropagationOptions& options,
             PropagationReport* report)
      : module_(module), options_(options), report_(report) {}

  StatusOr<bool> Run();

  // --- sharding state (public for the rule files) ---
  bool Has(const Instruction* i) const {
    const int id = id_.Find(i);
    return id >= 0 && sharding_[id].has_value();
  }
  const Sharding& Get(const Instruction* i) const { return *sharding_[Id(i)]; }
  void Set(const Instruction* i, Sharding s);
  void Clear(const Instruction* i);
  const OpShardingRule& Rule(const Instruction* i) {
    const int id = Id(i);
    if (rules_[id]) return *rules_[id];
    return ComputeRule(i, id);
  }

 private:

  const OpShardingRule& ComputeRule(const Instruction* i, int id);

  // Driver steps (propagation.cc).
  Status Init();
  Status ProcessShardingInstructions();
  Status CheckWhileDeviceAssignments();
  void BuildComputationMap();
  void CollectProvided();
  bool RunToFixPoint(int aggressiveness);
  void MaybeComputationPropagation(Instruction* instr,
                                   std::unordered_set<Instruction*>* changed);
  std::vector<Instruction*> RelatedInstructions(Instruction* instr);
  void AlignShardAsGroups();
  void RelayBarrierFrom();
  Status RemoveBarriers();
  void PostProcessCsePrevention();
  void RestoreAndCheckEntryShardings();
  Status WriteBack();
  void RemoveInstruction(Instruction* instr, Instruction* replacement);

 public:
  // --- shared helpers for the rule files ---
  bool IsSpmd() const { return options_.is_spmd; }
  bool AllowOutput() const { return allow_output_; }
  bool InComputationMap(const Computation* c) const {
    return computation_map_.count(c) > 0;
  }
  Instruction* Caller(const Computation* c) const {
    auto it = computation_map_.find(c);
    return it == computation_map_.end() ? nullptr : it->second;
  }
  bool IsElementwise(const Instruction* i);
  bool CanPropagateThrough(const Instruction* i, int aggressiveness);
  bool SupportSpatialPartitioning(const Instruction* i, bool allow_output,
                                  bool allow_params);
  bool IsPassthroughCustomCall(const Instruction* i) const;
  bool IsSpatiallyPartitionedInstr(const Instruction* i) const {
    return Has(i) && IsSpatiallyPartitioned(Get(i));
  }
  bool IsCustomCallTarget(const Instruction* i, const char* target) const;
  bool HasSideEffect(const Instruction* i) const;
  // True when the options propagate over `thread` ("" is "main"; an empty
  // execution_threads list means every thread).
  bool ThreadIncluded(const std::string& thread) const;
  // An async-start / -update / -done whose wrapped computation runs on a
  // thread this run does not propagate over.
  bool IsAsyncOnExcludedThread(const Instruction* i) const;
  int64_t NonRootUsers(const Instruction* i) const;
  const Instruction* PickRepresentativeOperand(const Instruction* i);

  // Improves the sharding of `i` with `s` (XLA's MaybeImproveInstructionSharding)
  // and records the provenance.
  bool MaybeImprove(const Instruction* i, const Sharding& s, bool may_combine,
                    bool allow_aggressive = false);
  bool MaybeImproveSub(const Instruction* i, Sharding s, int64_t index,
                       bool may_combine, bool allow_aggressive = false);
  // Provenance context of the assignment being made.
  // Only stored when a report is requested (this runs for every inference).
  void SetContext(std::string_view how, std::vector<const Instruction*> sources,
                  int aggressiveness) {
    ctx_aggr_ = aggressiveness;
    if (report_ == nullptr) return;
    ctx_how_.assign(how.data(), how.size());
    ctx_sources_ = std::move(sources);
  }
  // Braced source lists ({user}) take this overload: no vector is built (and
  // no allocation made) unless a report is requested.
  void SetContext(std::string_view how,
                  std::initializer_list<const Instruction*> sources,
                  int aggressiveness) {
    ctx_aggr_ = aggressiveness;
    if (report_ == nullptr) return;
    ctx_how_.assign(how.data(), how.size());
    ctx_sources_.assign(sources.begin(), sources.end());
  }
  bool Recording() const { return report_ != nullptr; }

  // Forward / backward inference (infer_forward.cc, infer_backward.cc).
  bool InferFromOperands(Instruction* i, int aggressiveness);
  bool InferFromUsers(Instruction* i, int aggressiveness);
  bool InferFromShardGroup(Instruction* i, int aggressiveness,
                           const std::vector<Instruction*>& group);
  std::optional<Sharding> GetShardingFromUser(const Instruction* instr,
                                               const Instruction* user,
                                               int aggressiveness);
  // Dot/convolution helpers.
  bool InferDotFromOperands(Instruction* i);
  bool InferConvolutionFromOperands(Instruction* i);
  Sharding InferDotOperandSharding(const Instruction* dot, int operand_index,
                                    bool may_combine);
  std::optional<Sharding> LookaheadUserSharding(Instruction* i);
  // Gather/scatter (gather_scatter.cc).
  bool InferGatherFromOperands(Instruction* i, bool may_combine);
  bool InferScatterFromOperands(Instruction* i, bool may_combine);
  std::optional<Sharding> GatherOperandFromUser(const Instruction* instr,
                                                 const Instruction* gather);
  std::optional<Sharding> ScatterOperandFromUser(const Instruction* instr,
                                                  const Instruction* scatter);
  // Partially specified Sharding custom-calls (unspecified_dims).
  bool InferUnspecifiedDimsFromOperand(Instruction* annotate,
                                       Instruction** conversion_after);
  bool InferUnspecifiedDimsFromUsers(Instruction* annotate, int aggressiveness,
                                     Instruction** conversion_after);
  bool InferUnspecifiedDimsFromShardGroup(Instruction* annotate,
                                          const std::vector<Instruction*>& group);

 private:
  Module& module_;
  const PropagationOptions& options_;
  PropagationReport* report_;

  PtrIndex id_;
  int Id(const Instruction* i) const {
    int id = id_.Find(i);
    MS_CHECK(id >= 0);
    return id;
  }
  std::vector<Instruction*> instrs_;
  std::vector<std::optional<Sharding>> sharding_;
  std::vector<std::optional<Sharding>> original_;
  std::vector<std::optional<OpShardingRule>> rules_;
  std::vector<Computation*> computations_;
  // Post order of every computation (fixed while the fixed-point loops run).
  std::vector<std::vector<Instruction*>> orders_;

  // Sharding custom-calls XLA would turn into copies; treated as copies.
  std::unordered_set<const Instruction*> as_copy_;
  std::unordered_map<const Instruction*, std::vector<int64_t>> unspecified_dims_;
  std::unordered_map<const Instruction*, int64_t> shard_group_of_;
  std::unordered_map<int64_t, std::vector<Instruction*>> shard_as_groups_;
  std::unordered_map<int64_t, std::vector<Instruction*>> shard_like_groups_;
  std::unordered_map<const Computation*, Instruction*> computation_map_;
  std::unordered_set<const Instruction*> provided_;
  std::vector<Sharding> saved_root_shardings_;
  std::unordered_map<int64_t, Sharding> saved_param_shardings_;
  std::unordered_set<const Instruction*> removed_;
  // Instructions whose sharding propagation cannot read; kept verbatim.
  std::unordered_set<const Instruction*> opaque_;
  std::unordered_set<std::string> warned_;
  // Whether a computation holds a side-effecting instruction (memo of
  // HasSideEffect's look into called computations; the IR is fixed meanwhile).
  mutable std::unordered_map<const Computation*, bool> computation_side_effect_;
  bool allow_output_ = false;
  bool allow_params_ = false;
  bool structure_changed_ = false;
  // What XLA's pass counts as a change besides inferred shardings: a copy
  // added above a while entry root, CSE-prevention shardings dropped, and
  // shardings inferred onto the shard barriers it removes at the end.
  bool root_copy_added_ = false;
  bool cse_dropped_ = false;
  bool barrier_changed_ = false;
  // The shardings once the pass has set up (annotations folded, control-flow
  // relatives sharing theirs, unknown read as replicated): XLA does not count
  // any of that as a change, only what propagation does from here on.
  std::vector<std::optional<Sharding>> baseline_;

  // Provenance text of each distinct leaf sharding, in the IR's (compact,
  // iota-aware) syntax: printed once, not once per assignment.
  const std::string& ProvenanceText(const Sharding& s);
  std::unordered_map<Sharding, std::string, ShardingHash> provenance_text_;
  std::string tuple_text_;

  std::string ctx_how_;
  std::vector<const Instruction*> ctx_sources_;
  int ctx_aggr_ = -1;

  // Temporarily set shardings (lookahead) are not recorded.
  bool recording_ = true;
};

}  // namespace meshsplit::propagation
