// The 1f1b schedule (one_f_one_b.h). In the entry it builds, for a forward
// scan F and the backward scan B that reads F's residuals:
//
//   F's stacks and B's stacks (one copy of each value both read) -> [L/S, ...]
//   the input -> [M, .., B/M, ..]; stage id; the schedule table s32[T, S]
//   tick loop t = 0 .. T-1, inside the manual region:
//     (f, b) = table[t, stage]: the microbatch it runs forward / backward
//     F: the L/S local forward layers on microbatch m (stage 0: from the
//        input, else from the forward buffer), its residuals into slot
//        m % K_r; on the last stage, also the loss gradient of microbatch m
//        into the backward buffer
//     B: the L/S local backward layers on the gradient of microbatch m,
//        reading residual slot m % K_r, the weight gradients summed; stage 0
//        keeps the input's gradient of microbatch m
//     collective-permute the forward result up and the backward result down;
//     a stage stores what its neighbour sent when the table says the
//     neighbour ran F (resp. B) this tick
//   out: the last stage's forward outputs replace F's activation result,
//   stage 0's backward outputs B's, the summed gradients B's stacked results.
//
// When the stage axis is the whole mesh each tick runs one branch of a
// conditional: idle, F or B. With data or model axes the layers hold
// collectives, and the runtimes meet every collective on all devices, so a
// stage cannot skip its layers: every stage runs both layer loops at every
// tick and keeps what the table names. The table is then the paired one
// (schedule.h), which gives every tick a forward and a backward slot.
//
// zb-h1 splits B's loop in two (split_backward.h): B proper, which also
// saves, per layer, the gradients the weight gradients read into a ring
// of K_w slots, and W, which reads them back and sums the weight
// gradients; a third table says when each stage runs W (a fifth branch,
// or a third loop every tick when paired).
#include "pipeline/one_f_one_b.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "pipeline/builder.h"
#include "pipeline/region.h"
#include "pipeline/schedule.h"
#include "pipeline/split_backward.h"
#include "pipeline/stage_loop.h"
#include "support/small_helpers.h"
#include "transforms/shrink_batch.h"

