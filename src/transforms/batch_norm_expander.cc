// Batch-norm expansion (see batch_norm_expander.h): each batch-norm op
// becomes reduce / broadcast / elementwise instructions computing the same
// formulas, so that sharding propagation and the partitioner handle it with
// their ordinary rules (a batch-sharded input turns the statistics into
// partial sums plus all-reduces).
#include "transforms/batch_norm_expander.h"

#include <map>
#include <memory>

#include "ir/computation.h"

namespace meshsplit {
namespace {

// Appends instructions to one computation, in front of nothing in
// particular: the computation is re-sorted topologically at the end.
class Emitter {
 public:
  Emitter(Module& module, Computation& comp, const Instruction& origin)
      : module_(module), comp_(comp), origin_(origin) {}

  Instruction* Add(Opcode op, Shape shape, std::vector<Instruction*> operands,
                   const std::string& hint) {
    auto instr = std::make_unique<Instruction>(
        op, module_.UniqueInstructionName(origin_.name() + "." + hint), std::move(shape));
    for (Instruction* o : operands) instr->AppendOperand(o);
    instr->set_loc(origin_.loc());
    return comp_.AddInstruction(std::move(instr));
  }
  Instruction* Scalar(PrimitiveType type, double v) {
    Instruction* c = Add(Opcode::kConstant, Shape(type, {}), {}, "constant");
    c->set_literal(Literal::ScalarOfType(type, v));
    return c;
  }
  Instruction* Binary(Opcode op, Instruction* a, Instruction* b) {
    return Add(op, a->shape(), {a, b}, std::string(OpcodeName(op)));
  }
  Instruction* Unary(Opcode op, Instruction* a) {
    return Add(op, a->shape(), {a}, std::string(OpcodeName(op)));
  }
  // [C] (or a scalar) broadcast to `like`'s dims along `feature`.
  Instruction* BroadcastFeature(Instruction* v, const Shape& like, int64_t feature) {
    Instruction* b = Add(Opcode::kBroadcast, Shape(like.element_type(), like.dimensions()), {v},
                         "broadcast");
    if (v->shape().rank() == 1) b->mutable_attrs().dimensions = {feature};
    return b;
  }
  // Sum over every dim except `feature`: a [C] vector.
  Instruction* SumPerFeature(Instruction* x, int64_t feature, Computation* add) {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < x->shape().rank(); ++d)
      if (d != feature) dims.push_back(d);
    Instruction* r = Add(Opcode::kReduce,
                         Shape(x->shape().element_type(), {x->shape().dimensions(feature)}),
                         {x, Scalar(x->shape().element_type(), 0)}, "sum");
    r->mutable_attrs().dimensions = dims;
    r->set_called_computations({add});
    return r;
  }

 private:
  Module& module_;
  Computation& comp_;
  const Instruction& origin_;
};

// The scalar add computation for `type`, created once per module.
Computation* AddReducer(Module& module, PrimitiveType type,
                        std::map<PrimitiveType, Computation*>& cache) {
  auto it = cache.find(type);
  if (it != cache.end()) return it->second;
  std::string name = "batch_norm_add." + std::string(PrimitiveTypeName(type));
  while (module.FindComputation(name)) name += "_";
  auto comp = std::make_unique<Computation>(name);
  Shape scalar(type, {});
  auto param = [&](int64_t i) {
    auto p = std::make_unique<Instruction>(Opcode::kParameter,
                                           module.UniqueInstructionName("lhs_rhs"), scalar);
    p->mutable_attrs().parameter_number = i;
    return comp->AddInstruction(std::move(p));
  };
  Instruction* a = param(0);
  Instruction* b = param(1);
  auto sum = std::make_unique<Instruction>(Opcode::kAdd, module.UniqueInstructionName("add"),
                                           scalar);
  sum->AppendOperand(a);
  sum->AppendOperand(b);
  comp->set_root(comp->AddInstruction(std::move(sum)));
  // Reducers must precede their callers in the module's text.
  Computation* added = module.AddComputation(std::move(comp));
  cache[type] = added;
  return added;
}


// Replaces `bn` by `replacement` (a tuple for the tuple-shaped ops).
void Replace(Computation& comp, Instruction* bn, Instruction* replacement) {
  replacement->set_name(bn->name());  // users and outputs keep their names
  bn->set_name(bn->name() + ".expanded");
  if (bn->has_sharding()) replacement->set_sharding(*bn->sharding());
  bn->ReplaceAllUsesWith(replacement);
  if (comp.root() == bn) comp.set_root(replacement);
  comp.RemoveInstruction(bn);
}

}  // namespace

double ElementsPerFeature(const Shape& s, int64_t feature) {
  double n = 1;
  for (int64_t d = 0; d < s.rank(); ++d)
    if (d != feature) n *= static_cast<double>(s.dimensions(d));
  return n;
}

