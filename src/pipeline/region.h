// Pieces the pipeline schedules share (pipeline.cc: gpipe and circular,
// one_f_one_b.cc: 1f1b): the microbatch layout of a batched value, how
// values enter and leave the per-stage region (where the stage axis is
// manual), and how a computation is copied out of a module, rewritten and
// moved back.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/module.h"
#include "pipeline/builder.h"
#include "pipeline/stage_sharding.h"
#include "support/status.h"

namespace meshsplit::stage_region {

inline constexpr char kFullToShard[] = "SPMDFullToShardShape";
inline constexpr char kShardToFull[] = "SPMDShardToFullShape";
inline constexpr char kShardingTarget[] = "Sharding";

// An error located at `at`.
inline Status ErrorAt(const Instruction& at, const std::string& what) {
  return Status::Error(what, at.loc());
}

// A copy of `i` (attributes, literal, callees, location, sharding) named
// `name` and reading `operands`, not yet in any computation.
std::unique_ptr<Instruction> CopyInstruction(const Instruction& i, const std::string& name,
                                             const std::vector<Instruction*>& operands);

// "1 stage", "4 stages", "2 microbatches", "3 patches".
std::string Plural(int64_t n, const std::string& word);

// A channel id no instruction of `module` uses yet.
int64_t NextChannelId(const Module& module);

// The sharding `i` carries, or null.
inline const Sharding* BaseOf(const Instruction* i) {
  return i->has_sharding() ? &*i->sharding() : nullptr;
}

// The dims of a value with the batch dim `bd` (size B) split into (B/M, M),
// and the permutation that brings the M dim to the front. Microbatch m
// holds the rows b with b % M == m, so that a batch tiled over a data axis
// stays tiled the same way inside every microbatch.
struct MicrobatchLayout {
  std::vector<int64_t> split;        // [.., B/M, M, ..]
  std::vector<int64_t> to_front;     // perm: [M, .., B/M, ..]
  std::vector<int64_t> from_front;   // its inverse
  std::vector<int64_t> microbatch;   // [.., B/M, ..]
  std::vector<int64_t> stacked;      // [M, .., B/M, ..]
};
MicrobatchLayout LayoutFor(const Shape& act, int64_t bd, int64_t m);

// When `v` is a copy of an entry parameter, seen through transposes,
// copies, converts and bitcasts that keep the shape (MaxText stores its
// stacked weights [embed, layers, mlp] and transposes the layers to the
// front before the scans): `v`, the values between, and the parameter, each
// with the sharding that gives `v` the sharding `s`. Empty when `v` is
// computed otherwise.
std::vector<std::pair<Instruction*, Sharding>> StackedParameterChain(Instruction* v, Sharding s);

// `v`, with the batch at `batch_dim`, held whole by every stage and split
// into microbatches [M, .., B/M, ..] inside the region (appended to `eb`'s
// computation). `loop` locates the error when M does not divide the batch.
StatusOr<Instruction*> EnterMicrobatched(Builder& eb, const StageShardings& sh, Instruction* v,
                                         int64_t batch_dim, const Sharding* base,
                                         int64_t microbatches, const Instruction& loop);

// Stage `stage`'s per-microbatch results [M, .., B/M, ..] (`outs`, manual
// over the stages as `man1`), out of the region and back in the layout of
// `whole` (the batch at `bd`): a ShardToFull over the stages and a slice of
// the one stage.
Instruction* FromOneStage(Builder& eb, Instruction* outs, int64_t stage, int64_t stages,
                          const Shape& whole, int64_t bd, const Sharding& man2,
                          const Sharding& stage_tiled2);

// Every computation `root` calls, directly or not, and `root`.
void Reachable(Computation* root, std::set<Computation*>& out);

// `from` and every instruction they read, directly or not; the values in
// `stop` are included but what they read is not (unless reached otherwise).
std::set<const Instruction*> Ancestors(const std::vector<const Instruction*>& from,
                                       const std::set<const Instruction*>& stop = {});

// Replaces every `call` in `comp` by a copy of its callee's instructions, so
// that rebatching sees one body (a callee shared by several call sites
// cannot take one microbatch shape for all of them).
void InlineCalls(Module& module, Computation& comp);
// InlineCalls on each of `comps` (computations of `module`), in the
// module's order: the names the copies get do not depend on where the
// computations happen to sit in memory.
void InlineCallsIn(Module& module, const std::set<Computation*>& comps);

// Moves every computation of `from` into `into` under fresh names (suffix
// ".stage"), with module-unique instruction names; returns where `of`
// (a computation of `from`) went.
Computation* AdoptComputations(Module& into, Module& from, const Computation* of);

// Gives the annotations of `module`'s instructions the stage axis as a
// manual subgroup (they now sit inside the stages). Errors name the
// instruction whose annotation cannot move.
Status MoveAnnotationsInside(Module& module, const StageShardings& sh, const Instruction& loop);

}  // namespace meshsplit::stage_region
