// Layer-loop recognition (layer_loop.h). The patterns are those of a JAX
// scan lowered to HLO: a counter compared LT against a constant trip count,
// incremented by one at the end of the body, stacked operands read with
// dynamic-slice(stack, index, 0, ...) of one layer and stacked results
// written with dynamic-update-slice(ys, y, index, 0, ...), where the layer
// index is the counter or, in a reverse scan, (L - 1) - counter.
#include "pipeline/layer_loop.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace meshsplit {
namespace {

Status NotALayerLoop(const Instruction& loop, const std::string& why) {
  return Status::Error("loop %" + loop.name() + " " + why, loop.loc());
}

std::optional<int64_t> IntConstant(const Instruction* i) {
  if (i->opcode() != Opcode::kConstant || !i->has_literal() || i->shape().rank() != 0)
    return std::nullopt;
  if (!IsInteger(i->shape().element_type())) return std::nullopt;
  return i->literal().GetInt(0);
}

// The tuple index when `i` is get-tuple-element(param), else -1.
int64_t ElementOf(const Instruction* i, const Instruction* param) {
  if (i->opcode() != Opcode::kGetTupleElement || i->operand(0) != param) return -1;
  return i->attrs().tuple_index;
}

bool ZeroOffsets(const Instruction* op, int first, int rank) {
  for (int d = 1; d < rank; ++d) {
    std::optional<int64_t> c = IntConstant(op->operand(first + d));
    if (!c || *c != 0) return false;
  }
  return true;
}

// dynamic-slice(stack, index, 0, ...) of size [1, full...].
bool IsLayerRead(const Instruction* ds, const Instruction* stack,
                 const std::set<const Instruction*>& index) {
  if (ds->opcode() != Opcode::kDynamicSlice || ds->operand(0) != stack) return false;
  const Shape& s = stack->shape();
  if (s.rank() < 1 || ds->operand_count() != s.rank() + 1) return false;
  if (!index.count(ds->operand(1)) || !ZeroOffsets(ds, 1, s.rank())) return false;
  const auto& sizes = ds->attrs().dynamic_slice_sizes;
  if (static_cast<int>(sizes.size()) != s.rank() || sizes[0] != 1) return false;
  for (int d = 1; d < s.rank(); ++d)
    if (sizes[d] != s.dimensions(d)) return false;
  return true;
}

// dynamic-update-slice(ys, y, index, 0, ...) with y of shape [1, full...].
bool IsLayerWrite(const Instruction* dus, const Instruction* ys,
                  const std::set<const Instruction*>& index) {
  if (dus->opcode() != Opcode::kDynamicUpdateSlice || dus->operand(0) != ys) return false;
  const Shape& s = ys->shape();
  if (s.rank() < 1 || dus->operand_count() != s.rank() + 2) return false;
  if (!index.count(dus->operand(2)) || !ZeroOffsets(dus, 2, s.rank())) return false;
  const Shape& u = dus->operand(1)->shape();
  if (u.rank() != s.rank() || u.dimensions(0) != 1) return false;
  for (int d = 1; d < s.rank(); ++d)
    if (u.dimensions(d) != s.dimensions(d)) return false;
  return true;
}

}  // namespace