StatusOr<int64_t> ExpandBatchNorm(Module& module, std::vector<BatchNormDivisor>* divisors) {
  std::map<PrimitiveType, Computation*> reducers;
  int64_t expanded = 0;
  std::vector<Computation*> comps;
  for (const auto& c : module.computations()) comps.push_back(c.get());
  for (Computation* comp : comps) {
    std::vector<Instruction*> targets;
    for (const auto& instr : comp->instructions())
      if (instr->opcode() == Opcode::kBatchNormTraining ||
          instr->opcode() == Opcode::kBatchNormInference ||
          instr->opcode() == Opcode::kBatchNormGrad)
        targets.push_back(instr.get());
    for (Instruction* bn : targets) {
      Emitter e(module, *comp, *bn);
      Instruction* x = bn->operand(0);
      const Shape& xs = x->shape();
      const PrimitiveType type = xs.element_type();
      const int64_t f = bn->attrs().feature_index;
      Computation* add = AddReducer(module, type, reducers);
      Instruction* n = e.Scalar(type, ElementsPerFeature(xs, f));
      if (divisors) divisors->push_back({n, x, f});
      Instruction* eps = e.Scalar(type, bn->attrs().epsilon);
      Shape vec(type, {xs.dimensions(f)});
      auto per_feature_mean = [&](Instruction* v) {
        return e.Binary(Opcode::kDivide, e.SumPerFeature(v, f, add), e.BroadcastFeature(n, vec, 0));
      };
      // rsqrt(var + eps) as a [C] vector.
      auto inv_std = [&](Instruction* var) {
        return e.Unary(Opcode::kRsqrt,
                       e.Binary(Opcode::kAdd, var, e.BroadcastFeature(eps, vec, 0)));
      };
      Instruction* replacement = nullptr;
      switch (bn->opcode()) {
        case Opcode::kBatchNormTraining: {
          // Two passes (mean, then mean of squared deviations): the biased
          // variance, as XLA defines it, without E[x^2]-E[x]^2 cancellation.
          Instruction* mean = per_feature_mean(x);
          Instruction* centered = e.Binary(Opcode::kSubtract, x, e.BroadcastFeature(mean, xs, f));
          Instruction* var = per_feature_mean(e.Binary(Opcode::kMultiply, centered, centered));
          Instruction* scale = e.Binary(Opcode::kMultiply, inv_std(var), bn->operand(1));
          Instruction* y = e.Binary(
              Opcode::kAdd, e.Binary(Opcode::kMultiply, centered, e.BroadcastFeature(scale, xs, f)),
              e.BroadcastFeature(bn->operand(2), xs, f));
          replacement = e.Add(Opcode::kTuple, bn->shape(), {y, mean, var}, "tuple");
          break;
        }
        case Opcode::kBatchNormInference: {
          Instruction* scale = e.Binary(Opcode::kMultiply, inv_std(bn->operand(4)), bn->operand(1));
          Instruction* centered =
              e.Binary(Opcode::kSubtract, x, e.BroadcastFeature(bn->operand(3), xs, f));
          replacement = e.Binary(
              Opcode::kAdd, e.Binary(Opcode::kMultiply, centered, e.BroadcastFeature(scale, xs, f)),
              e.BroadcastFeature(bn->operand(2), xs, f));
          break;
        }
        case Opcode::kBatchNormGrad: {
          // x_hat = (x - mean) * inv_std; grad_offset = sum(dy);
          // grad_scale = sum(dy * x_hat);
          // dx = scale * inv_std * (dy - grad_offset/N - x_hat * grad_scale/N).
          Instruction* dy = bn->operand(4);
          Instruction* istd = inv_std(bn->operand(3));
          Instruction* x_hat = e.Binary(
              Opcode::kMultiply,
              e.Binary(Opcode::kSubtract, x, e.BroadcastFeature(bn->operand(2), xs, f)),
              e.BroadcastFeature(istd, xs, f));
          Instruction* grad_offset = e.SumPerFeature(dy, f, add);
          Instruction* grad_scale = e.SumPerFeature(e.Binary(Opcode::kMultiply, dy, x_hat), f, add);
          Instruction* n_vec = e.BroadcastFeature(n, vec, 0);
          Instruction* mean_dy = e.Binary(Opcode::kDivide, grad_offset, n_vec);
          Instruction* mean_dy_xhat = e.Binary(Opcode::kDivide, grad_scale, n_vec);
          Instruction* inner = e.Binary(
              Opcode::kSubtract,
              e.Binary(Opcode::kSubtract, dy, e.BroadcastFeature(mean_dy, xs, f)),
              e.Binary(Opcode::kMultiply, x_hat, e.BroadcastFeature(mean_dy_xhat, xs, f)));
          Instruction* coeff = e.Binary(Opcode::kMultiply, bn->operand(1), istd);
          Instruction* dx = e.Binary(Opcode::kMultiply, inner, e.BroadcastFeature(coeff, xs, f));
          replacement = e.Add(Opcode::kTuple, bn->shape(), {dx, grad_scale, grad_offset}, "tuple");
          break;
        }
        default:
          break;
      }
      Replace(*comp, bn, replacement);
      ++expanded;
    }
    if (!targets.empty()) comp->SortTopologically();
  }
  // Callees before callers: the new reducers (appended last) move first.
  if (!reducers.empty()) {
    Computation* entry = module.entry();  // released computations lose it
    std::vector<std::unique_ptr<Computation>> owned;
    while (!module.computations().empty())
      owned.push_back(module.ReleaseComputation(module.computations().front().get()));
    for (int pass = 0; pass < 2; ++pass)
      for (auto& c : owned) {
        if (!c) continue;
        bool is_reducer = false;
        for (const auto& [type, r] : reducers) is_reducer |= r == c.get();
        if (is_reducer != (pass == 0)) continue;
        Computation* added = module.AddComputation(std::move(c));
        if (added == entry) module.set_entry(added);
      }
  }
  return expanded;
}

}  // namespace meshsplit
