// The stage loop (stage_loop.h). The body is copied out of the module with
// what it calls, rebatched by ShrinkBatch (which finds every batch-derived
// dim by propagating a batch tiling), given L/S layers, and moved back in.
#include "pipeline/stage_loop.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/shape_inference.h"
#include "pipeline/builder.h"
#include "pipeline/region.h"
#include "transforms/shrink_batch.h"

namespace meshsplit {
namespace {

using stage_region::ErrorAt;
using stage_region::Reachable;

struct Rebatched {
  std::unique_ptr<Module> module;
  // The body's instructions (with the calls inlined) whose shape changed.
  std::set<std::string> batched;
};

// The loop body alone, as the entry of a copy of the module, rebatched.
StatusOr<Rebatched> RebatchedBody(
    const Module& module, const Instruction& loop, int64_t microbatches,
    const std::vector<std::pair<int64_t, int64_t>>& batch_dims,
    const std::vector<int64_t>& open_elements = {}) {
  std::unique_ptr<Module> copy = module.Clone();
  Computation* body = copy->FindComputation(loop.while_body()->name());
  std::set<Computation*> keep;
  Reachable(body, keep);
  stage_region::InlineCallsIn(*copy, keep);
  keep.clear();
  Reachable(body, keep);
  std::vector<Computation*> drop;
  for (const auto& c : copy->computations())
    if (!keep.count(c.get())) drop.push_back(c.get());
  copy->set_entry(body);
  for (Computation* c : drop) copy->RemoveComputation(c);
  ShrinkBatchOptions shrink;
  shrink.parameters = {body->parameter(0)->name()};
  shrink.tuple_batch_dims = batch_dims;
  shrink.open_tuple_elements = open_elements;
  shrink.factor = microbatches;
  std::map<std::string, Shape> before;
  for (const auto& i : body->instructions()) before.emplace(i->name(), i->shape());
  StatusOr<ShrinkBatchReport> shrunk = ShrinkBatch(*copy, shrink);
  if (!shrunk.ok())
    return ErrorAt(loop, "loop %" + loop.name() + ": its body does not run on a microbatch: " +
                             shrunk.status().message());
  Rebatched out;
  for (const auto& i : body->instructions()) {
    auto it = before.find(i->name());
    if (it != before.end() && it->second != i->shape()) out.batched.insert(i->name());
  }
  out.module = std::move(copy);
  return out;
}

// True when `v` adds up contributions over the batch: a dot contracting, or
// a reduce-add over, a batch-derived dim (or over such a sum), seen through
// shape-only ops, sums of such values and the tuples an inlined call
// leaves. Only such stacked results may be summed over microbatches (a
// weight gradient is; a max over the batch would not be).
bool SumsOverBatch(const Instruction* v, const std::set<std::string>& batched) {
  switch (v->opcode()) {
    case Opcode::kReshape: case Opcode::kTranspose: case Opcode::kConvert:
    case Opcode::kCopy: case Opcode::kBitcast: case Opcode::kNegate:
      return SumsOverBatch(v->operand(0), batched);
    case Opcode::kAdd: case Opcode::kSubtract:
      return SumsOverBatch(v->operand(0), batched) && SumsOverBatch(v->operand(1), batched);
    case Opcode::kDot:
      return batched.count(v->operand(0)->name()) > 0 && batched.count(v->operand(1)->name()) > 0;
    case Opcode::kGetTupleElement:
      return v->operand(0)->opcode() == Opcode::kTuple &&
             SumsOverBatch(v->operand(0)->operand(static_cast<int>(v->attrs().tuple_index)), batched);
    case Opcode::kReduce: {
      if (v->operand_count() != 2) return false;
      if (!batched.count(v->operand(0)->name()) && !SumsOverBatch(v->operand(0), batched))
        return false;
      const Computation* f = v->to_apply();
      return f != nullptr && f->root()->opcode() == Opcode::kAdd &&
             f->root()->operand(0)->opcode() == Opcode::kParameter &&
             f->root()->operand(1)->opcode() == Opcode::kParameter;
    }
    default:
      return false;
  }
}

}  // namespace

StatusOr<StageLoop> BuildStageLoop(Module& module, const LayerLoop& scan,
                                   const StageShardings& shardings, int64_t chunk_layers,
                                   int64_t microbatches, int64_t batch_dim,
                                   const std::map<int64_t, int64_t>& read_batch_dims) {
  Instruction& loop = *scan.loop;
  const Computation& original = *loop.while_body();
  std::vector<std::pair<int64_t, int64_t>> batch_dims = {{scan.activation, batch_dim}};
  for (const auto& [e, d] : read_batch_dims) batch_dims.emplace_back(e, d);

  // First rebatch: which dim of each stacked result's update shrank, and
  // which values every layer reads carry the batch (propagation decides,
  // from how the body uses them).
  MS_ASSIGN_OR_RETURN(Rebatched rebatched,
                      RebatchedBody(module, loop, microbatches, batch_dims, scan.invariant));
  std::unique_ptr<Module> copy = std::move(rebatched.module);
  StageLoop out;
  bool rebatch_again = false;
  for (const Instruction* read : copy->entry()->parameter(0)->users()) {
    const int64_t e = read->attrs().tuple_index;
    if (std::find(scan.invariant.begin(), scan.invariant.end(), e) == scan.invariant.end() ||
        out.invariant_batch_dims.count(e))
      continue;
    const Shape& before = original.parameter(0)->shape().tuple_shapes(static_cast<int>(e));
    for (int64_t d = 0; d < read->shape().rank(); ++d) {
      if (read->shape().dimensions(static_cast<int>(d)) == before.dimensions(static_cast<int>(d)))
        continue;
      if (out.invariant_batch_dims.count(e))
        return ErrorAt(loop, "loop %" + loop.name() + " reads element " + std::to_string(e) +
                                 " in every layer, whose dims " +
                                 std::to_string(out.invariant_batch_dims[e]) + " and " +
                                 std::to_string(d) + " both derive from the batch");
      out.invariant_batch_dims[e] = d;
      batch_dims.emplace_back(e, d);
      rebatch_again = true;
    }
  }
  for (int64_t e : scan.outputs) {
    const Instruction* update = copy->entry()->root()->operand(static_cast<int>(e))->operand(1);
    const Instruction* before = original.Find(update->name());
    int64_t dim = -1;
    for (int64_t d = 0; before != nullptr && d < update->shape().rank(); ++d) {
      if (update->shape().dimensions(static_cast<int>(d)) ==
          before->shape().dimensions(static_cast<int>(d)))
        continue;
      if (dim >= 0)
        return ErrorAt(loop, "loop %" + loop.name() + " writes %" + update->name() +
                                 ", whose dims " + std::to_string(dim) + " and " +
                                 std::to_string(d) + " both derive from the batch");
      dim = d;
    }
    out.output_batch_dims[e] = dim;
    if (dim >= 0) {
      batch_dims.emplace_back(e, dim);
      rebatch_again = true;
    }
  }
  // Second rebatch with the batched results' buffers (and the batched
  // invariants) shrunk too.
  if (rebatch_again) {
    MS_ASSIGN_OR_RETURN(rebatched, RebatchedBody(module, loop, microbatches, batch_dims));
    copy = std::move(rebatched.module);
  }
  Computation* body = copy->entry();
  const std::set<std::string>& batched = rebatched.batched;
  for (const auto& [e, dim] : out.output_batch_dims) {
    const Instruction* update = body->root()->operand(static_cast<int>(e))->operand(1);
    if (dim < 0 && !SumsOverBatch(update, batched))
      return ErrorAt(loop, "loop %" + loop.name() + " writes per-layer %" + update->name() +
                               ", which neither carries the batch nor sums over it: "
                               "microbatches cannot be combined");
  }

  // The stacked elements hold one chunk of this stage's layers.
  const int64_t per_run = chunk_layers;
  Instruction* param = body->parameter(0);
  Shape carried = param->shape();
  std::vector<int64_t> per_layer = scan.stacked;
  per_layer.insert(per_layer.end(), scan.outputs.begin(), scan.outputs.end());
  for (int64_t e : per_layer) carried.mutable_tuple_shapes()[e].mutable_dimensions()[0] = per_run;
  param->set_shape(carried);
  for (Instruction* g : param->users())
    g->set_shape(carried.tuple_shapes(static_cast<int>(g->attrs().tuple_index)));
  for (int64_t e : scan.outputs)
    body->root()->operand(static_cast<int>(e))->set_shape(carried.tuple_shapes(static_cast<int>(e)));
  body->root()->set_shape(carried);
  // A reverse scan's index counts down from the chunk's last layer:
  // (L - 1) - counter becomes (n - 1) - counter, and (L - counter) - 1
  // becomes (n - counter) - 1, for the chunk's n layers.
  if (scan.reversed) {
    Builder b(*copy, *body, loop.loc());
    for (Instruction* g : param->users()) {
      if (g->attrs().tuple_index != scan.counter) continue;
      for (Instruction* u : std::vector<Instruction*>(g->users())) {
        const Instruction* minuend = u->opcode() == Opcode::kSubtract && u->operand(1) == g
                                         ? u->operand(0) : nullptr;
        if (minuend == nullptr || minuend->opcode() != Opcode::kConstant) continue;
        const int64_t from_last = scan.layers - minuend->literal().GetInt(0);  // 1 or 0
        u->ReplaceOperand(0, b.ConstantS32(per_run - from_last));
      }
    }
    body->SortTopologically();
  }
  for (const auto& i : body->instructions()) {
    if (i->opcode() == Opcode::kParameter || i->opcode() == Opcode::kConstant) continue;
    StatusOr<Shape> inferred = InferShape(*i);
    if (inferred.ok() && !inferred->Compatible(i->shape()))
      return ErrorAt(loop, "loop %" + loop.name() + ": the stage body is ill-formed at %" +
                               i->name() + " (" + i->shape().ToString(false) + ", inferred " +
                               inferred->ToString(false) + ")");
  }

  // Annotations inside the body now sit inside the stage region.
  MS_RETURN_IF_ERROR(stage_region::MoveAnnotationsInside(*copy, shardings, loop));

  // Move the copy's computations into the module under fresh names.
  out.carried = carried;
  out.body = stage_region::AdoptComputations(module, *copy, body);
  std::string cond_name = loop.while_condition()->name() + ".stage";
  while (module.FindComputation(cond_name) != nullptr) cond_name += "_";
  auto cond = std::make_unique<Computation>(cond_name);
  Builder b(module, *cond, loop.loc());
  Instruction* p = b.Parameter(0, carried, "stage_layers");
  cond->set_root(b.Compare(b.Element(p, scan.counter), b.ConstantS32(per_run),
                           ComparisonDirection::kLt));
  out.condition = module.AddComputation(std::move(cond));
  return out;
}

}  // namespace meshsplit