namespace meshsplit {
namespace {

using stage_region::BaseOf;
using stage_region::kFullToShard;
using stage_region::kShardingTarget;
using stage_region::kShardToFull;
using stage_region::LayoutFor;
using stage_region::MicrobatchLayout;
using stage_region::Plural;

using stage_region::ErrorAt;

// The element of `scan`'s tuple that `v` reads, or -1.
int64_t ElementOf(const Instruction* v, const LayerLoop& scan) {
  return v->opcode() == Opcode::kGetTupleElement && v->operand(0) == scan.loop
             ? v->attrs().tuple_index : -1;
}

// `v`, or the value the forward scan was given for it when `v` is one of the
// scan's pass-through elements (stacked weights, values every layer reads).
Instruction* Resolve(Instruction* v, const LayerLoop& scan) {
  const int64_t e = ElementOf(v, scan);
  if (e >= 0 && (Contains(scan.stacked, e) || Contains(scan.invariant, e)))
    return scan.loop->operand(0)->operand(static_cast<int>(e));
  return v;
}

// True when computing `v` again (per microbatch) changes nothing but time:
// no collective, random number, feed or side-effecting custom-call, also
// in what it calls.
bool Pure(const Instruction& v) {
  const Opcode op = v.opcode();
  if (op == Opcode::kCustomCall) return v.attrs().custom_call_target == "Sharding";
  if (op == Opcode::kCall) {
    for (const Computation* c : v.called_computations())
      for (const auto& i : c->instructions())
        if (i->opcode() != Opcode::kParameter && !Pure(*i)) return false;
    return true;
  }
  const OpcodeFamily family = GetOpcodeFamily(op);
  return family != OpcodeFamily::kCollective && family != OpcodeFamily::kControl;
}

// The ops between the scans that compute the backward scan's input (the
// loss's gradient) from the forward scan's activation, rebatched to one
// microbatch.
struct LossGradient {
  // In the module, called by nothing: parameter 0 is the tuple (forward
  // activation of one microbatch, inputs...), the root its gradient.
  Computation* comp = nullptr;
  std::vector<Instruction*> inputs;       // entry values read besides the activation
  std::vector<int64_t> input_batch_dims;  // each input's batch dim, -1: read whole
  std::vector<Instruction*> entry_ops;    // the entry's ops it was made from
};

// `from_fwd`: the entry's values computed from the forward scan (and the scan).
StatusOr<LossGradient> RebatchLossGradient(Module& module, const StageShardings& sh,
                                           const LayerLoop& fwd, const LayerLoop& bwd,
                                           const std::set<const Instruction*>& from_fwd,
                                           Instruction* grad, int64_t bd, int64_t micro,
                                           const std::string& schedule) {
  Computation* entry = module.entry();
  const std::string between = "the loss gradient %" + grad->name() + " (the ops between loop %" +
                              fwd.loop->name() + " and loop %" + bwd.loop->name() + ")";
  std::vector<Instruction*> order = entry->MakePostOrder();
  std::set<const Instruction*> feeds = {grad};
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (feeds.count(*it))
      for (const Instruction* o : (*it)->operands()) feeds.insert(o);

  LossGradient out;
  std::map<const Instruction*, int64_t> input_index;  // resolved value -> tuple element
  auto input = [&](Instruction* v) {
    auto [it, fresh] = input_index.try_emplace(v, static_cast<int64_t>(out.inputs.size()) + 1);
    if (fresh) out.inputs.push_back(v);
    return it->second;
  };
  // The forward scan's elements the gradient reads: its activation, or a
  // pass-through value (read as the value the scan was given).
  std::set<const Instruction*> ops;
  for (Instruction* i : order) {
    if (!feeds.count(i) || !from_fwd.count(i) || i == fwd.loop) continue;
    const int64_t e = ElementOf(i, fwd);
    if (e >= 0) {
      if (e != fwd.activation && Resolve(i, fwd) == i)
        return ErrorAt(*i, schedule + ": " + between + " reads element " + std::to_string(e) +
                               " of the forward scan, not its activation: not pipelined yet");
      continue;
    }
    ops.insert(i);
  }
  const bool grad_is_input = !from_fwd.count(grad);
  // What it reads from outside: values computed before the forward scan.
  auto outside = [&]() {
    std::vector<Instruction*> in;
    for (Instruction* i : order)
      if (ops.count(i))
        for (Instruction* o : i->operands())
          if (!ops.count(o) && ElementOf(o, fwd) != fwd.activation &&
              std::find(in.begin(), in.end(), Resolve(o, fwd)) == in.end())
            in.push_back(Resolve(o, fwd));
    return in;
  };
  // A value it reads that expands smaller ones (a broadcast constant, an
  // iota, the one-hot of the labels) is computed per microbatch inside it,
  // instead of entering the ticks whole.
  auto expands = [&](const Instruction* v) {
    if (v->opcode() == Opcode::kParameter || !Pure(*v)) return false;
    int64_t read = 0;
    for (const Instruction* o : v->operands())
      if (!ops.count(o)) read += o->shape().ByteSize();
    return read < v->shape().ByteSize();
  };
  for (bool grew = !grad_is_input; grew;) {
    grew = false;
    for (Instruction* v : outside())
      if (expands(v)) grew = ops.insert(v).second || grew;
  }
  for (Instruction* i : order)
    if (ops.count(i)) out.entry_ops.push_back(i);
  for (Instruction* v : outside()) input(v);
  if (grad_is_input) input(grad);

  // Build it alone in a copy of the module, as that copy's entry.
  std::unique_ptr<Module> copy = module.Clone();
  auto comp = std::make_unique<Computation>(copy->UniqueInstructionName("loss_gradient"));
  Builder cb(*copy, *comp, grad->loc());
  std::vector<Shape> shapes = {fwd.loop->shape().tuple_shapes(static_cast<int>(fwd.activation))};
  for (Instruction* v : out.inputs) shapes.push_back(v->shape());
  Instruction* p = cb.Parameter(0, Shape::Tuple(shapes), "loss_gradient_in");
  std::vector<Instruction*> elements;
  for (size_t k = 0; k < shapes.size(); ++k) elements.push_back(cb.Element(p, static_cast<int64_t>(k)));
  std::map<const Instruction*, Instruction*> copied;
  std::map<std::string, std::string> original_name;
  auto mapped = [&](Instruction* o) -> Instruction* {
    if (ElementOf(o, fwd) == fwd.activation) return elements[0];
    auto c = copied.find(Resolve(o, fwd));
    if (c != copied.end()) return c->second;
    return elements[input_index.at(Resolve(o, fwd))];
  };
  for (Instruction* i : out.entry_ops) {
    std::vector<Instruction*> operands;
    for (Instruction* o : i->operands()) operands.push_back(mapped(o));
    std::unique_ptr<Instruction> c =
        stage_region::CopyInstruction(*i, copy->UniqueInstructionName(i->name()), operands);
    std::vector<Computation*> called;  // the copy's computations of the same names
    for (const Computation* f : i->called_computations())
      called.push_back(copy->FindComputation(f->name()));
    c->set_called_computations(called);
    original_name[c->name()] = i->name();
    copied[i] = comp->AddInstruction(std::move(c));
  }
  comp->set_root(mapped(grad));
  Computation* head = copy->AddComputation(std::move(comp));
  copy->set_entry(head);
  std::set<Computation*> keep;
  stage_region::Reachable(head, keep);
  stage_region::InlineCallsIn(*copy, keep);
  keep.clear();
  stage_region::Reachable(head, keep);
  std::vector<Computation*> drop;
  for (const auto& c : copy->computations())
    if (!keep.count(c.get())) drop.push_back(c.get());
  for (Computation* c : drop) copy->RemoveComputation(c);

  std::map<std::string, Shape> before;
  for (const auto& i : head->instructions()) before.emplace(i->name(), i->shape());
  ShrinkBatchOptions shrink;
  shrink.parameters = {p->name()};
  shrink.tuple_batch_dims = {{0, bd}};
  for (int64_t k = 1; k < static_cast<int64_t>(shapes.size()); ++k) {
    if (grad_is_input && out.inputs[k - 1] == grad) shrink.tuple_batch_dims.emplace_back(k, bd);
    else shrink.open_tuple_elements.push_back(k);
  }
  shrink.factor = micro;
  StatusOr<ShrinkBatchReport> shrunk = ShrinkBatch(*copy, shrink);
  if (!shrunk.ok())
    return ErrorAt(*grad, schedule + ": " + between + " does not run on a microbatch: " +
                              shrunk.status().message());
  // Which values shrank (an op ShrinkBatch added counts as batched when it
  // reads a batched value).
  std::set<const Instruction*> batched;
  for (Instruction* i : head->MakePostOrder()) {
    auto was = before.find(i->name());
    if (was != before.end() ? was->second != i->shape()
                            : std::any_of(i->operands().begin(), i->operands().end(),
                                          [&](const Instruction* o) { return batched.count(o) > 0; }))
      batched.insert(i);
  }

  out.input_batch_dims.assign(out.inputs.size(), -1);
  for (Instruction* g : head->parameter(0)->users()) {
    const int64_t k = g->attrs().tuple_index;
    if (k == 0) continue;
    const Shape was = before.at(g->name());
    for (int64_t d = 0; d < was.rank(); ++d) {
      if (g->shape().dimensions(static_cast<int>(d)) == was.dimensions(static_cast<int>(d))) continue;
      if (out.input_batch_dims[k - 1] >= 0)
        return ErrorAt(*grad, schedule + ": " + between + " reads %" + out.inputs[k - 1]->name() +
                                  ", whose dims " + std::to_string(out.input_batch_dims[k - 1]) +
                                  " and " + std::to_string(d) + " both derive from the batch");
      out.input_batch_dims[k - 1] = d;
    }
  }
  // Each microbatch's gradient must depend on that microbatch alone: no op
  // may turn batched values into unbatched ones (a sum over the batch).
  // (Tuples and their elements only pass values on.)
  for (Instruction* i : head->MakePostOrder()) {
    if (i->opcode() == Opcode::kParameter || i->opcode() == Opcode::kGetTupleElement ||
        i->opcode() == Opcode::kTuple || batched.count(i))
      continue;
    for (const Instruction* o : i->operands())
      if (batched.count(o)) {
        auto name = original_name.find(i->name());
        const Instruction* at = name != original_name.end() ? entry->Find(name->second) : nullptr;
        return ErrorAt(at != nullptr ? *at : *grad,
                       schedule + " needs the loss gradient of each microbatch alone, but %" +
                           (at != nullptr ? at->name() : i->name()) + " (" +
                           std::string(OpcodeName(i->opcode())) + ") in " + between +
                           " combines the whole batch: use gpipe");
      }
  }
  const std::vector<int64_t> want = LayoutFor(grad->shape(), bd, micro).microbatch;
  if (head->root()->shape().dimensions() != want)
    return ErrorAt(*grad, schedule + ": " + between + " does not split by microbatch along dim " +
                              std::to_string(bd) + " (one microbatch's is " +
                              head->root()->shape().ToString(false) + ")");
  MS_RETURN_IF_ERROR(stage_region::MoveAnnotationsInside(*copy, sh, *grad));
  out.comp = stage_region::AdoptComputations(module, *copy, head);
  return out;
}

// Appends a copy of `comp`'s instructions to `b`'s computation, its
// parameter's elements read as `elements`; returns the copy of the root.
Instruction* Inline(Builder& b, Module& module, const Computation& comp,
                    const std::vector<Instruction*>& elements) {
  std::map<const Instruction*, Instruction*> copied;
  for (Instruction* i : comp.MakePostOrder()) {
    if (i->opcode() == Opcode::kParameter) continue;
    if (i->opcode() == Opcode::kGetTupleElement &&
        i->operand(0)->opcode() == Opcode::kParameter) {
      copied[i] = elements[i->attrs().tuple_index];
      continue;
    }
    std::vector<Instruction*> operands;
    for (Instruction* o : i->operands()) operands.push_back(copied.at(o));
    copied[i] = b.computation().AddInstruction(
        stage_region::CopyInstruction(*i, module.UniqueInstructionName(i->name()), operands));
  }
  return copied.at(comp.root());
}

// What one element of the tick loop's tuple holds.
enum class Held {
  kFixed,             // counter, stage, activation buffers
  kWhole,             // a value every stage reads as it is (weights: its L/S layers)
  kBatched,           // [M, .., B/M, ..]: microbatch m is row m
  kResidual,          // [K_r, L/S, .., B/M, ..]: microbatch m in slot m % K_r
  kSummed,            // [L/S, ...]: summed over the microbatches run
  kSaved,             // zb-h1: [K_w, L/S, ...]: what B of microbatch m leaves for its W
};

struct TickElement {
  Held held = Held::kFixed;
  Shape local;
  Sharding manual, full;
  Sharding row;                  // kBatched: one microbatch's row
  std::optional<Sharding> base;  // its layout over the other axes, outside
};

class OneFOneB {
 public:
  OneFOneB(Module& module, const StageShardings& sh, const PipelineSpec& spec,
           const PipelineRunOptions& run, const LayerLoop& fwd, const LayerLoop& bwd)
      : module_(module), sh_(sh), spec_(spec), run_(run), F_(fwd), B_(bwd) {}

  StatusOr<PipelineSchedule> Run();

 private:
  Instruction* On(Instruction* i, const Sharding& s) {
    i->set_sharding(s);
    return i;
  }
  Instruction* When(Builder& b, Instruction* pred, Instruction* yes, Instruction* no,
                    const Sharding& s) {
    return On(b.Add(Opcode::kSelect, yes->shape(),
                    {On(b.Broadcast(pred, yes->shape().dimensions()), s), yes, no}, "select"),
              s);
  }
  // Row `index` of a [K, ...] buffer, without its leading 1.
  Instruction* Row(Builder& b, Instruction* buffer, Instruction* index, const Sharding& row) {
    std::vector<int64_t> dims = buffer->shape().dimensions();
    dims.erase(dims.begin());
    return On(b.Reshape(b.SliceRow(buffer, index), dims), row);
  }
  // `buffer` with row `index` set to `value` when `pred` (null: always).
  Instruction* SetRow(Builder& b, Instruction* buffer, Instruction* index, Instruction* value,
                      Instruction* pred, const Sharding& row, const Sharding& whole) {
    if (pred != nullptr) value = When(b, pred, value, Row(b, buffer, index, row), row);
    std::vector<int64_t> one = value->shape().dimensions();
    one.insert(one.begin(), 1);
    return On(b.UpdateRow(buffer, b.Reshape(value, one), index), whole);
  }
  Instruction* Mod(Builder& b, Instruction* m, int64_t k) {
    return b.Binary(Opcode::kRemainder, m, b.ConstantS32(k));
  }

