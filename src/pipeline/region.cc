// The shared pieces of the pipeline schedules (region.h).
#include "pipeline/region.h"

#include <algorithm>
#include <map>

#include "sharding/sharding_util.h"

namespace meshsplit::stage_region {

std::unique_ptr<Instruction> CopyInstruction(const Instruction& i, const std::string& name,
                                             const std::vector<Instruction*>& operands) {
  auto c = std::make_unique<Instruction>(i.opcode(), name, i.shape());
  c->mutable_attrs() = i.attrs();
  if (i.has_literal()) c->set_literal(i.literal());
  c->set_called_computations(i.called_computations());
  c->set_loc(i.loc());
  if (i.has_sharding()) c->set_sharding(*i.sharding());
  for (Instruction* o : operands) c->AppendOperand(o);
  return c;
}

std::string Plural(int64_t n, const std::string& word) {
  const bool sibilant = !word.empty() && (word.back() == 'h' || word.back() == 's');
  return std::to_string(n) + " " + word + (n == 1 ? "" : sibilant ? "es" : "s");
}

int64_t NextChannelId(const Module& module) {
  int64_t next = 1;
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions())
      if (i->attrs().channel_id) next = std::max(next, *i->attrs().channel_id + 1);
  return next;
}

MicrobatchLayout LayoutFor(const Shape& act, int64_t bd, int64_t m) {
  MicrobatchLayout l;
  l.microbatch = act.dimensions();
  l.microbatch[bd] /= m;
  l.split = l.microbatch;
  l.split.insert(l.split.begin() + bd + 1, m);
  l.to_front.push_back(bd + 1);
  for (int64_t d = 0; d < static_cast<int64_t>(l.split.size()); ++d)
    if (d != bd + 1) l.to_front.push_back(d);
  l.from_front.assign(l.to_front.size(), 0);
  for (size_t k = 0; k < l.to_front.size(); ++k) l.from_front[l.to_front[k]] = static_cast<int64_t>(k);
  l.stacked = l.microbatch;
  l.stacked.insert(l.stacked.begin(), m);
  return l;
}

