// Splitting the backward stage loop into B and W (split_backward.h).
//
// In the body, `from_grad` is everything computed from the incoming
// gradient (the carried activation element); `for_b` what the body's
// results other than the per-layer ones read (the gradient passed on, the
// counter), `for_w` what the per-layer results (weight gradients) read.
// W runs the ops only W needs. Such an op may read a value of B computed
// from the gradient (in an MLP layer, the gradient of the pre-activation,
// which both the weight and the input gradient read): B saves it, one row
// per layer, and W reads the row back. Values that do not depend on the
// gradient (the layer's weights and residual slices, what the forward
// recomputes) W computes again.
#include "pipeline/split_backward.h"

#include <algorithm>
#include <map>
#include <set>

#include "pipeline/builder.h"
#include "pipeline/region.h"
#include "support/small_helpers.h"

namespace meshsplit {
namespace {

using stage_region::ErrorAt;

// Everything the root operands `elements` read, transitively.
std::set<const Instruction*> Feeding(const Instruction& root,
                                     const std::vector<int64_t>& elements) {
  std::vector<const Instruction*> from;
  for (int64_t e : elements) from.push_back(root.operand(static_cast<int>(e)));
  return stage_region::Ancestors(from);
}

// A loop body over `carried`: a copy of `body`'s instructions that `keep`
// names, with the parameter's elements read from the new parameter and
// each value of `read_from_stack` read instead from the row of its stack
// (that tuple element) at the counter. Returns the new computation (not
// yet in the module) and the copies by original.
struct CopiedBody {
  std::unique_ptr<Computation> comp;
  std::map<const Instruction*, Instruction*> copy;
  Instruction* param = nullptr;
  Instruction* counter = nullptr;
};

CopiedBody CopyBody(Module& module, const Computation& body, const LayerLoop& scan,
                    const Shape& carried, const std::string& name,
                    const std::set<const Instruction*>& keep,
                    const std::map<const Instruction*, int64_t>& read_from_stack) {
  CopiedBody out;
  out.comp = std::make_unique<Computation>(module.UniqueInstructionName(name));
  Builder b(module, *out.comp, body.loc());
  const Instruction* param = body.parameter(0);
  out.param = b.Parameter(0, carried, param->name());
  if (param->has_sharding()) out.param->set_sharding(*param->sharding());
  out.counter = b.Element(out.param, scan.counter);
  for (Instruction* i : body.MakePostOrder()) {
    if (i == param || !keep.count(i)) continue;
    auto stack = read_from_stack.find(i);
    if (stack != read_from_stack.end()) {
      Instruction* rows = b.Element(out.param, stack->second);
      out.copy[i] = b.Reshape(b.SliceRow(rows, out.counter), i->shape().dimensions());
      continue;
    }
    std::vector<Instruction*> operands;
    for (Instruction* o : i->operands())
      operands.push_back(o == param ? out.param : out.copy.at(o));
    out.copy[i] = out.comp->AddInstruction(
        stage_region::CopyInstruction(*i, module.UniqueInstructionName(i->name()), operands));
  }
  return out;
}

std::unique_ptr<Computation> Condition(Module& module, const Computation& cond,
                                       const LayerLoop& scan, const Shape& carried,
                                       int64_t chunk_layers) {
  auto c = std::make_unique<Computation>(module.UniqueInstructionName(cond.name()));
  Builder b(module, *c, cond.loc());
  Instruction* p = b.Parameter(0, carried, "stage_layers");
  c->set_root(b.Compare(b.Element(p, scan.counter), b.ConstantS32(chunk_layers),
                        ComparisonDirection::kLt));
  return c;
}

}  // namespace

StatusOr<SplitBackwardLoop> SplitBackward(Module& module, const LayerLoop& scan,
                                          const StageLoop& sl, int64_t chunk_layers) {
  const Computation& body = *sl.body;
  const Instruction& root = *body.root();
  const Instruction& loop = *scan.loop;
  const Instruction* param = body.parameter(0);
  const int64_t n_elements = sl.carried.tuple_size();
  if (root.opcode() != Opcode::kTuple || root.operand_count() != n_elements)
    return ErrorAt(loop, "zb-h1: the body of loop %" + loop.name() + " does not end in a tuple");

  // An element read from a tuple the body builds (what an inlined call
  // leaves) is read from the tuple's operand instead, so that B saves
  // arrays, never a tuple of which W reads a part. (The loop is consumed:
  // the caller replaces it by the two loops.)
  for (Instruction* i : sl.body->MakePostOrder())
    if (i->opcode() == Opcode::kGetTupleElement && i->operand(0)->opcode() == Opcode::kTuple &&
        i != sl.body->root())
      i->ReplaceAllUsesWith(i->operand(0)->operand(static_cast<int>(i->attrs().tuple_index)));
  std::vector<Instruction*> order = body.MakePostOrder();
  auto reads_gradient = [&](const Instruction* i) {
    return i->opcode() == Opcode::kGetTupleElement && i->operand(0) == param &&
           i->attrs().tuple_index == scan.activation;
  };
  std::set<const Instruction*> from_grad;
  for (const Instruction* i : order) {
    bool dep = reads_gradient(i);
    for (const Instruction* o : i->operands()) dep = dep || from_grad.count(o) > 0;
    if (dep) from_grad.insert(i);
  }
  std::vector<int64_t> b_results, w_results;
  for (int64_t e = 0; e < n_elements; ++e)
    (Contains(scan.outputs, e) ? w_results : b_results).push_back(e);
  const std::set<const Instruction*> for_b = Feeding(root, b_results);
  const std::set<const Instruction*> for_w = Feeding(root, w_results);
  if (from_grad.count(root.operand(static_cast<int>(scan.counter))))
    return ErrorAt(loop, "zb-h1: loop %" + loop.name() + " counts its layers from the gradient");

  // What B saves for W: values from the gradient that W-only ops read.
  std::vector<const Instruction*> saved;
  for (const Instruction* i : order) {
    if (!from_grad.count(i) || !(for_b.count(i) || reads_gradient(i))) continue;
    const bool read_by_w =
        std::any_of(i->users().begin(), i->users().end(),
                    [&](const Instruction* u) { return for_w.count(u) && !for_b.count(u); });
    if (!read_by_w) continue;
    if (!i->shape().IsArray())
      return ErrorAt(loop, "zb-h1: the weight gradients of loop %" + loop.name() + " read %" +
                               i->name() + " (" + i->shape().ToString(false) +
                               ") from the input gradient's work: only arrays can be kept for W");
    saved.push_back(i);
  }

  SplitBackwardLoop out;
  Shape carried = sl.carried;
  std::map<const Instruction*, int64_t> stack_of;
  const Shape& activation = sl.carried.tuple_shapes(static_cast<int>(scan.activation));
  for (const Instruction* v : saved) {
    std::vector<int64_t> dims = v->shape().dimensions();
    dims.insert(dims.begin(), chunk_layers);
    stack_of[v] = carried.tuple_size();
    out.saved.push_back(carried.tuple_size());
    out.activation_shaped.push_back(v->shape().dimensions() == activation.dimensions());
    carried.mutable_tuple_shapes().push_back(Shape(v->shape().element_type(), dims));
  }

  // B: what the gradient passed on needs, and the saved values, written
  // into their stacks at the counter's row; the per-layer results pass
  // through.
  // (A saved value outside for_b is the gradient element itself.)
  std::set<const Instruction*> keep_b = for_b;
  keep_b.insert(saved.begin(), saved.end());
  CopiedBody bb = CopyBody(module, body, scan, carried, body.name() + ".input_grad", keep_b, {});
  {
    Builder b(module, *bb.comp, body.loc());
    std::vector<Instruction*> results;
    for (int64_t e = 0; e < n_elements; ++e)
      results.push_back(Contains(scan.outputs, e)
                            ? b.Element(bb.param, e)
                            : bb.copy.at(root.operand(static_cast<int>(e))));
    for (const Instruction* v : saved) {
      Instruction* rows = b.Element(bb.param, stack_of.at(v));
      std::vector<int64_t> one = v->shape().dimensions();
      one.insert(one.begin(), 1);
      results.push_back(b.UpdateRow(rows, b.Reshape(bb.copy.at(v), one), bb.counter));
    }
    Instruction* tuple = b.Tuple(results);
    if (root.has_sharding()) tuple->set_sharding(*root.sharding());
    bb.comp->set_root(tuple);
  }

  // W: what the per-layer results need, the saved values read back from
  // their stacks; the counter counts, everything else passes through.
  std::vector<const Instruction*> w_roots;
  for (int64_t e : w_results) w_roots.push_back(root.operand(static_cast<int>(e)));
  w_roots.push_back(root.operand(static_cast<int>(scan.counter)));
  std::set<const Instruction*> saved_set(saved.begin(), saved.end());
  const std::set<const Instruction*> keep_w = stage_region::Ancestors(w_roots, saved_set);
  for (const Instruction* i : keep_w)
    if (from_grad.count(i) && !stack_of.count(i) && reads_gradient(i))
      return ErrorAt(loop, "zb-h1: the weight gradients of loop %" + loop.name() +
                               " read the incoming gradient in a way B does not save");
  CopiedBody wb =
      CopyBody(module, body, scan, carried, body.name() + ".weight_grad", keep_w, stack_of);
  {
    Builder b(module, *wb.comp, body.loc());
    std::vector<Instruction*> results;
    for (int64_t e = 0; e < carried.tuple_size(); ++e) {
      const bool computed = e < n_elements && (Contains(scan.outputs, e) || e == scan.counter);
      results.push_back(computed ? wb.copy.at(root.operand(static_cast<int>(e)))
                                 : b.Element(wb.param, e));
    }
    Instruction* tuple = b.Tuple(results);
    if (root.has_sharding()) tuple->set_sharding(*root.sharding());
    wb.comp->set_root(tuple);
  }

  for (auto [from, into] : {std::make_pair(&bb, &out.input_gradient),
                            std::make_pair(&wb, &out.weight_gradient)}) {
    from->comp->SortTopologically();
    into->carried = carried;
    into->output_batch_dims = sl.output_batch_dims;
    into->invariant_batch_dims = sl.invariant_batch_dims;
    into->condition = module.AddComputation(
        Condition(module, *sl.condition, scan, carried, chunk_layers));
    into->body = module.AddComputation(std::move(from->comp));
  }
  return out;
}

}  // namespace meshsplit