  // Adds an element for `v` entering the region as `held` (once per value
  // and kind); returns its index.
  StatusOr<int64_t> Enter(Builder& eb, Instruction* v, Held held, int64_t batch_dim,
                          const Shape& local, const Instruction& loop);
  // A layer loop's stage-loop tuple sharding (its element shardings).
  StatusOr<Sharding> StageTupleSharding(const LayerLoop& scan, const StageLoop& sl,
                                        const std::map<int64_t, int64_t>& at,
                                        const Sharding& activation);
  // What one tick computes before anything is stored, by position: the
  // forward result y, the loss gradient g (last stage), the backward
  // result dx, then a row or sum per per-layer result of the forward scan
  // and of the backward scan.
  enum : int64_t { kY, kG, kDx, kFirstOutput };
  std::vector<Shape> ComputedShapes() const;
  std::vector<Sharding> ComputedShardings() const;
  // Appends the forward of microbatch `m` (with the loss gradient when
  // `head`) to `b`'s computation, into `out` (sized ComputedShapes()).
  void EmitForward(Builder& b, const std::vector<Instruction*>& st, Instruction* m, bool head,
                   std::vector<Instruction*>& out);
  // The stage loop `sl` of `scan` on microbatch `m`, from `activation`.
  // `extra`: the initial values of elements the layer loop does not have
  // (zb-h1's stacks of what B saves for W), by tuple index.
  Instruction* RunLayers(Builder& b, const LayerLoop& scan, const StageLoop& sl,
                         const std::map<int64_t, int64_t>& at, const std::vector<Sharding>& inner,
                         const Sharding& tuple, const std::vector<Instruction*>& st,
                         Instruction* m, Instruction* activation,
                         const std::map<int64_t, Instruction*>& extra = {});
  // The backward of microbatch `m`; under zb-h1 its B only (the input's
  // gradient and the stacks W reads), EmitWeight its W.
  void EmitBackward(Builder& b, const std::vector<Instruction*>& st, Instruction* m,
                    std::vector<Instruction*>& out);
  void EmitWeight(Builder& b, const std::vector<Instruction*>& st, Instruction* m,
                  std::vector<Instruction*>& out);
  // A value of `shape` that nothing may read (NaN under verify).
  Instruction* Unread(Builder& b, const Shape& shape, const Sharding& s);
  // Stores what a tick computed when the table says it ran (`ran_w`:
  // zb-h1's W, else null).
  void Store(Builder& b, std::vector<Instruction*>& st, const std::vector<Instruction*>& computed,
             Instruction* mf, Instruction* mb, Instruction* ran_f, Instruction* ran_b,
             Instruction* ran_w, Instruction* stage);
  // Position in ComputedShapes() of the first zb-h1 stack.
  size_t FirstSaved() const { return kFirstOutput + F_.outputs.size() + B_.outputs.size(); }

  Module& module_;
  const StageShardings& sh_;
  const PipelineSpec& spec_;
  const PipelineRunOptions& run_;
  const LayerLoop& F_;
  const LayerLoop& B_;