StatusOr<LayerLoop> AnalyseLayerLoop(Instruction& loop) {
  if (loop.opcode() != Opcode::kWhile) return NotALayerLoop(loop, "is not a while");
  const Shape& tuple = loop.shape();
  if (!tuple.IsTuple()) return NotALayerLoop(loop, "does not carry a tuple");
  Computation* cond = loop.while_condition();
  Computation* body = loop.while_body();
  LayerLoop out;
  out.loop = &loop;

  // The counter and the trip count, from the condition.
  const Instruction* cmp = cond->root();
  const Instruction* cond_param = cond->parameter(0);
  if (cmp->opcode() == Opcode::kCompare && cmp->attrs().comparison_direction &&
      *cmp->attrs().comparison_direction == ComparisonDirection::kLt) {
    out.counter = ElementOf(cmp->operand(0), cond_param);
    std::optional<int64_t> trip = IntConstant(cmp->operand(1));
    if (trip) out.layers = *trip;
  }
  if (out.counter < 0 || out.layers < 1)
    return NotALayerLoop(loop, "is not a scan: its condition is not `counter < constant`");
  const Instruction* init = loop.operand(0);
  if (init->opcode() != Opcode::kTuple)
    return NotALayerLoop(loop, "takes its initial values from something other than a tuple");
  std::optional<int64_t> start = IntConstant(init->operand(static_cast<int>(out.counter)));
  if (!start || *start != 0) return NotALayerLoop(loop, "does not count from 0");

  // Every get-tuple-element of the body's parameter, by index.
  const Instruction* param = body->parameter(0);
  const Instruction* root = body->root();
  if (root->opcode() != Opcode::kTuple || root->operand_count() != tuple.tuple_size())
    return NotALayerLoop(loop, "has a body whose root is not a tuple");
  std::map<int64_t, std::vector<Instruction*>> reads;
  for (Instruction* user : param->users()) {
    int64_t e = ElementOf(user, param);
    if (e < 0) return NotALayerLoop(loop, "uses its whole tuple other than element by element");
    reads[e].push_back(user);
  }
  const std::vector<Instruction*>& counters = reads[out.counter];
  const Instruction* next = root->operand(static_cast<int>(out.counter));
  bool increments = false;
  if (next->opcode() == Opcode::kAdd)
    for (int k = 0; k < 2; ++k) {
      std::optional<int64_t> one = IntConstant(next->operand(1 - k));
      if (one && *one == 1 &&
          std::find(counters.begin(), counters.end(), next->operand(k)) != counters.end())
        increments = true;
    }
  if (!increments) return NotALayerLoop(loop, "does not count by 1");

  // The layer index: the counter, or (L - 1) - counter in a reverse scan,
  // either possibly wrapped in JAX's negative-index normalization
  // select(x < 0, x + L, x) (which never fires here: x is in [0, L)).
  auto is_wrap = [&](const Instruction* u, const Instruction* x) {
    if (u->opcode() != Opcode::kSelect || u->operand(2) != x) return false;
    const Instruction* cmp = u->operand(0);
    const Instruction* plus = u->operand(1);
    std::optional<int64_t> zero, length;
    if (cmp->opcode() == Opcode::kCompare && cmp->operand(0) == x &&
        cmp->attrs().comparison_direction == ComparisonDirection::kLt)
      zero = IntConstant(cmp->operand(1));
    if (plus->opcode() == Opcode::kAdd && plus->operand(0) == x)
      length = IntConstant(plus->operand(1));
    return zero && *zero == 0 && length && *length == out.layers;
  };
  // Users of x that only serve its wraps.
  auto serves_wraps = [&](const Instruction* u, const Instruction* x) {
    if (u->users().empty()) return false;
    for (const Instruction* w : u->users())
      if (!is_wrap(w, x)) return false;
    return true;
  };
  std::set<const Instruction*> index;
  auto add_index = [&](const Instruction* x) {
    bool direct = false;
    for (const Instruction* u : x->users()) {
      if (u == next) continue;
      if (is_wrap(u, x)) {
        index.insert(u);
      } else if (!serves_wraps(u, x)) {
        direct = true;
      }
    }
    if (direct) index.insert(x);
  };
  // (L - counter) - 1, the other spelling of a reverse scan's index (JAX's
  // transposed scan): the users of L - counter that subtract 1.
  auto minus_one = [&](const Instruction* u) {
    std::vector<const Instruction*> out;
    for (const Instruction* w : u->users()) {
      std::optional<int64_t> one;
      if (w->opcode() == Opcode::kSubtract && w->operand(0) == u) one = IntConstant(w->operand(1));
      if (!one || *one != 1) return std::vector<const Instruction*>{};
      out.push_back(w);
    }
    return out;
  };
  for (const Instruction* g : counters) {
    bool forward_use = false;
    for (const Instruction* u : g->users()) {
      if (u == next) continue;
      std::optional<int64_t> minuend;
      if (u->opcode() == Opcode::kSubtract && u->operand(1) == g)
        minuend = IntConstant(u->operand(0));
      std::vector<const Instruction*> reverse_index;
      if (minuend && *minuend == out.layers - 1) reverse_index = {u};
      if (minuend && *minuend == out.layers) reverse_index = minus_one(u);
      if (reverse_index.empty()) {
        forward_use = true;
        continue;
      }
      out.reversed = true;
      for (const Instruction* x : reverse_index) add_index(x);
    }
    if (forward_use) {
      if (out.reversed) return NotALayerLoop(loop, "reads layers both by the counter and in reverse");
      add_index(g);
    }
  }
  for (const Instruction* i : index)
    for (const Instruction* u : i->users()) {
      if (u == next) continue;
      bool indexes = (u->opcode() == Opcode::kDynamicSlice && u->operand(1) == i) ||
                     (u->opcode() == Opcode::kDynamicUpdateSlice && u->operand(2) == i);
      if (!indexes)
        return NotALayerLoop(loop, "uses the layer index %" + i->name() +
                                   " other than to read or write a layer (in %" + u->name() +
                                   "): not pipelined yet");
    }

  for (int64_t e = 0; e < tuple.tuple_size(); ++e) {
    if (e == out.counter) continue;
    const Instruction* result = root->operand(static_cast<int>(e));
    bool passed_through = ElementOf(result, param) == e;
    if (!passed_through) {
      // A stacked result: the element is only written, one layer per step.
      const std::vector<Instruction*>& gs = reads[e];
      if (gs.size() == 1 && gs[0]->users().size() == 1 && IsLayerWrite(result, gs[0], index)) {
        out.outputs.push_back(e);
        continue;
      }
      if (out.activation >= 0)
        return NotALayerLoop(loop, "carries more than one value that changes every layer "
                                   "(elements " + std::to_string(out.activation) + " and " +
                                   std::to_string(e) + "); pipelining carries one activation");
      if (!tuple.tuple_shapes(static_cast<int>(e)).IsArray())
        return NotALayerLoop(loop, "carries a tuple from layer to layer");
      out.activation = e;
      continue;
    }
    bool layer_reads = false, other_reads = false;
    for (Instruction* g : reads[e])
      for (const Instruction* u : g->users()) {
        if (u == root) continue;
        (IsLayerRead(u, g, index) ? layer_reads : other_reads) = true;
      }
    if (layer_reads && other_reads)
      return NotALayerLoop(loop, "reads the stacked element " + std::to_string(e) +
                                 " other than one layer at a time");
    (layer_reads ? out.stacked : out.invariant).push_back(e);
  }
  if (out.activation < 0) return NotALayerLoop(loop, "carries no activation from layer to layer");
  if (out.stacked.empty()) return NotALayerLoop(loop, "reads no stacked per-layer tensor");
  std::vector<int64_t> per_layer = out.stacked;
  per_layer.insert(per_layer.end(), out.outputs.begin(), out.outputs.end());
  for (int64_t e : per_layer)
    if (tuple.tuple_shapes(static_cast<int>(e)).dimensions(0) != out.layers)
      return NotALayerLoop(loop, "stacks element " + std::to_string(e) + " over " +
                                 std::to_string(tuple.tuple_shapes(static_cast<int>(e)).dimensions(0)) +
                                 " layers but runs " + std::to_string(out.layers));
  return out;
}

std::vector<LayerLoop> FindLayerLoops(Computation& comp, std::vector<std::string>* why_not) {
  std::vector<LayerLoop> loops;
  for (Instruction* instr : comp.MakePostOrder()) {
    if (instr->opcode() != Opcode::kWhile) continue;
    StatusOr<LayerLoop> l = AnalyseLayerLoop(*instr);
    if (l.ok()) {
      loops.push_back(*l);
    } else if (why_not != nullptr) {
      why_not->push_back(l.status().message());
    }
  }
  return loops;
}

}  // namespace meshsplit
