// The pipeline pass (pipeline.h). For one layer loop over L layers, S stages
// and M microbatches it builds, in the entry:
//
//   stacks [L, ...]  --Sharding(stage-tiled dim 0)--> FullToShard -> [L/S, ...] per stage
//   input  [.., B, ..] -> FullToShard (replicated over stages) -> [M, .., B/M, ..]
//   stage id: iota [S] tiled over the stage axis -> FullToShard -> s32[]
//   tick loop t = 0 .. M+S-2, inside the manual region:
//     m = t - stage; stage 0 takes microbatch m of the input, the others what
//     the previous stage sent; run the L/S local layers (the original body on
//     microbatch shapes); the last stage stores microbatch m when 0 <= m < M;
//     collective-permute the result to the next stage.
//   outputs [M, ..] -> ShardToFull over the stages -> the last stage's copy
//   -> [.., B, ..], which replaces the loop's activation result.
//
// Microbatch m holds the rows b with b % M == m, so that a batch tiled over a
// data axis stays tiled the same way inside every microbatch.
//
// Circular (R repeats): the stacks enter in chunk order (stage s's L/S rows
// are its chunks s, s + S, ...), the ticks run M*R + S - 1 items per stage,
// each visit runs one chunk of L/(S*R) layers, the permute is a ring, and
// stage 0 keeps a microbatch that comes back for another round in its
// input row.
#include "pipeline/pipeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "ir/shape_inference.h"
#include "pipeline/builder.h"
#include "pipeline/layer_loop.h"
#include "pipeline/one_f_one_b.h"
#include "pipeline/region.h"
#include "pipeline/schedule.h"
#include "pipeline/stage_loop.h"
#include "pipeline/stage_sharding.h"
#include "sharding/sharding_util.h"

namespace meshsplit {
namespace {

using stage_region::BaseOf;
using stage_region::kFullToShard;
using stage_region::kShardingTarget;
using stage_region::kShardToFull;
using stage_region::LayoutFor;
using stage_region::MicrobatchLayout;
using stage_region::NextChannelId;
using stage_region::Plural;
using stage_region::StackedParameterChain;

using stage_region::ErrorAt;
}  // namespace

StatusOr<PipelineSchedule> PlanSchedule(const PipelineSpec& spec, int64_t stages,
                                        int64_t layers, bool backward, bool paired) {
  const bool circular = spec.schedule == "circular";
  const bool zero_bubble = spec.schedule == "zb-h1";
  const bool one_f_one_b = spec.schedule == "1f1b" || zero_bubble;
  if (spec.schedule != "gpipe" && !circular && !one_f_one_b)
    return Status::Error("pipeline: schedule '" + spec.schedule +
                         "' is not implemented (gpipe, circular, 1f1b and zb-h1 are; see "
                         "docs/pipeline.md)");
  const int64_t repeats = circular ? spec.repeats : 1;
  if (layers % (stages * repeats) != 0)
    return Status::Error(
        "layer count " + std::to_string(layers) + " is not divisible by " +
        (repeats == 1 ? Plural(stages, "stage")
                      : Plural(stages, "stage") + " x " + Plural(repeats, "repeat") + " = " +
                            Plural(stages * repeats, "chunk")));
  // Stage 0 takes a microbatch back from the last stage M ticks after it
  // first took it: with fewer microbatches than stages it would not be back.
  if (circular && spec.microbatches < stages)
    return Status::Error("circular needs microbatches (" + std::to_string(spec.microbatches) +
                         ") >= stages (" + std::to_string(stages) + ")");
  PipelineSchedule s;
  s.schedule = spec.schedule;
  s.stages = stages;
  s.microbatches = spec.microbatches;
  s.repeats = repeats;
  s.layers = layers;
  s.layers_per_stage = layers / stages;
  s.layers_per_chunk = layers / (stages * repeats);
  s.backward = backward;
  s.live_microbatches = spec.microbatches;
  if (one_f_one_b) {
    const InterleavedTable t = zero_bubble ? PlanZeroBubbleH1(stages, spec.microbatches, paired)
                                           : PlanOneFOneB(stages, spec.microbatches, paired);
    s.interleaved = true;
    s.paired = paired;
    s.ticks = t.ticks;
    s.live_microbatches = t.residual_slots;
    // Paired: each tick has a forward and a backward slot per stage (and a
    // W slot under zb-h1).
    const int64_t slots_per_tick = paired ? (zero_bubble ? 3 : 2) : 1;
    int64_t busy = 0;
    s.table.assign(stages, std::vector<std::string>(s.ticks));
    for (int64_t st = 0; st < stages; ++st)
      for (int64_t k = 0; k < s.ticks; ++k) {
        std::string& cell = s.table[st][k];
        const int64_t ran[] = {t.forward[st][k], t.backward[st][k],
                               zero_bubble ? t.weight[st][k] : -1};
        const char* action[] = {"F", "B", "W"};
        for (int a = 0; a < 3; ++a) {
          if (ran[a] < 0) continue;
          cell += (cell.empty() ? "" : "+") + std::string(action[a]) + std::to_string(ran[a]);
          ++busy;
        }
      }
    s.bubble_fraction = 1.0 - static_cast<double>(busy) /
                                  static_cast<double>(slots_per_tick * stages * s.ticks);
    return s;
  }
  const int64_t work = spec.microbatches * repeats;  // (microbatch, round) pairs per stage
  s.ticks = work + stages - 1;
  int64_t busy = 0;
  s.table.assign(stages, std::vector<std::string>(s.ticks));
  for (int64_t st = 0; st < stages; ++st)
    for (int64_t t = 0; t < s.ticks; ++t) {
      const int64_t item = t - (backward ? stages - 1 - st : st);
      if (item < 0 || item >= work) continue;
      std::string action = (backward ? "B" : "F") + std::to_string(item % spec.microbatches);
      if (repeats > 1) action += "." + std::to_string(item / spec.microbatches);
      s.table[st][t] = action;
      ++busy;
    }
  s.bubble_fraction = 1.0 - static_cast<double>(busy) / static_cast<double>(stages * s.ticks);
  return s;
}

namespace {

// Shardings and shapes of one element of the layer loop's tuple across the
// region border.
struct Carried {
  // kBatchedInvariant: read unchanged by every layer but carries the batch
  // (an attention mask): split into microbatches like the activation.
  enum Kind { kWeights, kBatchedRead, kInvariant, kBatchedInvariant, kBatchedOutput, kSummedOutput };
  int64_t element = 0;
  Kind kind = kWeights;
  int64_t batch_dim = -1;  // in the element's own (global) dims
  Shape global;            // the loop's element
  Shape local;             // what a stage holds across ticks
  Sharding full, manual;   // outside / inside the region
};

// [S, M, L/S, .., B/M, ..] -> [S, L/S, .., B/M, M, ..]: the order in which a
// reshape merges (S, L/S) into L and (B/M, M) into B (batch at `bd` >= 1 of
// the [L, ...] value).
std::vector<int64_t> StackedToLayerMajor(int64_t rank, int64_t bd) {
  std::vector<int64_t> perm = {0, 2};
  for (int64_t k = 3; k <= bd + 2; ++k) perm.push_back(k);
  perm.push_back(1);
  for (int64_t k = bd + 3; k < rank + 2; ++k) perm.push_back(k);
  return perm;
}

// The circular twin: [S, M, R, K, .., B/M, ..] -> [R, S, K, .., B/M, M, ..],
// so that a reshape merges (R, S, K) into L (chunk r*S + s holds layers
// (r*S + s)*K ...) and (B/M, M) into B.
std::vector<int64_t> ChunkedToLayerMajor(int64_t rank, int64_t bd) {
  std::vector<int64_t> perm = {2, 0, 3};
  for (int64_t k = 4; k <= bd + 3; ++k) perm.push_back(k);
  perm.push_back(1);
  for (int64_t k = bd + 4; k < rank + 3; ++k) perm.push_back(k);
  return perm;
}

// [a*b*K, ...] viewed as [a, b, K, ...] with a and b swapped, back to
// [a*b*K, ...]. With (a, b) = (R, S) it puts the layers of a stacked [L, ...]
// tensor in chunk order: stage s's contiguous L/S rows are its chunks s,
// s + S, ..., s + (R-1)S (the circular schedule's placement); (S, R) undoes it.
Instruction* SwapLeadingFactors(Builder& b, Instruction* v, int64_t a, int64_t bf) {
  std::vector<int64_t> dims = v->shape().dimensions();
  std::vector<int64_t> split = {a, bf, dims[0] / (a * bf)};
  split.insert(split.end(), dims.begin() + 1, dims.end());
  std::vector<int64_t> perm = {1, 0};
  for (int64_t d = 2; d < static_cast<int64_t>(split.size()); ++d) perm.push_back(d);
  return b.Reshape(b.Transpose(b.Reshape(v, split), perm), dims);
}

class LoopPipeliner {
 public:
  LoopPipeliner(Module& module, const StageShardings& shardings, const PipelineSpec& spec,
                const PipelineRunOptions& run, std::map<const Instruction*, int64_t>& batch_dims)
      : module_(module), sh_(shardings), spec_(spec), run_(run), batch_dims_(batch_dims) {}