  int64_t stages_ = 0, micro_ = 0, per_stage_ = 0, bd_ = 0;
  double fill_ = 0;  // what buffers start as (NaN under verify)
  // zb-h1: the backward runs as B (bsl_, the split's input_gradient loop)
  // and W (wsl_), over one tuple.
  bool zero_bubble_ = false;
  SplitBackwardLoop split_;
  StageLoop wsl_;
  std::vector<int64_t> saved_at_;  // tick element of each of split_.saved
  InterleavedTable table_;
  StageLoop fsl_, bsl_;
  LossGradient head_;
  Sharding scalar_man_, man_h_, man_h1_, man_g_, man_g1_, fsl_sharding_, bsl_sharding_;
  std::vector<int64_t> mb_h_, mb_g_;  // one microbatch of the activation / its gradient
  std::vector<TickElement> elements_;
  std::vector<Instruction*> init_;
  std::map<std::pair<const Instruction*, Held>, int64_t> entered_;
  std::map<int64_t, int64_t> f_at_, b_at_;  // layer-loop element -> tick element
  std::vector<int64_t> head_at_;            // loss-gradient input -> tick element
  std::vector<Sharding> f_inner_, b_inner_;  // stage-loop element shardings
};

// Fixed elements of the tick tuple.
enum : int64_t { kT, kStage, kFwdIn, kBwdIn, kInputs, kOutsF, kOutsB, kFirstCarried };

StatusOr<int64_t> OneFOneB::Enter(Builder& eb, Instruction* v, Held held, int64_t batch_dim,
                                  const Shape& local, const Instruction& loop) {
  auto found = entered_.find({v, held});
  if (found != entered_.end()) return found->second;
  const Sharding* base = BaseOf(v);
  const int64_t r = v->shape().rank();
  TickElement e;
  e.held = held;
  e.local = local;
  if (base != nullptr) e.base = *base;
  Instruction* inside = nullptr;
  if (held == Held::kBatched) {
    MS_ASSIGN_OR_RETURN(e.manual, sh_.Manual(base, r, 1));
    MS_ASSIGN_OR_RETURN(e.row, sh_.Manual(base, r, 0));
    MS_ASSIGN_OR_RETURN(inside,
                        stage_region::EnterMicrobatched(eb, sh_, v, batch_dim, base, micro_, loop));
    e.local = inside->shape();
  } else {
    const bool layers = local.dimensions() != v->shape().dimensions();  // stacked weights
    if (layers && base != nullptr && base->IsTiled() && base->TileDim(0) != 1)
      return ErrorAt(loop, "%" + v->name() + ", which loop %" + loop.name() +
                               " reads per layer, is already split along its layer dim (" +
                               base->ToString() + ")");
    MS_ASSIGN_OR_RETURN(e.manual, sh_.Manual(base, r, 0));
    if (layers) {
      MS_ASSIGN_OR_RETURN(e.full, sh_.StageTiled(base, r, 0));
      // The parameter behind the stack holds this stage's layers only.
      for (auto& [x, staged] : stage_region::StackedParameterChain(v, e.full)) x->set_sharding(staged);
    } else {
      MS_ASSIGN_OR_RETURN(e.full, sh_.Full(base, r));
    }
    inside = eb.CustomCall(kFullToShard, eb.CustomCall(kShardingTarget, v, v->shape(), e.full),
                           local, e.manual);
  }
  const int64_t at = static_cast<int64_t>(elements_.size());
  elements_.push_back(e);
  init_.push_back(On(inside, e.manual));
  entered_[{v, held}] = at;
  return at;
}

StatusOr<Sharding> OneFOneB::StageTupleSharding(const LayerLoop& scan, const StageLoop& sl,
                                                const std::map<int64_t, int64_t>& at,
                                                const Sharding& activation) {
  std::vector<Sharding> inner(sl.carried.tuple_size(), scalar_man_);
  inner[scan.activation] = activation;
  for (const auto& [e, k] : at) {
    const TickElement& t = elements_[k];
    if (t.held == Held::kBatched || t.held == Held::kResidual) {
      // One microbatch of the buffer: its tiles less the leading dim.
      MS_ASSIGN_OR_RETURN(inner[e], sh_.Manual(t.base ? &*t.base : nullptr,
                                               sl.carried.tuple_shapes(static_cast<int>(e)).rank(), 0));
    } else {
      inner[e] = t.manual;
    }
  }
  return Sharding::Tuple(inner);
}

std::vector<Shape> OneFOneB::ComputedShapes() const {
  const PrimitiveType type = F_.loop->shape().tuple_shapes(static_cast<int>(F_.activation)).element_type();
  std::vector<Shape> shapes = {Shape(type, mb_h_), Shape(type, mb_g_), Shape(type, mb_g_)};
  for (int64_t e : F_.outputs) shapes.push_back(fsl_.carried.tuple_shapes(static_cast<int>(e)));
  for (int64_t e : B_.outputs) shapes.push_back(bsl_.carried.tuple_shapes(static_cast<int>(e)));
  for (int64_t e : split_.saved) shapes.push_back(bsl_.carried.tuple_shapes(static_cast<int>(e)));
  return shapes;
}

std::vector<Sharding> OneFOneB::ComputedShardings() const {
  std::vector<Sharding> shardings = {man_h_, man_g_, man_g_};
  for (int64_t e : F_.outputs) shardings.push_back(f_inner_[e]);
  for (int64_t e : B_.outputs) shardings.push_back(b_inner_[e]);
  for (int64_t e : split_.saved) shardings.push_back(b_inner_[e]);
  return shardings;
}

Instruction* OneFOneB::RunLayers(Builder& b, const LayerLoop& scan, const StageLoop& sl,
                                 const std::map<int64_t, int64_t>& at,
                                 const std::vector<Sharding>& inner, const Sharding& tuple,
                                 const std::vector<Instruction*>& st, Instruction* m,
                                 Instruction* activation,
                                 const std::map<int64_t, Instruction*>& extra) {
  std::vector<Instruction*> init(sl.carried.tuple_size(), nullptr);
  init[scan.counter] = b.ConstantS32(0);
  init[scan.activation] = activation;
  for (const auto& [e, v] : extra) init[e] = v;
  for (const auto& [e, k] : at) {
    const Shape& shape = sl.carried.tuple_shapes(static_cast<int>(e));
    if (Contains(scan.outputs, e)) {  // per-layer results start from zeros
      init[e] = On(b.Broadcast(On(b.Scalar(shape.element_type(), 0), scalar_man_),
                               shape.dimensions()),
                   inner[e]);
      continue;
    }
    switch (elements_[k].held) {
      case Held::kBatched:
        init[e] = Row(b, st[k], m, inner[e]);
        break;
      case Held::kResidual:  // the forward scan's, read by the backward one
        init[e] = Row(b, st[k], Mod(b, m, table_.residual_slots), inner[e]);
        break;
      default:
        init[e] = st[k];
    }
  }
  Instruction* layers =
      On(b.Add(Opcode::kWhile, sl.carried, {On(b.Tuple(init), tuple)}, "while"), tuple);
  layers->set_called_computations({sl.condition, sl.body});
  return layers;
}

void OneFOneB::EmitForward(Builder& b, const std::vector<Instruction*>& st, Instruction* m,
                           bool head, std::vector<Instruction*>& out) {
  Instruction* first = b.Compare(st[kStage], b.ConstantS32(0), ComparisonDirection::kEq);
  Instruction* x = When(b, first, Row(b, st[kInputs], m, man_h_),
                        Row(b, st[kFwdIn], Mod(b, m, table_.forward_slots), man_h_), man_h_);
  Instruction* layers = RunLayers(b, F_, fsl_, f_at_, f_inner_, fsl_sharding_, st, m, x);
  out[kY] = On(b.Element(layers, F_.activation), man_h_);
  for (size_t k = 0; k < F_.outputs.size(); ++k)
    out[kFirstOutput + k] = On(b.Element(layers, F_.outputs[k]), f_inner_[F_.outputs[k]]);
  if (!head) return;
  std::vector<Instruction*> in = {out[kY]};
  for (int64_t at : head_at_)
    in.push_back(elements_[at].held == Held::kBatched ? Row(b, st[at], m, elements_[at].row)
                                                      : st[at]);
  out[kG] = On(Inline(b, module_, *head_.comp, in), man_g_);
}

Instruction* OneFOneB::Unread(Builder& b, const Shape& shape, const Sharding& s) {
  Instruction* scalar = On(b.Scalar(shape.element_type(), fill_), scalar_man_);
  return On(b.Broadcast(scalar, shape.dimensions()), s);
}

void OneFOneB::EmitBackward(Builder& b, const std::vector<Instruction*>& st, Instruction* m,
                            std::vector<Instruction*>& out) {
  Instruction* g = Row(b, st[kBwdIn], Mod(b, m, table_.backward_slots), man_g_);
  // B writes every row of its stacks (one per layer).
  std::map<int64_t, Instruction*> stacks;
  for (int64_t e : split_.saved)
    stacks[e] = Unread(b, bsl_.carried.tuple_shapes(static_cast<int>(e)), b_inner_[e]);
  Instruction* layers = RunLayers(b, B_, bsl_, b_at_, b_inner_, bsl_sharding_, st, m, g, stacks);
  out[kDx] = On(b.Element(layers, B_.activation), man_g_);
  if (zero_bubble_) {
    for (size_t k = 0; k < split_.saved.size(); ++k)
      out[FirstSaved() + k] = On(b.Element(layers, split_.saved[k]), b_inner_[split_.saved[k]]);
    return;
  }
  const size_t first_b = kFirstOutput + F_.outputs.size();
  for (size_t k = 0; k < B_.outputs.size(); ++k)
    out[first_b + k] = On(b.Element(layers, B_.outputs[k]), b_inner_[B_.outputs[k]]);
}

void OneFOneB::EmitWeight(Builder& b, const std::vector<Instruction*>& st, Instruction* m,
                          std::vector<Instruction*>& out) {
  // W reads what B of microbatch m saved, never the gradient itself.
  std::map<int64_t, Instruction*> stacks;
  for (size_t k = 0; k < split_.saved.size(); ++k) {
    const int64_t e = split_.saved[k];
    stacks[e] = Row(b, st[saved_at_[k]], Mod(b, m, table_.weight_slots), b_inner_[e]);
  }
  Instruction* g = Unread(b, bsl_.carried.tuple_shapes(static_cast<int>(B_.activation)), man_g_);
  Instruction* layers = RunLayers(b, B_, wsl_, b_at_, b_inner_, bsl_sharding_, st, m, g, stacks);
  const size_t first_b = kFirstOutput + F_.outputs.size();
  for (size_t k = 0; k < B_.outputs.size(); ++k)
    out[first_b + k] = On(b.Element(layers, B_.outputs[k]), b_inner_[B_.outputs[k]]);
}

void OneFOneB::Store(Builder& b, std::vector<Instruction*>& st,
                     const std::vector<Instruction*>& computed, Instruction* mf, Instruction* mb,
                     Instruction* ran_f, Instruction* ran_b, Instruction* ran_w,
                     Instruction* stage) {
  Instruction* last = b.Compare(stage, b.ConstantS32(stages_ - 1), ComparisonDirection::kEq);
  Instruction* first = b.Compare(stage, b.ConstantS32(0), ComparisonDirection::kEq);
  Instruction* ran_f_last = b.Binary(Opcode::kAnd, ran_f, last);
  auto add_up = [&](int64_t k, Instruction* sum, Instruction* ran) {
    st[k] = When(b, ran, On(b.Binary(Opcode::kAdd, st[k], sum), elements_[k].manual), st[k],
                 elements_[k].manual);
  };
  for (size_t i = 0; i < F_.outputs.size(); ++i) {
    const int64_t e = F_.outputs[i], k = f_at_.at(e);
    Instruction* v = computed[kFirstOutput + i];
    if (elements_[k].held == Held::kResidual)
      st[k] = SetRow(b, st[k], Mod(b, mf, table_.residual_slots), v, ran_f, f_inner_[e],
                     elements_[k].manual);
    else
      add_up(k, v, ran_f);
  }
  for (size_t i = 0; i < B_.outputs.size(); ++i)
    add_up(b_at_.at(B_.outputs[i]), computed[kFirstOutput + F_.outputs.size() + i],
           zero_bubble_ ? ran_w : ran_b);
  for (size_t i = 0; i < split_.saved.size(); ++i) {
    const int64_t k = saved_at_[i];
    st[k] = SetRow(b, st[k], Mod(b, mb, table_.weight_slots), computed[FirstSaved() + i], ran_b,
                   b_inner_[split_.saved[i]], elements_[k].manual);
  }
  // The last stage keeps microbatch mf's output and its loss gradient (the
  // input of its backward); stage 0 the input's gradient of microbatch mb.
  st[kOutsF] = SetRow(b, st[kOutsF], mf, computed[kY], ran_f_last, man_h_, man_h1_);
  st[kBwdIn] = SetRow(b, st[kBwdIn], Mod(b, mf, table_.backward_slots), computed[kG], ran_f_last,
                      man_g_, man_g1_);
  st[kOutsB] = SetRow(b, st[kOutsB], mb, computed[kDx], b.Binary(Opcode::kAnd, ran_b, first),
                      man_g_, man_g1_);
}

StatusOr<PipelineSchedule> OneFOneB::Run() {
  Module& module = module_;
  Computation* entry = module.entry();
  Instruction& floop = *F_.loop;
  Instruction& bloop = *B_.loop;
  stages_ = sh_.stages();
  micro_ = spec_.microbatches;
  bd_ = spec_.batch_dim;
  if (B_.layers != F_.layers)
    return ErrorAt(bloop, spec_.schedule + ": the backward scan %" + bloop.name() + " runs " +
                              Plural(B_.layers, "layer") + ", the forward scan %" + floop.name() +
                              " " + std::to_string(F_.layers));
  // Idle stages skip their work through a conditional only when the stage
  // axis is the whole mesh (see the top of the file); otherwise every stage
  // runs both layer loops at every tick, and the paired table uses both.
  const bool skip = run_.skip_idle && sh_.num_devices() == stages_;
  StatusOr<PipelineSchedule> planned = PlanSchedule(spec_, stages_, F_.layers, false, !skip);
  if (!planned.ok()) return ErrorAt(floop, planned.status().message());
  PipelineSchedule schedule = std::move(planned).value();
  schedule.loop = floop.name();
  schedule.backward_loop = bloop.name();
  zero_bubble_ = spec_.schedule == "zb-h1";
  table_ = zero_bubble_ ? PlanZeroBubbleH1(stages_, micro_, !skip)
                        : PlanOneFOneB(stages_, micro_, !skip);
  per_stage_ = F_.layers / stages_;

  Instruction* finit = floop.operand(0);
  Instruction* binit = bloop.operand(0);
  Instruction* h0 = finit->operand(static_cast<int>(F_.activation));
  Instruction* dh = binit->operand(static_cast<int>(B_.activation));
  const Shape act = h0->shape();
  if (bd_ >= act.rank())
    return ErrorAt(floop, "loop %" + floop.name() + ": its activation %" + h0->name() + " (" +
                              act.ToString(false) + ") has no batch dim " + std::to_string(bd_));
  if (act.dimensions(static_cast<int>(bd_)) % micro_ != 0)
    return ErrorAt(floop, Plural(micro_, "microbatch") + (micro_ == 1 ? " does" : " do") +
                              " not divide batch " +
                              std::to_string(act.dimensions(static_cast<int>(bd_))) + " (dim " +
                              std::to_string(bd_) + " of %" + h0->name() +
                              ", the activation of loop %" + floop.name() + ")");
  if (dh->shape().dimensions() != act.dimensions())
    return ErrorAt(bloop, spec_.schedule + ": the backward scan %" + bloop.name() +
                              " starts from %" +
                              dh->name() + " (" + dh->shape().ToString(false) +
                              "), not shaped as the forward scan's activation (" +
                              act.ToString(false) + ")");

  // The backward scan's stacked reads of the forward scan's residuals; the
  // residuals are read nowhere else (a stage keeps only a few microbatches).
  std::map<int64_t, int64_t> residual_of;  // B element -> F element
  for (int64_t e : B_.stacked) {
    const int64_t k = ElementOf(binit->operand(static_cast<int>(e)), F_);
    if (k >= 0 && Contains(F_.outputs, k)) residual_of[e] = k;
  }
  for (Instruction* u : floop.users()) {
    const int64_t k = ElementOf(u, F_);
    if (k < 0)
      return ErrorAt(*u, spec_.schedule + ": %" + u->name() + " reads the whole tuple of loop %" +
                             floop.name() + "; it must read its elements one by one");
    if (!Contains(F_.outputs, k)) continue;
    for (Instruction* uu : u->users())
      if (uu != binit)
        return ErrorAt(*uu, spec_.schedule +
                                " keeps the per-layer results of a few microbatches only, but %" +
                                uu->name() + " reads per-layer result " + std::to_string(k) +
                                " of loop %" + floop.name() + " (only the backward scan %" +
                                bloop.name() + " may)");
  }
  std::set<const Instruction*> from_fwd = {&floop};
  for (Instruction* i : entry->MakePostOrder())
    for (const Instruction* o : i->operands())
      if (from_fwd.count(o)) from_fwd.insert(i);
  for (int64_t e = 0; e < binit->operand_count(); ++e) {
    if (e == B_.activation || residual_of.count(e)) continue;
    Instruction* v = Resolve(binit->operand(static_cast<int>(e)), F_);
    if (from_fwd.count(v))
      return ErrorAt(*v, spec_.schedule + ": the backward scan %" + bloop.name() + " reads %" +
                             v->name() +
                             ", computed from the forward scan's results: not pipelined yet");
  }

  MS_ASSIGN_OR_RETURN(fsl_, BuildStageLoop(module, F_, sh_, per_stage_, micro_, bd_, {}));
  std::map<int64_t, int64_t> read_batch;
  for (const auto& [e, k] : residual_of) {
    const int64_t d = fsl_.output_batch_dims.at(k);
    if (d < 0)
      return ErrorAt(bloop, spec_.schedule + ": the backward scan %" + bloop.name() +
                                " reads per-layer result " +
                                std::to_string(k) + " of loop %" + floop.name() +
                                ", which sums over the batch: not pipelined yet");
    read_batch[e] = d;
  }
  for (int64_t k : F_.outputs) {
    bool read = false;
    for (const auto& [e, kk] : residual_of) read |= kk == k;
    if (fsl_.output_batch_dims.at(k) >= 0 && !read)
      return ErrorAt(floop, spec_.schedule + ": per-layer result " + std::to_string(k) +
                                " of loop %" + floop.name() +
                                " carries the batch but the backward scan does not read it; " +
                                spec_.schedule + " keeps residuals for a few microbatches only");
  }
  MS_ASSIGN_OR_RETURN(bsl_, BuildStageLoop(module, B_, sh_, per_stage_, micro_, bd_, read_batch));
  for (int64_t e : B_.outputs)
    if (bsl_.output_batch_dims.at(e) >= 0)
      return ErrorAt(bloop, spec_.schedule + ": per-layer result " + std::to_string(e) +
                                " of the backward scan %" +
                                bloop.name() + " carries the batch: not pipelined yet");
  if (zero_bubble_) {
    const StageLoop whole = bsl_;
    MS_ASSIGN_OR_RETURN(split_, SplitBackward(module, B_, whole, per_stage_));
    bsl_ = split_.input_gradient;
    wsl_ = split_.weight_gradient;
    module.RemoveComputation(whole.body);
    module.RemoveComputation(whole.condition);
  }
  MS_ASSIGN_OR_RETURN(head_, RebatchLossGradient(module, sh_, F_, B_, from_fwd, dh, bd_, micro_,
                                                  spec_.schedule));

  // Shardings of the activation and its gradient.
  const int64_t rank = act.rank();
  const Sharding* base_h = BaseOf(h0);
  const Sharding* base_g = BaseOf(dh);
  MS_ASSIGN_OR_RETURN(scalar_man_, sh_.Manual(nullptr, 0, 0));
  MS_ASSIGN_OR_RETURN(man_h_, sh_.Manual(base_h, rank, 0));
  MS_ASSIGN_OR_RETURN(man_h1_, sh_.Manual(base_h, rank, 1));
  MS_ASSIGN_OR_RETURN(Sharding man_h2, sh_.Manual(base_h, rank, 2));
  MS_ASSIGN_OR_RETURN(Sharding out_h, sh_.StageTiled(base_h, rank, 2));
  MS_ASSIGN_OR_RETURN(man_g_, sh_.Manual(base_g, rank, 0));
  MS_ASSIGN_OR_RETURN(man_g1_, sh_.Manual(base_g, rank, 1));
  MS_ASSIGN_OR_RETURN(Sharding man_g2, sh_.Manual(base_g, rank, 2));
  MS_ASSIGN_OR_RETURN(Sharding out_g, sh_.StageTiled(base_g, rank, 2));
  MS_ASSIGN_OR_RETURN(Sharding stage_full, sh_.StageTiled(nullptr, 1, 0));
  MS_ASSIGN_OR_RETURN(Sharding stage_man, sh_.Manual(nullptr, 1, 0));
  const MicrobatchLayout lay = LayoutFor(act, bd_, micro_);
  mb_h_ = mb_g_ = lay.microbatch;
  const PrimitiveType type = act.element_type();
  const double fill = run_.fill_nan && IsFloatingPoint(type)
                          ? std::numeric_limits<double>::quiet_NaN() : 0.0;
  fill_ = fill;

  // Into the region: the fixed elements, then what the layers read.
  Builder eb(module, *entry, floop.loc());
  auto fixed = [&](Instruction* v, const Sharding& s) {
    TickElement e;
    e.local = v->shape();
    e.manual = s;
    elements_.push_back(e);
    init_.push_back(On(v, s));
  };
  auto buffer = [&](int64_t rows) {
    std::vector<int64_t> dims = lay.microbatch;
    dims.insert(dims.begin(), rows);
    return eb.Broadcast(On(eb.Scalar(type, fill), scalar_man_), dims);
  };
  Instruction* iota = eb.Add(Opcode::kIota, Shape(PrimitiveType::S32, {stages_}), {}, "iota");
  Instruction* stage_id = eb.Reshape(
      eb.CustomCall(kFullToShard, eb.CustomCall(kShardingTarget, iota, iota->shape(), stage_full),
                    Shape(PrimitiveType::S32, {1}), stage_man),
      {});
  MS_ASSIGN_OR_RETURN(Instruction* xs, stage_region::EnterMicrobatched(eb, sh_, h0, bd_, base_h,
                                                                       micro_, floop));
  fixed(eb.ConstantS32(0), scalar_man_);
  fixed(stage_id, scalar_man_);
  fixed(buffer(table_.forward_slots), man_h1_);
  fixed(buffer(table_.backward_slots), man_g1_);
  fixed(xs, man_h1_);
  fixed(buffer(micro_), man_h1_);
  fixed(buffer(micro_), man_g1_);

  const Sharding* f_sharding = BaseOf(&floop);
  const Sharding* b_sharding = BaseOf(&bloop);
  auto loop_element_base = [](const Sharding* s, int64_t e) -> const Sharding* {
    return s != nullptr && s->IsTuple() ? &s->tuple_elements()[e] : nullptr;
  };
  auto enter_scan = [&](const LayerLoop& scan, const StageLoop& sl, Instruction* init,
                        const Sharding* loop_sharding,
                        std::map<int64_t, int64_t>& at) -> Status {
    for (int64_t e : scan.stacked) {
      if (&scan == &B_ && residual_of.count(e)) {
        at[e] = f_at_.at(residual_of.at(e));
        continue;
      }
      Shape local = sl.carried.tuple_shapes(static_cast<int>(e));
      MS_ASSIGN_OR_RETURN(at[e], Enter(eb, Resolve(init->operand(static_cast<int>(e)), F_),
                                       Held::kWhole, -1, local, *scan.loop));
    }
    for (int64_t e : scan.invariant) {
      Instruction* v = Resolve(init->operand(static_cast<int>(e)), F_);
      if (!v->shape().IsArray())
        return ErrorAt(*v, "loop %" + scan.loop->name() + " reads %" + v->name() +
                               ", a tuple, in every layer: not pipelined yet");
      auto batched = sl.invariant_batch_dims.find(e);
      MS_ASSIGN_OR_RETURN(at[e], batched != sl.invariant_batch_dims.end()
                                     ? Enter(eb, v, Held::kBatched, batched->second, v->shape(),
                                             *scan.loop)
                                     : Enter(eb, v, Held::kWhole, -1, v->shape(), *scan.loop));
    }
    for (int64_t e : scan.outputs) {
      const Sharding* base = loop_element_base(loop_sharding, e);
      const Shape global = scan.loop->shape().tuple_shapes(static_cast<int>(e));
      const int64_t r = global.rank();
      if (base != nullptr && base->IsTiled() && base->TileDim(0) != 1) {
        // Already placed as the pass leaves it (see pipeline.cc): fine.
        StatusOr<Sharding> staged = sh_.StageTiled(nullptr, r, 0);
        if (staged.ok() && *staged == *base) base = nullptr;
        else
          return ErrorAt(*scan.loop, "element " + std::to_string(e) + " of loop %" +
                                         scan.loop->name() + " is already split along its layer dim (" +
                                         base->ToString() + ")");
      }
      TickElement t;
      if (base != nullptr) t.base = *base;
      t.local = sl.carried.tuple_shapes(static_cast<int>(e));
      double start = 0;
      if (sl.output_batch_dims.at(e) >= 0) {
        t.held = Held::kResidual;
        std::vector<int64_t> dims = t.local.dimensions();
        dims.insert(dims.begin(), table_.residual_slots);
        t.local = Shape(global.element_type(), dims);
        MS_ASSIGN_OR_RETURN(t.manual, sh_.Manual(base, r, 1));
        start = run_.fill_nan && IsFloatingPoint(global.element_type())
                    ? std::numeric_limits<double>::quiet_NaN() : 0.0;
      } else {
        t.held = Held::kSummed;
        MS_ASSIGN_OR_RETURN(t.manual, sh_.Manual(base, r, 0));
        MS_ASSIGN_OR_RETURN(t.full, sh_.StageTiled(base, r, 0));
      }
      at[e] = static_cast<int64_t>(elements_.size());
      init_.push_back(On(eb.Broadcast(On(eb.Scalar(global.element_type(), start), scalar_man_),
                                      t.local.dimensions()),
                         t.manual));
      elements_.push_back(t);
    }
    return Status::Ok();
  };
  MS_RETURN_IF_ERROR(enter_scan(F_, fsl_, finit, f_sharding, f_at_));
  MS_RETURN_IF_ERROR(enter_scan(B_, bsl_, binit, b_sharding, b_at_));
  for (size_t k = 0; k < head_.inputs.size(); ++k) {
    Instruction* v = head_.inputs[k];
    const int64_t d = head_.input_batch_dims[k];
    MS_ASSIGN_OR_RETURN(int64_t at, d >= 0 ? Enter(eb, v, Held::kBatched, d, v->shape(), bloop)
                                           : Enter(eb, v, Held::kWhole, -1, v->shape(), bloop));
    head_at_.push_back(at);
  }
  // zb-h1: what B of a microbatch leaves for its W, K_w microbatches of it.
  std::vector<Sharding> saved_rows;  // one microbatch's stack, inside the stage loops
  for (size_t k = 0; k < split_.saved.size(); ++k) {
    const Shape& stack = bsl_.carried.tuple_shapes(static_cast<int>(split_.saved[k]));
    const Sharding* base = split_.activation_shaped[k] ? base_g : nullptr;
    TickElement t;
    t.held = Held::kSaved;
    if (base != nullptr) t.base = *base;
    std::vector<int64_t> dims = stack.dimensions();
    dims.insert(dims.begin(), table_.weight_slots);
    t.local = Shape(stack.element_type(), dims);
    // (Manual's rank is the value's; the stack adds the layers, the buffer
    // also its slots.)
    const int64_t r = stack.rank() - 1;
    MS_ASSIGN_OR_RETURN(t.manual, base != nullptr ? sh_.Manual(base, r, 2)
                                                  : sh_.Manual(nullptr, r + 2, 0));
    MS_ASSIGN_OR_RETURN(Sharding row, base != nullptr ? sh_.Manual(base, r, 1)
                                                      : sh_.Manual(nullptr, r + 1, 0));
    saved_rows.push_back(row);
    saved_at_.push_back(static_cast<int64_t>(elements_.size()));
    init_.push_back(On(eb.Broadcast(On(eb.Scalar(stack.element_type(), fill), scalar_man_), dims),
                       t.manual));
    elements_.push_back(t);
  }

  // The stage loops' tuples.
  MS_ASSIGN_OR_RETURN(fsl_sharding_, StageTupleSharding(F_, fsl_, f_at_, man_h_));
  MS_ASSIGN_OR_RETURN(bsl_sharding_, StageTupleSharding(B_, bsl_, b_at_, man_g_));
  if (zero_bubble_) {
    std::vector<Sharding> inner = bsl_sharding_.tuple_elements();
    for (size_t k = 0; k < split_.saved.size(); ++k) inner[split_.saved[k]] = saved_rows[k];
    bsl_sharding_ = Sharding::Tuple(inner);
  }
  f_inner_ = fsl_sharding_.tuple_elements();
  b_inner_ = bsl_sharding_.tuple_elements();
  std::vector<std::pair<StageLoop*, Sharding*>> stage_loops = {{&fsl_, &fsl_sharding_},
                                                                {&bsl_, &bsl_sharding_}};
  if (zero_bubble_) stage_loops.emplace_back(&wsl_, &bsl_sharding_);
  for (auto [sl, s] : stage_loops) {
    sl->body->parameter(0)->set_sharding(*s);
    sl->body->root()->set_sharding(*s);
    sl->condition->parameter(0)->set_sharding(*s);
    for (const auto& i : sl->condition->instructions())
      if (!i->has_sharding()) i->set_sharding(scalar_man_);
  }

  std::vector<Sharding> tick_shardings;
  for (const TickElement& e : elements_) tick_shardings.push_back(e.manual);
  const Sharding tick_sharding = Sharding::Tuple(tick_shardings);
  Instruction* tick_tuple = On(eb.Tuple(init_), tick_sharding);
  const Shape tick_shape = tick_tuple->shape();

  // The schedule table: the microbatch every (tick, stage) runs forward and
  // backward, -1 for none.
  const Shape table_shape(PrimitiveType::S32, {table_.ticks, stages_});
  Literal forward_table(table_shape), backward_table(table_shape), weight_table(table_shape);
  for (int64_t t = 0; t < table_.ticks; ++t)
    for (int64_t s = 0; s < stages_; ++s) {
      forward_table.SetInt(t * stages_ + s, table_.forward[s][t]);
      backward_table.SetInt(t * stages_ + s, table_.backward[s][t]);
      if (zero_bubble_) weight_table.SetInt(t * stages_ + s, table_.weight[s][t]);
    }
  MS_ASSIGN_OR_RETURN(Sharding table_man, sh_.Manual(nullptr, 2, 0));
  const int64_t channel = stage_region::NextChannelId(module);

  const std::string tick_name = zero_bubble_ ? "pipeline_zb_h1_tick" : "pipeline_1f1b_tick";
  auto body = std::make_unique<Computation>(module.UniqueInstructionName(tick_name));
  std::vector<std::unique_ptr<Computation>> branches;
  {
    Builder b(module, *body, floop.loc());
    Instruction* p = On(b.Parameter(0, tick_shape, "tick"), tick_sharding);
    std::vector<Instruction*> st;
    for (int64_t k = 0; k < tick_shape.tuple_size(); ++k)
      st.push_back(On(b.Element(p, k), tick_shardings[k]));
    Instruction* t = st[kT];
    Instruction* stage = st[kStage];
    Instruction* fwd_table = On(b.Add(Opcode::kConstant, table_shape, {}, "schedule_forward"), table_man);
    fwd_table->set_literal(forward_table);
    Instruction* bwd_table = On(b.Add(Opcode::kConstant, table_shape, {}, "schedule_backward"), table_man);
    bwd_table->set_literal(backward_table);
    Instruction* wgt_table = nullptr;
    if (zero_bubble_) {
      wgt_table = On(b.Add(Opcode::kConstant, table_shape, {}, "schedule_weight"), table_man);
      wgt_table->set_literal(weight_table);
    }
    auto look = [&](Instruction* table, Instruction* s) {
      return b.Reshape(b.SliceBlock(table, {t, s}, {1, 1}), {});
    };
    auto runs = [&](Instruction* m) {
      return b.Compare(m, b.ConstantS32(0), ComparisonDirection::kGe);
    };
    Instruction* mf = look(fwd_table, stage);
    Instruction* mb = look(bwd_table, stage);
    Instruction* zero = b.ConstantS32(0);
    Instruction* ran_f = runs(mf);
    Instruction* ran_b = runs(mb);
    Instruction* mf0 = b.Binary(Opcode::kMaximum, mf, zero);  // -1 reads row 0, then dropped
    Instruction* mb0 = b.Binary(Opcode::kMaximum, mb, zero);
    Instruction* mw = zero_bubble_ ? look(wgt_table, stage) : nullptr;
    Instruction* ran_w = zero_bubble_ ? runs(mw) : nullptr;
    Instruction* mw0 = zero_bubble_ ? b.Binary(Opcode::kMaximum, mw, zero) : nullptr;
    const std::vector<Shape> computed_shapes = ComputedShapes();
    const std::vector<Sharding> computed_shardings = ComputedShardings();
    // What a stage did not compute this tick: never stored (NaN under verify).
    auto nothing = [&](Builder& cb, size_t k) {
      return On(cb.Broadcast(On(cb.Scalar(computed_shapes[k].element_type(), fill), scalar_man_),
                             computed_shapes[k].dimensions()),
                computed_shardings[k]);
    };
    std::vector<Instruction*> computed(computed_shapes.size(), nullptr);
    if (skip) {
      // One branch per action (0 idle, 1 forward, 2 backward (zb-h1: its
      // B), 3 forward on the last stage, which also computes the loss
      // gradient, 4 zb-h1's W); each reads the tick's state and returns
      // only what it computed.
      std::vector<Instruction*> arg_elements = st;
      arg_elements.push_back(mf0);
      arg_elements.push_back(mb0);
      if (zero_bubble_) arg_elements.push_back(mw0);
      std::vector<Sharding> arg_shardings = tick_shardings;
      arg_shardings.resize(arg_elements.size(), scalar_man_);
      const Sharding arg_sharding = Sharding::Tuple(arg_shardings);
      Instruction* arg = On(b.Tuple(arg_elements), arg_sharding);
      const Shape result_shape = Shape::Tuple(computed_shapes);
      const Sharding result_sharding = Sharding::Tuple(computed_shardings);
      const char* names[] = {"stage_idle", "stage_forward", "stage_backward", "stage_forward_last",
                             "stage_weight"};
      std::vector<Computation*> called;
      for (int kind = 0; kind < (zero_bubble_ ? 5 : 4); ++kind) {
        auto c = std::make_unique<Computation>(module.UniqueInstructionName(names[kind]));
        Builder cb(module, *c, floop.loc());
        Instruction* cp = On(cb.Parameter(0, arg->shape(), "stage_in"), arg_sharding);
        std::vector<Instruction*> cst;
        for (int64_t k = 0; k < tick_shape.tuple_size(); ++k)
          cst.push_back(On(cb.Element(cp, k), tick_shardings[k]));
        Instruction* cmf = On(cb.Element(cp, tick_shape.tuple_size()), scalar_man_);
        Instruction* cmb = On(cb.Element(cp, tick_shape.tuple_size() + 1), scalar_man_);
        std::vector<Instruction*> out(computed_shapes.size(), nullptr);
        if (kind == 1 || kind == 3) EmitForward(cb, cst, cmf, kind == 3, out);
        if (kind == 2) EmitBackward(cb, cst, cmb, out);
        if (kind == 4)
          EmitWeight(cb, cst, On(cb.Element(cp, tick_shape.tuple_size() + 2), scalar_man_), out);
        for (size_t k = 0; k < out.size(); ++k)
          if (out[k] == nullptr) out[k] = nothing(cb, k);
        c->set_root(On(cb.Tuple(out), result_sharding));
        for (const auto& i : c->instructions())
          if (!i->has_sharding() && i->shape().IsArray() && i->shape().rank() == 0)
            i->set_sharding(scalar_man_);
        called.push_back(c.get());
        branches.push_back(std::move(c));
      }
      Instruction* last = b.Compare(stage, b.ConstantS32(stages_ - 1), ComparisonDirection::kEq);
      Instruction* forward_index =
          b.Add(Opcode::kSelect, mf->shape(), {last, b.ConstantS32(3), b.ConstantS32(1)}, "select");
      Instruction* no_b =
          zero_bubble_
              ? b.Add(Opcode::kSelect, mf->shape(), {ran_w, b.ConstantS32(4), b.ConstantS32(0)},
                      "select")
              : b.ConstantS32(0);
      Instruction* other_index =
          b.Add(Opcode::kSelect, mf->shape(), {ran_b, b.ConstantS32(2), no_b}, "select");
      Instruction* index =
          b.Add(Opcode::kSelect, mf->shape(), {ran_f, forward_index, other_index}, "select");
      std::vector<Instruction*> operands(called.size() + 1, arg);
      operands[0] = index;
      Instruction* ran = On(b.Add(Opcode::kConditional, result_shape, operands, "conditional"),
                            result_sharding);
      ran->set_called_computations(called);
      for (size_t k = 0; k < computed.size(); ++k)
        computed[k] = On(b.Element(ran, static_cast<int64_t>(k)), computed_shardings[k]);
    } else {
      // Paired: every layer loop runs on every stage at every tick.
      EmitForward(b, st, mf0, /*head=*/true, computed);
      EmitBackward(b, st, mb0, computed);
      if (zero_bubble_) EmitWeight(b, st, mw0, computed);
    }
    Store(b, st, computed, mf0, mb0, ran_f, ran_b, ran_w, stage);
    Instruction* send_f = computed[kY];
    Instruction* send_b = computed[kDx];
    // Hand the results on; a stage keeps what its neighbour sent when the
    // table says the neighbour ran that direction this tick.
    Instruction* up = On(b.Add(Opcode::kCollectivePermute, send_f->shape(), {send_f},
                               "collective-permute"),
                         man_h_);
    up->mutable_attrs().source_target_pairs = sh_.ShiftPairs(1);
    up->mutable_attrs().channel_id = channel;
    Instruction* down = On(b.Add(Opcode::kCollectivePermute, send_b->shape(), {send_b},
                                 "collective-permute"),
                           man_g_);
    down->mutable_attrs().source_target_pairs = sh_.ShiftPairs(-1);
    down->mutable_attrs().channel_id = channel + 1;
    Instruction* prev = b.Binary(Opcode::kMaximum, b.Binary(Opcode::kSubtract, stage, b.ConstantS32(1)),
                                 b.ConstantS32(0));
    Instruction* next = b.Binary(Opcode::kMinimum, b.Binary(Opcode::kAdd, stage, b.ConstantS32(1)),
                                 b.ConstantS32(stages_ - 1));
    Instruction* prev_f = look(fwd_table, prev);
    Instruction* next_b = look(bwd_table, next);
    Instruction* from_prev = b.Binary(
        Opcode::kAnd, b.Compare(stage, b.ConstantS32(0), ComparisonDirection::kGt), runs(prev_f));
    Instruction* from_next = b.Binary(
        Opcode::kAnd, b.Compare(stage, b.ConstantS32(stages_ - 1), ComparisonDirection::kLt),
        runs(next_b));
    st[kFwdIn] = SetRow(b, st[kFwdIn], Mod(b, prev_f, table_.forward_slots), up, from_prev,
                        man_h_, man_h1_);
    st[kBwdIn] = SetRow(b, st[kBwdIn], Mod(b, next_b, table_.backward_slots), down, from_next,
                        man_g_, man_g1_);
    st[kT] = b.Binary(Opcode::kAdd, t, b.ConstantS32(1));
    body->set_root(On(b.Tuple(st), tick_sharding));
    for (const auto& i : body->instructions())
      if (!i->has_sharding() && i->shape().IsArray() && i->shape().rank() == 0)
        i->set_sharding(scalar_man_);
  }
  auto cond = std::make_unique<Computation>(module.UniqueInstructionName(tick_name + "s"));
  {
    Builder b(module, *cond, floop.loc());
    Instruction* p = On(b.Parameter(0, tick_shape, "tick"), tick_sharding);
    cond->set_root(b.Compare(b.Element(p, kT), b.ConstantS32(table_.ticks), ComparisonDirection::kLt));
    for (const auto& i : cond->instructions())
      if (!i->has_sharding()) i->set_sharding(scalar_man_);
  }
  for (auto& c : branches) module.AddComputation(std::move(c));
  Computation* tick_cond = module.AddComputation(std::move(cond));
  Computation* tick_body = module.AddComputation(std::move(body));
  module.RemoveComputation(head_.comp);  // inlined where it runs
  Instruction* ticks = On(eb.Add(Opcode::kWhile, tick_shape, {tick_tuple}, "while"), tick_sharding);
  ticks->set_called_computations({tick_cond, tick_body});

  // Out of the region.
  auto results_of = [&](const LayerLoop& scan, const std::map<int64_t, int64_t>& at,
                        Instruction* init) {
    std::vector<Instruction*> results(scan.loop->shape().tuple_size(), nullptr);
    results[scan.counter] = eb.Scalar(
        scan.loop->shape().tuple_shapes(static_cast<int>(scan.counter)).element_type(),
        static_cast<double>(scan.layers));
    for (int64_t e : scan.stacked) results[e] = init->operand(static_cast<int>(e));
    for (int64_t e : scan.invariant) results[e] = init->operand(static_cast<int>(e));
    for (int64_t e : scan.outputs) {
      const TickElement& t = elements_[at.at(e)];
      if (t.held != Held::kSummed) continue;  // residuals: read by the backward scan only
      Instruction* local = On(eb.Element(ticks, at.at(e)), t.manual);
      results[e] = eb.CustomCall(
          kShardToFull, eb.CustomCall(kShardingTarget, local, local->shape(), t.manual),
          scan.loop->shape().tuple_shapes(static_cast<int>(e)), t.full);
    }
    return results;
  };
  std::vector<Instruction*> f_results = results_of(F_, f_at_, finit);
  std::vector<Instruction*> b_results = results_of(B_, b_at_, binit);
  f_results[F_.activation] = stage_region::FromOneStage(
      eb, On(eb.Element(ticks, kOutsF), man_h1_), stages_ - 1, stages_, act, bd_, man_h2, out_h);
  b_results[B_.activation] = stage_region::FromOneStage(
      eb, On(eb.Element(ticks, kOutsB), man_g1_), 0, stages_, dh->shape(), bd_, man_g2, out_g);

  // Removes `dead` (read by nothing), then whatever only it read: a loop,
  // its init tuple, the loss gradient's ops that fed the backward scan.
  std::set<const Instruction*> kept_loops = {&floop, &bloop};  // until replaced
  std::function<void(Instruction*)> Prune = [&](Instruction* dead) {
    if (!dead->users().empty() || entry->root() == dead || dead->opcode() == Opcode::kParameter ||
        kept_loops.count(dead))
      return;
    std::vector<Instruction*> operands = dead->operands();
    entry->RemoveInstruction(dead);
    std::sort(operands.begin(), operands.end());
    operands.erase(std::unique(operands.begin(), operands.end()), operands.end());
    for (Instruction* o : operands) Prune(o);
  };
  // The loops' users read the results; the backward scan goes first (its
  // init reads the forward scan's residuals).
  auto replace = [&](Instruction& loop, const std::vector<Instruction*>& results) {
    Instruction* whole = nullptr;
    for (Instruction* u : std::vector<Instruction*>(loop.users())) {
      if (u->opcode() == Opcode::kGetTupleElement) {
        Instruction* r = results[u->attrs().tuple_index];
        if (r != nullptr) {
          u->ReplaceAllUsesWith(r);
          if (entry->root() == u) entry->set_root(r);
        }
        Prune(u);
        continue;
      }
      if (whole == nullptr) whole = eb.Tuple(results);
      for (int k = 0; k < u->operand_count(); ++k)
        if (u->operand(k) == &loop) u->ReplaceOperand(k, whole);
    }
    if (entry->root() == &loop) entry->set_root(eb.Tuple(results));
    Computation* old_cond = loop.while_condition();
    Computation* old_body = loop.while_body();
    kept_loops.erase(&loop);
    Prune(&loop);
    bool still_called = false;
    for (const auto& c : module.computations())
      for (const auto& i : c->instructions())
        for (Computation* called : i->called_computations())
          if (called == old_cond || called == old_body) still_called = true;
    if (!still_called) {
      module.RemoveComputation(old_body);
      module.RemoveComputation(old_cond);
    }
  };
  replace(bloop, b_results);
  replace(floop, f_results);
  entry->SortTopologically();

  // Per stage: the residual slots, the activation buffers and what the
  // layers read per microbatch.
  const int64_t tiles_h = base_h != nullptr ? base_h->NumTiles() : 1;
  const int64_t micro_bytes = act.ByteSize() / micro_ / tiles_h;
  int64_t bytes = micro_bytes * (table_.forward_slots + table_.backward_slots + 3 * micro_);
  for (size_t k = kFirstCarried; k < elements_.size(); ++k)
    if (elements_[k].held == Held::kResidual || elements_[k].held == Held::kBatched ||
        elements_[k].held == Held::kSaved)
      bytes += elements_[k].local.ByteSize() / elements_[k].manual.NumTiles();
  schedule.peak_activation_bytes_per_stage = bytes;
  return schedule;
}

}  // namespace

const LayerLoop* BackwardScanOf(const LayerLoop& forward, const std::vector<LayerLoop>& loops) {
  for (const LayerLoop& l : loops) {
    if (!l.reversed || &l == &forward) continue;
    for (int64_t e : l.stacked) {
      const int64_t k = ElementOf(l.loop->operand(0)->operand(static_cast<int>(e)), forward);
      if (k >= 0 && Contains(forward.outputs, k)) return &l;
    }
  }
  return nullptr;
}

StatusOr<PipelineSchedule> PipelineOneFOneB(Module& module, const StageShardings& shardings,
                                            const PipelineSpec& spec,
                                            const PipelineRunOptions& run,
                                            const LayerLoop& forward, const LayerLoop& backward) {
  OneFOneB pipeliner(module, shardings, spec, run, forward, backward);
  return pipeliner.Run();
}

}  // namespace meshsplit