std::vector<std::pair<Instruction*, Sharding>> StackedParameterChain(Instruction* v, Sharding s) {
  std::vector<std::pair<Instruction*, Sharding>> chain;
  for (;;) {
    chain.emplace_back(v, s);
    switch (v->opcode()) {
      case Opcode::kParameter:
        return chain;
      case Opcode::kTranspose: {
        const std::vector<int64_t>& perm = v->attrs().dimensions;
        std::vector<int64_t> inverse(perm.size());
        for (size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = static_cast<int64_t>(k);
        s = sharding_util::TransposeSharding(s, inverse);
        break;
      }
      case Opcode::kBitcast:
        if (v->operand(0)->shape().dimensions() != v->shape().dimensions()) return {};
        break;
      case Opcode::kCopy: case Opcode::kConvert:
        break;
      default:
        return {};
    }
    v = v->operand(0);
  }
}

StatusOr<Instruction*> EnterMicrobatched(Builder& eb, const StageShardings& sh, Instruction* v,
                                         int64_t batch_dim, const Sharding* base,
                                         int64_t microbatches, const Instruction& loop) {
  const Shape& shape = v->shape();
  if (shape.dimensions(static_cast<int>(batch_dim)) % microbatches != 0)
    return Status::Error(Plural(microbatches, "microbatch") + " do not divide dim " +
                             std::to_string(batch_dim) + " of %" + v->name() + " (" +
                             shape.ToString(false) + "), which loop %" + loop.name() +
                             " reads in every layer",
                         loop.loc());
  MS_ASSIGN_OR_RETURN(Sharding full, sh.Full(base, shape.rank()));
  MS_ASSIGN_OR_RETURN(Sharding whole, sh.Manual(base, shape.rank(), 0));
  MS_ASSIGN_OR_RETURN(Sharding split, sh.Manual(base, shape.rank(), 1));
  const MicrobatchLayout l = LayoutFor(shape, batch_dim, microbatches);
  Instruction* local = eb.CustomCall(
      kFullToShard, eb.CustomCall(kShardingTarget, v, shape, full), shape, whole);
  Instruction* split_value = eb.Transpose(eb.Reshape(local, l.split), l.to_front);
  split_value->set_sharding(split);
  return split_value;
}

Instruction* FromOneStage(Builder& eb, Instruction* outs, int64_t stage, int64_t stages,
                          const Shape& whole, int64_t bd, const Sharding& man2,
                          const Sharding& stage_tiled2) {
  const int64_t micro = outs->shape().dimensions(0);
  const MicrobatchLayout lay = LayoutFor(whole, bd, micro);
  const PrimitiveType type = whole.element_type();
  std::vector<int64_t> with_stage = lay.stacked;
  with_stage.insert(with_stage.begin(), 1);
  Instruction* per_stage = eb.Reshape(outs, with_stage);
  per_stage->set_sharding(man2);
  with_stage[0] = stages;
  Instruction* gathered = eb.CustomCall(
      kShardToFull, eb.CustomCall(kShardingTarget, per_stage, per_stage->shape(), man2),
      Shape(type, with_stage), stage_tiled2);
  std::vector<int64_t> one_dims = with_stage;
  one_dims[0] = 1;
  Instruction* one = eb.Add(Opcode::kSlice, Shape(type, one_dims), {gathered}, "slice");
  for (int64_t d = 0; d < static_cast<int64_t>(with_stage.size()); ++d)
    one->mutable_attrs().slice.push_back(
        SliceDimension{d == 0 ? stage : 0, d == 0 ? stage + 1 : with_stage[d], 1});
  return eb.Reshape(eb.Transpose(eb.Reshape(one, lay.stacked), lay.from_front),
                    whole.dimensions());
}

void Reachable(Computation* root, std::set<Computation*>& out) {
  if (!out.insert(root).second) return;
  for (const auto& i : root->instructions())
    for (Computation* c : i->called_computations()) Reachable(c, out);
}

std::set<const Instruction*> Ancestors(const std::vector<const Instruction*>& from,
                                       const std::set<const Instruction*>& stop) {
  std::set<const Instruction*> seen;
  std::vector<const Instruction*> todo = from;
  while (!todo.empty()) {
    const Instruction* i = todo.back();
    todo.pop_back();
    if (!seen.insert(i).second || stop.count(i)) continue;
    for (const Instruction* o : i->operands()) todo.push_back(o);
  }
  return seen;
}

void InlineCalls(Module& module, Computation& comp) {
  for (;;) {
    Instruction* call = nullptr;
    for (const auto& i : comp.instructions())
      if (i->opcode() == Opcode::kCall && i->to_apply() != nullptr) {
        call = i.get();
        break;
      }
    if (call == nullptr) return;
    const Computation* callee = call->to_apply();
    std::map<const Instruction*, Instruction*> copied;
    for (Instruction* i : callee->MakePostOrder()) {
      if (i->opcode() == Opcode::kParameter) {
        copied[i] = call->operand(static_cast<int>(i->attrs().parameter_number));
        continue;
      }
      std::vector<Instruction*> operands;
      for (Instruction* o : i->operands()) operands.push_back(copied.at(o));
      copied[i] = comp.AddInstruction(
          CopyInstruction(*i, module.UniqueInstructionName(i->name()), operands));
    }
    Instruction* result = copied.at(callee->root());
    call->ReplaceAllUsesWith(result);
    if (comp.root() == call) comp.set_root(result);
    comp.RemoveInstruction(call);
    comp.SortTopologically();
  }
}

void InlineCallsIn(Module& module, const std::set<Computation*>& comps) {
  std::vector<Computation*> in_order;
  for (const auto& c : module.computations())
    if (comps.count(c.get())) in_order.push_back(c.get());
  for (Computation* c : in_order) InlineCalls(module, *c);
}

Computation* AdoptComputations(Module& into, Module& from, const Computation* of) {
  Computation* adopted = nullptr;
  for (Computation* c : from.MakeComputationPostOrder()) {
    std::unique_ptr<Computation> owned = from.ReleaseComputation(c);
    std::string name = c->name() + ".stage";
    while (into.FindComputation(name) != nullptr) name += "_";
    owned->set_name(name);
    for (const auto& i : owned->instructions())
      i->set_name(into.UniqueInstructionName(i->name()));
    Computation* added = into.AddComputation(std::move(owned));
    if (c == of) adopted = added;
  }
  return adopted;
}

Status MoveAnnotationsInside(Module& module, const StageShardings& sh, const Instruction& loop) {
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions()) {
      if (!i->has_sharding() || i->sharding()->IsManual() || i->sharding()->HasManualSubgroup())
        continue;
      const Sharding given = *i->sharding();
      StatusOr<Sharding> inside =
          sh.Manual(&given, i->shape().IsArray() ? i->shape().rank() : 0, 0);
      if (!inside.ok())
        return Status::Error("loop %" + loop.name() + ": the annotation of %" + i->name() +
                                 " cannot move inside the stages: " + inside.status().message(),
                             loop.loc());
      i->set_sharding(*inside);
    }
  return Status::Ok();
}

}  // namespace meshsplit::stage_region