  StatusOr<PipelineSchedule> Run(const LayerLoop& scan);

 private:
  Instruction* On(Instruction* i, const Sharding& s) {
    i->set_sharding(s);
    return i;
  }

  // The layout over the other axes a value had before an earlier loop of
  // this pass tiled it over the stages (a weight that both the forward and
  // the backward loop read).
  const Sharding* Base(const Instruction* v) const {
    auto it = staged_params_.find(v);
    if (it != staged_params_.end()) return it->second ? &*it->second : nullptr;
    return BaseOf(v);
  }

  Module& module_;
  std::map<const Instruction*, std::optional<Sharding>> staged_params_;
  // A stacked parameter in chunk order (circular), made once for every loop
  // that reads it.
  std::map<const Instruction*, Instruction*> chunk_ordered_;
  // A stacked result with the batch, [L, .., B, ..], and the per-stage value
  // [S, M, L/S, .., B/M, ..] it was made from: a later loop (the backward
  // scan) reads the latter, so residuals stay on their stage.
  std::map<const Instruction*, Instruction*> per_stage_results_;
  const StageShardings& sh_;
  const PipelineSpec& spec_;
  const PipelineRunOptions& run_;
  std::map<const Instruction*, int64_t>& batch_dims_;
};

StatusOr<PipelineSchedule> LoopPipeliner::Run(const LayerLoop& scan) {
  Computation* entry = module_.entry();
  Instruction& loop = *scan.loop;
  const int64_t stages = sh_.stages(), micro = spec_.microbatches;
  const bool backward = scan.reversed;
  StatusOr<PipelineSchedule> planned = PlanSchedule(spec_, stages, scan.layers, backward);
  if (!planned.ok()) return ErrorAt(loop, planned.status().message());
  PipelineSchedule schedule = std::move(planned).value();
  schedule.loop = loop.name();
  const int64_t per_stage = scan.layers / stages;
  // Circular: each stage runs one chunk of `chunk` layers per visit, and a
  // microbatch goes `repeats` times around the ring of stages.
  const int64_t repeats = schedule.repeats, chunk = schedule.layers_per_chunk;
  const bool circular = repeats > 1;

  Instruction* init = loop.operand(0);  // a tuple (AnalyseLayerLoop checked)
  Instruction* h0 = init->operand(static_cast<int>(scan.activation));
  const Shape act = h0->shape();
  const int64_t bd = spec_.batch_dim;
  if (bd >= act.rank())
    return ErrorAt(loop, "loop %" + loop.name() + ": its activation %" + h0->name() + " (" +
                             act.ToString(false) + ") has no batch dim " + std::to_string(bd));
  if (act.dimensions(static_cast<int>(bd)) % micro != 0)
    return ErrorAt(loop, Plural(micro, "microbatch") + (micro == 1 ? " does" : " do") +
                             " not divide batch " +
                             std::to_string(act.dimensions(static_cast<int>(bd))) +
                             " (dim " + std::to_string(bd) + " of %" + h0->name() +
                             ", the activation of loop %" + loop.name() + ")");
  const int64_t rank = act.rank();
  const Sharding* base_h = BaseOf(h0);
  MS_ASSIGN_OR_RETURN(Sharding man_h, sh_.Manual(base_h, rank, 0));
  MS_ASSIGN_OR_RETURN(Sharding man_h1, sh_.Manual(base_h, rank, 1));
  MS_ASSIGN_OR_RETURN(Sharding man_h2, sh_.Manual(base_h, rank, 2));
  MS_ASSIGN_OR_RETURN(Sharding out_full, sh_.StageTiled(base_h, rank, 2));
  MS_ASSIGN_OR_RETURN(Sharding scalar_man, sh_.Manual(nullptr, 0, 0));
  MS_ASSIGN_OR_RETURN(Sharding stage_full, sh_.StageTiled(nullptr, 1, 0));
  MS_ASSIGN_OR_RETURN(Sharding stage_man, sh_.Manual(nullptr, 1, 0));

  // Stacked reads that carry the batch (residuals of an earlier pipelined
  // loop) and the stage loop.
  std::map<int64_t, int64_t> read_batch;
  for (int64_t e : scan.stacked) {
    auto it = batch_dims_.find(init->operand(static_cast<int>(e)));
    if (it != batch_dims_.end()) read_batch[e] = it->second;
  }
  MS_ASSIGN_OR_RETURN(StageLoop stage_loop,
                      BuildStageLoop(module_, scan, sh_, chunk, micro, bd, read_batch));

  // Every element but the counter and the activation, as the ticks carry it.
  const Sharding* loop_sharding = BaseOf(&loop);
  std::vector<Carried> carried;
  auto add = [&](int64_t e, Carried::Kind kind, int64_t batch, const Sharding* base) -> Status {
    Carried c;
    c.element = e;
    c.kind = kind;
    c.batch_dim = batch;
    c.global = loop.shape().tuple_shapes(static_cast<int>(e));
    const int64_t r = c.global.rank();
    const bool per_layer = kind != Carried::kInvariant && kind != Carried::kBatchedInvariant;
    if (per_layer && base != nullptr && base->IsTiled() && base->TileDim(0) != 1)
      return ErrorAt(loop, "element " + std::to_string(e) + " of loop %" + loop.name() +
                               " is already split along its layer dim (" + base->ToString() + ")");
    c.local = stage_loop.carried.tuple_shapes(static_cast<int>(e));
    if (per_layer) c.local.mutable_dimensions()[0] = per_stage;
    switch (kind) {
      case Carried::kInvariant: {
        MS_ASSIGN_OR_RETURN(c.full, sh_.Full(base, r));
        MS_ASSIGN_OR_RETURN(c.manual, sh_.Manual(base, r, 0));
        c.local = c.global;
        break;
      }
      case Carried::kBatchedInvariant: {
        MS_ASSIGN_OR_RETURN(c.full, sh_.Full(base, r));
        MS_ASSIGN_OR_RETURN(c.manual, sh_.Manual(base, r, 1));
        c.local = Shape(c.global.element_type(), LayoutFor(c.global, batch, micro).stacked);
        break;
      }
      case Carried::kWeights:
      case Carried::kSummedOutput: {
        MS_ASSIGN_OR_RETURN(c.full, sh_.StageTiled(base, r, 0));
        MS_ASSIGN_OR_RETURN(c.manual, sh_.Manual(base, r, 0));
        break;
      }
      case Carried::kBatchedRead:
      case Carried::kBatchedOutput: {
        MS_ASSIGN_OR_RETURN(c.full, sh_.StageTiled(base, r, 2));
        MS_ASSIGN_OR_RETURN(c.manual, sh_.Manual(base, r, 1));
        std::vector<int64_t> dims = c.local.dimensions();
        dims.insert(dims.begin(), micro);
        c.local = Shape(c.global.element_type(), dims);
        break;
      }
    }
    carried.push_back(std::move(c));
    return Status::Ok();
  };
  for (int64_t e : scan.stacked) {
    const Instruction* v = init->operand(static_cast<int>(e));
    MS_RETURN_IF_ERROR(read_batch.count(e)
                           ? add(e, Carried::kBatchedRead, read_batch[e], Base(v))
                           : add(e, Carried::kWeights, -1, Base(v)));
  }
  for (int64_t e : scan.invariant) {
    const Instruction* v = init->operand(static_cast<int>(e));
    if (!v->shape().IsArray())
      return ErrorAt(*v, "loop %" + loop.name() + " reads %" + v->name() +
                             ", a tuple, in every layer: not pipelined yet");
    auto batched = stage_loop.invariant_batch_dims.find(e);
    MS_RETURN_IF_ERROR(batched != stage_loop.invariant_batch_dims.end()
                           ? add(e, Carried::kBatchedInvariant, batched->second, Base(v))
                           : add(e, Carried::kInvariant, -1, Base(v)));
  }
  for (int64_t e : scan.outputs) {
    const Sharding* base = nullptr;
    if (loop_sharding != nullptr && loop_sharding->IsTuple())
      base = &loop_sharding->tuple_elements()[e];
    int64_t dim = stage_loop.output_batch_dims.at(e);
    // A summed result that propagation already placed as the pass leaves it
    // (layers over the stages, whole over the other axes: the gradient of
    // weights whose optimizer state a spec tiles over the stages) is
    // computed from an unsplit buffer like any other.
    if (dim < 0 && base != nullptr) {
      StatusOr<Sharding> staged =
          sh_.StageTiled(nullptr, loop.shape().tuple_shapes(static_cast<int>(e)).rank(), 0);
      if (staged.ok() && *staged == *base) base = nullptr;
    }
    MS_RETURN_IF_ERROR(dim >= 0 ? add(e, Carried::kBatchedOutput, dim, base)
                                : add(e, Carried::kSummedOutput, -1, base));
  }

  const MicrobatchLayout lay = LayoutFor(act, bd, micro);
  const PrimitiveType type = act.element_type();
  const double fill = run_.fill_nan && IsFloatingPoint(type)
                          ? std::numeric_limits<double>::quiet_NaN() : 0.0;

  // Into the region.
  Builder eb(module_, *entry, loop.loc());
  auto enter_microbatched = [&](Instruction* v, int64_t batch_dim,
                                const Sharding* base) -> StatusOr<Instruction*> {
    return stage_region::EnterMicrobatched(eb, sh_, v, batch_dim, base, micro, loop);
  };
  std::vector<Instruction*> tick_init(5, nullptr);
  std::vector<Sharding> tick_sharding = {scalar_man, scalar_man, man_h, man_h1, man_h1};
  for (const Carried& c : carried) {
    Instruction* v = init->operand(static_cast<int>(c.element));
    Instruction* local = nullptr;
    switch (c.kind) {
      case Carried::kWeights:
        // The parameter behind the stack holds this stage's layers only, and
        // so does every value on the way (none is gathered whole).
        for (auto& [x, staged] : StackedParameterChain(v, c.full)) {
          if (!staged_params_.count(x)) staged_params_[x] = x->sharding();
          x->set_sharding(staged);
        }
        if (circular) {
          // The parameter keeps L/S contiguous layers per device; this
          // reorder (an all-to-all once partitioned) gives each stage its chunks.
          auto [it, fresh] = chunk_ordered_.try_emplace(v, nullptr);
          if (fresh) it->second = SwapLeadingFactors(eb, v, repeats, stages);
          v = it->second;
        }
        [[fallthrough]];
      case Carried::kInvariant:
        local = eb.CustomCall(kFullToShard, eb.CustomCall(kShardingTarget, v, v->shape(), c.full),
                              c.local, c.manual);
        break;
      case Carried::kBatchedInvariant: {
        MS_ASSIGN_OR_RETURN(local, enter_microbatched(v, c.batch_dim, Base(v)));
        break;
      }
      case Carried::kBatchedRead: {
        // The per-stage value [S, M, L/S, .., B/M, ..] the earlier loop made
        // `v` from: residuals stay on their stage.
        const int64_t r = c.global.rank();
        auto made = per_stage_results_.find(v);
        if (made == per_stage_results_.end())
          return ErrorAt(*v, "loop %" + loop.name() + " reads per-layer %" + v->name() +
                                 " with the batch, which no earlier pipelined loop wrote");
        Instruction* staged = made->second;
        std::vector<int64_t> one = c.local.dimensions();
        one.insert(one.begin(), 1);
        MS_ASSIGN_OR_RETURN(Sharding entered_sharding, sh_.Manual(Base(v), r, 2));
        Instruction* entered = eb.CustomCall(
            kFullToShard, eb.CustomCall(kShardingTarget, staged, staged->shape(), c.full),
            Shape(c.global.element_type(), one), entered_sharding);
        local = eb.Reshape(entered, c.local.dimensions());
        break;
      }
      case Carried::kBatchedOutput:
      case Carried::kSummedOutput:
        local = eb.Broadcast(On(eb.Scalar(c.global.element_type(),
                                           c.kind == Carried::kSummedOutput ? 0.0 : fill),
                                scalar_man),
                             c.local.dimensions());
        break;
    }
    tick_init.push_back(On(local, c.manual));
    tick_sharding.push_back(c.manual);
  }
  MS_ASSIGN_OR_RETURN(Instruction* xmb, enter_microbatched(h0, bd, base_h));
  Instruction* iota = eb.Add(Opcode::kIota, Shape(PrimitiveType::S32, {stages}), {}, "iota");
  Instruction* stage_id = On(
      eb.Reshape(eb.CustomCall(kFullToShard,
                               eb.CustomCall(kShardingTarget, iota, iota->shape(), stage_full),
                               Shape(PrimitiveType::S32, {1}), stage_man),
                 {}),
      scalar_man);
  Instruction* fill_value = On(eb.Scalar(type, fill), scalar_man);
  tick_init[0] = On(eb.ConstantS32(0), scalar_man);
  tick_init[1] = stage_id;
  tick_init[2] = On(eb.Broadcast(fill_value, lay.microbatch), man_h);
  tick_init[3] = On(eb.Broadcast(fill_value, lay.stacked), man_h1);
  tick_init[4] = xmb;
  Instruction* tick_tuple = eb.Tuple(tick_init);
  const Sharding tick_tuple_sharding = Sharding::Tuple(tick_sharding);
  tick_tuple->set_sharding(tick_tuple_sharding);
  const Shape tick_shape = tick_tuple->shape();

  // Sharding of the stage loop's tuple (the layer loop's order).
  std::vector<Sharding> stage_elements(stage_loop.carried.tuple_size(), scalar_man);
  stage_elements[scan.activation] = man_h;
  for (const Carried& c : carried) {
    if (c.kind == Carried::kBatchedRead || c.kind == Carried::kBatchedOutput ||
        c.kind == Carried::kBatchedInvariant) {
      // One microbatch of the per-stage buffer: the buffer's tiles minus M.
      const Sharding* base = nullptr;
      if (c.kind == Carried::kBatchedRead || c.kind == Carried::kBatchedInvariant)
        base = Base(init->operand(static_cast<int>(c.element)));
      else if (loop_sharding != nullptr && loop_sharding->IsTuple())
        base = &loop_sharding->tuple_elements()[c.element];
      MS_ASSIGN_OR_RETURN(stage_elements[c.element],
                          sh_.Manual(base, c.global.rank(), 0));
    } else {
      stage_elements[c.element] = c.manual;
    }
  }
  const Sharding stage_tuple_sharding = Sharding::Tuple(stage_elements);
  stage_loop.body->parameter(0)->set_sharding(stage_tuple_sharding);
  stage_loop.body->root()->set_sharding(stage_tuple_sharding);
  stage_loop.condition->parameter(0)->set_sharding(stage_tuple_sharding);

  const int64_t first = backward ? stages - 1 : 0, last = backward ? 0 : stages - 1;
  // The tick body.
  auto body = std::make_unique<Computation>(module_.UniqueInstructionName("pipeline_tick"));
  {
    Builder b(module_, *body, loop.loc());
    Instruction* p = On(b.Parameter(0, tick_shape, "tick"), tick_tuple_sharding);
    std::vector<Instruction*> in;
    for (int64_t k = 0; k < tick_shape.tuple_size(); ++k)
      in.push_back(On(b.Element(p, k), tick_sharding[k]));
    Instruction *t = in[0], *stage = in[1], *state = in[2], *outs = in[3], *xs = in[4];
    Instruction* zero = b.ConstantS32(0);
    // The microbatch this stage works on: t - (its distance from the first stage).
    Instruction* distance =
        backward ? b.Binary(Opcode::kSubtract, b.ConstantS32(stages - 1), stage) : stage;
    // Its work item: microbatch `item % M` in round `item / M` (gpipe: one round).
    const int64_t work = micro * repeats;
    Instruction* item = b.Binary(Opcode::kSubtract, t, distance);
    Instruction* ic = b.Add(Opcode::kClamp, item->shape(),
                            {zero, item, b.ConstantS32(work - 1)}, "clamp");
    Instruction* active =
        b.Binary(Opcode::kAnd, b.Compare(item, zero, ComparisonDirection::kGe),
                 b.Compare(item, b.ConstantS32(work), ComparisonDirection::kLt));
    Instruction* mc = circular ? b.Binary(Opcode::kRemainder, ic, b.ConstantS32(micro)) : ic;
    Instruction* is_first = b.Compare(stage, b.ConstantS32(first), ComparisonDirection::kEq);
    std::vector<int64_t> one_row = lay.microbatch;
    one_row.insert(one_row.begin(), 1);
    // Circular: the first local row of the chunk this visit runs, whether
    // it is the microbatch's last round, and the first stage's inputs.
    Instruction* chunk_row = nullptr;
    Instruction* final_round = nullptr;
    if (circular) {
      Instruction* round = b.Binary(Opcode::kDivide, ic, b.ConstantS32(micro));
      // A reverse scan meets its chunks from the last round down.
      Instruction* local_round =
          backward ? b.Binary(Opcode::kSubtract, b.ConstantS32(repeats - 1), round) : round;
      chunk_row = b.Binary(Opcode::kMultiply, local_round, b.ConstantS32(chunk));
      final_round = b.Compare(round, b.ConstantS32(repeats - 1), ComparisonDirection::kEq);
      // What the first stage received from the last one (sent a tick ago,
      // the last stage's item t - S) goes back into the input row of its
      // microbatch when another round follows; the row's previous contents
      // were read M >= S ticks ago. Written before it is read, as M == S
      // reads it this very tick.
      Instruction* back = b.Binary(Opcode::kSubtract, t, b.ConstantS32(stages));
      Instruction* back_row = b.Binary(
          Opcode::kRemainder,
          b.Add(Opcode::kClamp, back->shape(), {zero, back, b.ConstantS32(work - 1)}, "clamp"),
          b.ConstantS32(micro));
      Instruction* store = b.Binary(
          Opcode::kAnd, is_first,
          b.Binary(Opcode::kAnd, b.Compare(back, zero, ComparisonDirection::kGe),
                   b.Compare(back, b.ConstantS32(work - micro), ComparisonDirection::kLt)));
      Instruction* held = On(b.SliceRow(xs, back_row), man_h1);
      Instruction* arrived = On(b.Reshape(state, one_row), man_h1);
      Instruction* kept_row = On(b.Add(Opcode::kSelect, held->shape(),
                                       {On(b.Broadcast(store, one_row), man_h1), arrived, held},
                                       "select"),
                                 man_h1);
      xs = On(b.UpdateRow(xs, kept_row, back_row), man_h1);
    }
    // The rows of a stacked per-stage value [(M,) L/S, ...] this visit uses.
    auto visit_starts = [&](bool per_microbatch) {
      std::vector<Instruction*> starts;
      if (per_microbatch) starts.push_back(mc);
      if (circular) starts.push_back(chunk_row);
      return starts;
    };
    auto visit_sizes = [&](bool per_microbatch) {
      std::vector<int64_t> sizes;
      if (per_microbatch) sizes.push_back(1);
      if (circular) sizes.push_back(chunk);
      return sizes;
    };
    Instruction* row = On(b.SliceRow(xs, mc), man_h1);
    Instruction* injected = On(b.Reshape(row, lay.microbatch), man_h);
    Instruction* stage_in = On(b.Add(Opcode::kSelect, state->shape(),
                                     {On(b.Broadcast(is_first, lay.microbatch), man_h), injected,
                                      state},
                                     "select"),
                               man_h);
    std::vector<Instruction*> layer_init(stage_loop.carried.tuple_size(), nullptr);
    layer_init[scan.counter] = b.ConstantS32(0);
    layer_init[scan.activation] = stage_in;
    for (size_t k = 0; k < carried.size(); ++k) {
      const Carried& c = carried[k];
      const Shape& inner = stage_loop.carried.tuple_shapes(static_cast<int>(c.element));
      Instruction* v = in[5 + k];
      switch (c.kind) {
        case Carried::kInvariant:
          break;
        case Carried::kWeights:
          if (circular)
            v = On(b.SliceBlock(v, visit_starts(false), visit_sizes(false)), c.manual);
          break;
        case Carried::kBatchedRead:
          v = On(b.Reshape(b.SliceBlock(v, visit_starts(true), visit_sizes(true)),
                           inner.dimensions()),
                 stage_elements[c.element]);
          break;
        case Carried::kBatchedInvariant:
          v = On(b.Reshape(b.SliceRow(v, mc), inner.dimensions()), stage_elements[c.element]);
          break;
        case Carried::kBatchedOutput: case Carried::kSummedOutput:
          v = On(b.Broadcast(On(b.Scalar(inner.element_type(), 0), scalar_man),
                             inner.dimensions()),
                 stage_elements[c.element]);
          break;
      }
      layer_init[c.element] = v;
    }
    Instruction* layer_tuple = On(b.Tuple(layer_init), stage_tuple_sharding);
    Instruction* layers = nullptr;
    // An idle stage-tick skips its layers: it hands back its inputs, which
    // every use below drops (they are selected by `active`). Only when the
    // stage axis is the whole mesh: with data or model axes the layers hold
    // collectives, and the runtimes meet every collective on all devices,
    // so a stage that skipped would leave the busy ones waiting.
    if (run_.skip_idle && sh_.num_devices() == stages) {
      Computation* run_layers = module_.AddComputation(
          std::make_unique<Computation>(module_.UniqueInstructionName("stage_busy")));
      Builder rb(module_, *run_layers, loop.loc());
      Instruction* rp =
          On(rb.Parameter(0, stage_loop.carried, "stage_in"), stage_tuple_sharding);
      Instruction* ran = On(rb.Add(Opcode::kWhile, stage_loop.carried, {rp}, "while"),
                            stage_tuple_sharding);
      ran->set_called_computations({stage_loop.condition, stage_loop.body});
      run_layers->set_root(ran);
      Computation* skip_layers = module_.AddComputation(
          std::make_unique<Computation>(module_.UniqueInstructionName("stage_idle")));
      Builder ib(module_, *skip_layers, loop.loc());
      skip_layers->set_root(
          On(ib.Parameter(0, stage_loop.carried, "stage_in"), stage_tuple_sharding));
      layers = On(b.Add(Opcode::kConditional, stage_loop.carried,
                        {active, layer_tuple, layer_tuple}, "conditional"),
                  stage_tuple_sharding);
      layers->set_called_computations({run_layers, skip_layers});
    } else {
      layers = On(b.Add(Opcode::kWhile, stage_loop.carried, {layer_tuple}, "while"),
                  stage_tuple_sharding);
      layers->set_called_computations({stage_loop.condition, stage_loop.body});
    }
    Instruction* result = On(b.Element(layers, scan.activation), man_h);
    auto when_active = [&](Instruction* now, Instruction* otherwise, const Sharding& s) {
      return On(b.Add(Opcode::kSelect, now->shape(),
                      {On(b.Broadcast(active, now->shape().dimensions()), s), now, otherwise},
                      "select"),
                s);
    };
    // The last stage keeps its result for microbatch m (in its last round).
    Instruction* write = b.Binary(
        Opcode::kAnd, active, b.Compare(stage, b.ConstantS32(last), ComparisonDirection::kEq));
    if (circular) write = b.Binary(Opcode::kAnd, write, final_round);
    Instruction* kept = On(b.Reshape(On(b.SliceRow(outs, mc), man_h1), lay.microbatch), man_h);
    Instruction* stored = On(b.Add(Opcode::kSelect, kept->shape(),
                                   {On(b.Broadcast(write, lay.microbatch), man_h), result, kept},
                                   "select"),
                             man_h);
    Instruction* outs_next =
        On(b.UpdateRow(outs, On(b.Reshape(stored, one_row), man_h1), mc), man_h1);
    Instruction* sent = On(b.Add(Opcode::kCollectivePermute, result->shape(), {result},
                                 "collective-permute"),
                           man_h);
    sent->mutable_attrs().source_target_pairs =
        sh_.ShiftPairs(backward ? -1 : 1, /*ring=*/circular);
    sent->mutable_attrs().channel_id = NextChannelId(module_);
    std::vector<Instruction*> out = {b.Binary(Opcode::kAdd, t, b.ConstantS32(1)), stage, sent,
                                     outs_next, xs};
    for (size_t k = 0; k < carried.size(); ++k) {
      const Carried& c = carried[k];
      Instruction* v = in[5 + k];
      if (c.kind == Carried::kBatchedOutput) {
        Instruction* y = On(b.Element(layers, c.element), stage_elements[c.element]);
        Instruction* old = On(b.Reshape(b.SliceBlock(v, visit_starts(true), visit_sizes(true)),
                                        y->shape().dimensions()),
                              stage_elements[c.element]);
        std::vector<int64_t> block = y->shape().dimensions();
        block.insert(block.begin(), 1);
        v = On(b.UpdateBlock(v, b.Reshape(when_active(y, old, stage_elements[c.element]), block),
                             visit_starts(true)),
               c.manual);
      } else if (c.kind == Carried::kSummedOutput) {
        Instruction* y = On(b.Element(layers, c.element), stage_elements[c.element]);
        Instruction* none = On(b.Broadcast(On(b.Scalar(y->shape().element_type(), 0), scalar_man),
                                           y->shape().dimensions()),
                               c.manual);
        if (!circular) {
          v = On(b.Binary(Opcode::kAdd, v, when_active(y, none, c.manual)), c.manual);
        } else {
          Instruction* sum = On(b.SliceBlock(v, visit_starts(false), visit_sizes(false)), c.manual);
          sum = On(b.Binary(Opcode::kAdd, sum, when_active(y, none, c.manual)), c.manual);
          v = On(b.UpdateBlock(v, sum, visit_starts(false)), c.manual);
        }
      }
      out.push_back(v);
    }
    body->set_root(On(b.Tuple(out), tick_tuple_sharding));
    for (const auto& i : body->instructions())
      if (!i->has_sharding() && i->shape().IsArray() && i->shape().rank() == 0)
        i->set_sharding(scalar_man);
  }
  auto cond = std::make_unique<Computation>(module_.UniqueInstructionName("pipeline_ticks"));
  {
    Builder b(module_, *cond, loop.loc());
    Instruction* p = On(b.Parameter(0, tick_shape, "tick"), tick_tuple_sharding);
    cond->set_root(b.Compare(b.Element(p, 0), b.ConstantS32(schedule.ticks),
                             ComparisonDirection::kLt));
    for (const auto& i : cond->instructions())
      if (!i->has_sharding()) i->set_sharding(i.get() == p ? tick_tuple_sharding : scalar_man);
  }
  for (const auto& i : stage_loop.condition->instructions())
    if (!i->has_sharding()) i->set_sharding(scalar_man);
  Computation* tick_cond = module_.AddComputation(std::move(cond));
  Computation* tick_body = module_.AddComputation(std::move(body));

  Instruction* ticks = On(eb.Add(Opcode::kWhile, tick_shape, {tick_tuple}, "while"),
                          tick_tuple_sharding);
  ticks->set_called_computations({tick_cond, tick_body});

  // Out of the region.
  std::vector<Instruction*> results(loop.shape().tuple_size(), nullptr);
  {
    // The last stage's outputs, back in the activation's layout.
    Instruction* outs = On(eb.Element(ticks, 3), man_h1);
    results[scan.activation] =
        stage_region::FromOneStage(eb, outs, last, stages, act, bd, man_h2, out_full);
  }
  results[scan.counter] = eb.Scalar(
      loop.shape().tuple_shapes(static_cast<int>(scan.counter)).element_type(),
      static_cast<double>(scan.layers));
  for (size_t k = 0; k < carried.size(); ++k) {
    const Carried& c = carried[k];
    if (c.kind != Carried::kBatchedOutput && c.kind != Carried::kSummedOutput) {
      results[c.element] = init->operand(static_cast<int>(c.element));
      continue;
    }
    Instruction* local = On(eb.Element(ticks, 5 + static_cast<int64_t>(k)), c.manual);
    if (c.kind == Carried::kSummedOutput) {
      Instruction* summed = eb.CustomCall(
          kShardToFull, eb.CustomCall(kShardingTarget, local, local->shape(), c.manual), c.global,
          c.full);
      // Circular sums are in chunk order: back to layer order.
      results[c.element] = circular ? SwapLeadingFactors(eb, summed, stages, repeats) : summed;
      continue;
    }
    // [M, L/S, .., B/M, ..] per stage -> [S, M, L/S, ..] -> [L, .., B, ..].
    const int64_t r = c.global.rank();
    MS_ASSIGN_OR_RETURN(Sharding man2, sh_.Manual(loop_sharding != nullptr && loop_sharding->IsTuple()
                                                      ? &loop_sharding->tuple_elements()[c.element]
                                                      : nullptr,
                                                  r, 2));
    std::vector<int64_t> one = local->shape().dimensions();
    one.insert(one.begin(), 1);
    Instruction* staged = On(eb.Reshape(local, one), man2);
    one[0] = stages;
    Instruction* whole = eb.CustomCall(
        kShardToFull, eb.CustomCall(kShardingTarget, staged, staged->shape(), man2),
        Shape(c.global.element_type(), one), c.full);
    Instruction* layer_major = nullptr;
    if (circular) {
      std::vector<int64_t> chunks = one;
      chunks[2] = chunk;
      chunks.insert(chunks.begin() + 2, repeats);
      layer_major = eb.Transpose(eb.Reshape(whole, chunks), ChunkedToLayerMajor(r, c.batch_dim));
    } else {
      layer_major = eb.Transpose(whole, StackedToLayerMajor(r, c.batch_dim));
    }
    Instruction* result = eb.Reshape(layer_major, c.global.dimensions());
    per_stage_results_[result] = whole;
    // Still on its stage (a later loop reads it there): tiled over the
    // stages along the layers, as before over the other axes.
    const Sharding* base = loop_sharding != nullptr && loop_sharding->IsTuple()
                               ? &loop_sharding->tuple_elements()[c.element] : nullptr;
    staged_params_[result] = base ? std::optional<Sharding>(*base) : std::nullopt;
    MS_ASSIGN_OR_RETURN(Sharding on_stages, sh_.StageTiled(base, r, 0));
    // (In chunk order it is not a tiling of [L, ...]: propagation places it.)
    if (!circular) result->set_sharding(on_stages);
    batch_dims_[result] = c.batch_dim;
    results[c.element] = result;
  }

  // The loop's users read the results.
  Computation* old_cond = loop.while_condition();
  Computation* old_body = loop.while_body();
  std::vector<Instruction*> users = loop.users();
  Instruction* whole = nullptr;
  for (Instruction* u : users) {
    if (u->opcode() == Opcode::kGetTupleElement) {
      Instruction* r = results[u->attrs().tuple_index];
      u->ReplaceAllUsesWith(r);
      if (entry->root() == u) entry->set_root(r);
      entry->RemoveInstruction(u);
      continue;
    }
    if (whole == nullptr) whole = eb.Tuple(results);
  }
  if (whole != nullptr) loop.ReplaceAllUsesWith(whole);
  if (entry->root() == &loop) entry->set_root(whole != nullptr ? whole : eb.Tuple(results));
  entry->RemoveInstruction(&loop);
  if (init->users().empty() && entry->root() != init) entry->RemoveInstruction(init);
  bool still_called = false;
  for (const auto& c : module_.computations())
    for (const auto& i : c->instructions())
      for (Computation* called : i->called_computations())
        if (called == old_cond || called == old_body) still_called = true;
  if (!still_called) {
    module_.RemoveComputation(old_body);
    module_.RemoveComputation(old_cond);
  }
  entry->SortTopologically();

  const int64_t tiles = base_h != nullptr ? base_h->NumTiles() : 1;
  const int64_t micro_bytes = act.ByteSize() / micro / tiles;
  // The stage buffer, the microbatches held for the first stage, the
  // stored outputs, and per-microbatch stacked results kept for later.
  int64_t bytes = micro_bytes * (1 + 2 * micro);
  for (const Carried& c : carried)
    if (c.kind == Carried::kBatchedOutput || c.kind == Carried::kBatchedRead ||
        c.kind == Carried::kBatchedInvariant)
      bytes += c.local.ByteSize() / c.manual.NumTiles();
  schedule.peak_activation_bytes_per_stage = bytes;
  return schedule;
}

}  // namespace

StatusOr<PipelineReport> PipelineLayerLoops(Module& module, const Mesh& mesh,
                                            const PipelineSpec& spec,
                                            const PipelineRunOptions& run) {
  Computation* entry = module.entry();
  if (entry == nullptr) return Status::Error("pipeline: the module has no entry computation");
  std::optional<int64_t> axis = mesh.AxisIndex(spec.axis);
  if (!axis)
    return Status::Error("pipeline: the stage axis '" + spec.axis + "' is not an axis of the mesh " +
                         mesh.ToString());
  const StageShardings shardings(mesh, *axis);

  // The loops to pipeline, all analysed before anything changes.
  std::vector<std::string> why_not;
  std::vector<LayerLoop> loops;
  if (spec.loops.empty()) {
    loops = FindLayerLoops(*entry, &why_not);
    if (loops.empty()) {
      std::string reasons;
      for (const std::string& w : why_not) reasons += "\n  note: " + w;
      return Status::Error("no layer loop found: pipelining needs a scanned model (a while over "
                           "stacked per-layer weights), see docs/pipeline.md" + reasons,
                           entry->loc());
    }
  } else {
    for (const std::string& name : spec.loops) {
      Instruction* w = entry->Find(name);
      if (w == nullptr)
        return Status::Error("pipeline: \"loops\" names %" + name +
                             ", which is not an instruction of the entry computation");
      MS_ASSIGN_OR_RETURN(LayerLoop l, AnalyseLayerLoop(*w));
      loops.push_back(l);
    }
  }
  for (const LayerLoop& l : loops) {
    StatusOr<PipelineSchedule> planned =
        PlanSchedule(spec, shardings.stages(), l.layers, l.reversed);
    if (!planned.ok()) return ErrorAt(*l.loop, planned.status().message());
  }
  PipelineReport report;
  if (spec.schedule == "1f1b" || spec.schedule == "zb-h1") {
    // Each forward scan runs in one loop with the backward scan that reads
    // its residuals.
    std::set<const LayerLoop*> paired;
    std::vector<std::pair<const LayerLoop*, const LayerLoop*>> pairs;
    for (const LayerLoop& l : loops) {
      if (l.reversed) continue;
      const LayerLoop* b = BackwardScanOf(l, loops);
      if (b == nullptr || paired.count(b))
        return ErrorAt(*l.loop, spec.schedule + " pipelines a training step: loop %" + l.loop->name() +
                                    " has no backward scan that reads its per-layer results "
                                    "(a forward pass pipelines with gpipe or circular)");
      paired.insert(b);
      pairs.emplace_back(&l, b);
    }
    for (const LayerLoop& l : loops)
      if (l.reversed && !paired.count(&l))
        return ErrorAt(*l.loop, spec.schedule + ": the reverse scan %" + l.loop->name() +
                                    " reads no forward scan's per-layer results");
    for (const auto& [f, b] : pairs) {
      MS_ASSIGN_OR_RETURN(PipelineSchedule s,
                          PipelineOneFOneB(module, shardings, spec, run, *f, *b));
      report.loops.push_back(std::move(s));
    }
    return report;
  }
  std::map<const Instruction*, int64_t> batch_dims;
  LoopPipeliner pipeliner(module, shardings, spec, run, batch_dims);
  for (const LayerLoop& l : loops) {
    MS_ASSIGN_OR_RETURN(PipelineSchedule s, pipeliner.Run(l));
    report.loops.push_back(std::move(s));
  }
  return report;
}

}  // namespace meshsplit
