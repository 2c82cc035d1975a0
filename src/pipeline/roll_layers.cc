// roll-layers (roll_layers.h). Three steps, all reading the entry before
// anything changes:
//  1. the layers' weights, from the parameter names (one decimal index that
//     runs 0..L-1 over names otherwise equal);
//  2. the boundary between layers: for l >= 1, the one value of layer l-1
//     that everything from layer l on reads (the carried activation);
//  3. a structural match of layer 0 onto every layer l, starting at the
//     weights and following users, which also finds layer 0's input.
// Then layer 0 becomes the body of a `while` over the stacked weights and
// the L copies of it are deleted.
#include "pipeline/roll_layers.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <set>

#include "pipeline/builder.h"
#include "text/printer.h"

namespace meshsplit {
namespace {

constexpr int kNoLayer = -1;

// ---- 1. The weights -------------------------------------------------------

struct LayerWeights {
  std::string pattern;  // "h.{}.*"
  std::vector<std::string> names;  // per weight, "h.{}.ln_1.weight"
  std::vector<std::vector<Instruction*>> of_layer;  // [layer][weight]
  int64_t layers() const { return static_cast<int64_t>(of_layer.size()); }
};

// Every way to read `name` as a template with one decimal index: for
// "h.0.ln_1.weight", ("h.{}.ln_1.weight", 0) and ("h.0.ln_{}.weight", 1).
std::vector<std::pair<std::string, int64_t>> IndexReadings(const std::string& name) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t i = 0; i < name.size();) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    // "01" is not an index (it would not be written that way for layer 1).
    if (end - i <= 9 && (name[i] != '0' || end - i == 1))
      out.push_back({name.substr(0, i) + "{}" + name.substr(end), std::stoll(name.substr(i, end - i))});
    i = end;
  }
  return out;
}

// The family of templates sharing the text before the index ("h.") whose
// indices are exactly 0..L-1 for every template, covering the most
// parameters; nullopt when none has L >= 2.
std::optional<LayerWeights> FindLayerWeights(const Computation& entry) {
  // template -> index -> parameter
  std::map<std::string, std::map<int64_t, Instruction*>> by_template;
  for (Instruction* p : entry.parameters())
    if (p->shape().IsArray())
      for (auto& [tmpl, index] : IndexReadings(p->name())) by_template[tmpl][index] = p;
  // prefix (text before "{}") -> templates
  std::map<std::string, std::vector<std::string>> families;
  for (auto& [tmpl, members] : by_template) {
    int64_t expect = 0;
    bool dense = members.size() >= 2;
    for (auto& [index, p] : members) dense = dense && index == expect++;
    if (dense) families[tmpl.substr(0, tmpl.find("{}"))].push_back(tmpl);
  }
  std::optional<LayerWeights> best;
  size_t best_count = 0;
  for (auto& [prefix, templates] : families) {
    // Keep the templates with the family's most common layer count.
    std::map<size_t, std::vector<std::string>> by_count;
    for (const std::string& t : templates) by_count[by_template[t].size()].push_back(t);
    for (auto& [count, ts] : by_count) {
      if (count * ts.size() <= best_count) continue;
      LayerWeights w;
      w.pattern = prefix + "{}.*";
      w.names = ts;
      w.of_layer.assign(count, {});
      for (const std::string& t : ts)
        for (auto& [index, p] : by_template[t]) w.of_layer[index].push_back(p);
      best_count = count * ts.size();
      best = std::move(w);
    }
  }
  return best;
}

// ---- Structure ------------------------------------------------------------

// What must be equal for two instructions to be the same op: opcode, shape,
// attributes (printed without metadata, which holds per-layer op names),
// called computations and literal; not the name or the operands.
std::string Signature(const Instruction& i) {
  PrintOptions options;
  options.print_metadata = false;
  std::string text = PrintInstruction(i, options);
  const std::string call = " " + std::string(OpcodeName(i.opcode())) + "(";
  size_t open = text.find(call, text.find(" = "));
  std::string attrs;
  if (open != std::string::npos) {
    int depth = 0;
    size_t k = open + call.size() - 1;
    for (; k < text.size(); ++k) {
      if (text[k] == '(') ++depth;
      if (text[k] == ')' && --depth == 0) break;
    }
    // A constant's literal sits inside the parentheses; keep it.
    attrs = i.opcode() == Opcode::kConstant ? text.substr(open) : text.substr(k + 1);
  }
  return i.shape().ToString() + " " + std::string(OpcodeName(i.opcode())) + "/" +
         std::to_string(i.operand_count()) + attrs;
}

// Computed from constants alone (a value every layer can rebuild).
bool IsConstantExpression(const Instruction* i, std::map<const Instruction*, bool>& memo) {
  auto it = memo.find(i);
  if (it != memo.end()) return it->second;
  bool constant = i->opcode() == Opcode::kConstant || i->opcode() == Opcode::kIota ||
                  i->opcode() == Opcode::kBroadcast || i->opcode() == Opcode::kReshape ||
                  i->opcode() == Opcode::kConvert;
  for (const Instruction* o : i->operands())
    constant = constant && IsConstantExpression(o, memo);
  if (i->opcode() != Opcode::kConstant && i->opcode() != Opcode::kIota && i->operands().empty())
    constant = false;
  memo[i] = constant;
  return constant;
}

bool SameConstant(const Instruction* x, const Instruction* y) {
  if (x == y) return true;
  if (Signature(*x) != Signature(*y)) return false;
  for (int k = 0; k < x->operand_count(); ++k)
    if (!SameConstant(x->operand(k), y->operand(k))) return false;
  return true;
}

// A computation name not used yet in `module`.
std::string FreshComputationName(const Module& module, std::string name) {
  while (module.FindComputation(name) != nullptr) name += "_";
  return name;
}

// ---- 2 and 3. Boundaries and the match -----------------------------------

class LayerRoller {
 public:
  LayerRoller(Module& module, LayerWeights weights)
      : module_(module), entry_(*module.entry()), w_(std::move(weights)) {}

  Status Analyse();
  RollLayersReport Rewrite();

 private:
  int64_t L() const { return w_.layers(); }
  Status Differs(int64_t l, const Instruction& at, const std::string& why) const {
    return Status::Error("cannot roll the layers " + w_.pattern + ": layer " + std::to_string(l) +
                             " differs from layer 0 at %" + at.name() + ": " + why,
                         at.loc());
  }
  void ComputeLayerRanges();
  StatusOr<Instruction*> FindBoundary(int64_t l) const;
  Status MatchLayer(int64_t l);
  bool Infer(Instruction* x, Instruction* y, int64_t l, std::map<Instruction*, Instruction*>& trial,
             Instruction*& input) const;

  Module& module_;
  Computation& entry_;
  LayerWeights w_;
  mutable std::map<const Instruction*, bool> constant_memo_;
  std::vector<Instruction*> order_;  // the entry in post order
  std::map<const Instruction*, int> weight_layer_;
  // The latest layer whose weights an instruction reads (kNoLayer: none),
  // and the earliest layer whose weights something downstream of it reads.
  std::map<const Instruction*, int> latest_, earliest_after_;
  std::vector<Instruction*> boundary_;  // boundary_[l]: layer l's input (l >= 1)
  // match_[l]: layer 0's instructions -> layer l's.
  std::vector<std::map<Instruction*, Instruction*>> match_;
  Instruction* input_ = nullptr;   // layer 0's input (the activation it receives)
  Instruction* output_ = nullptr;  // the last layer's output
  std::vector<Instruction*> body_;  // layer 0's instructions, in post order
};

void LayerRoller::ComputeLayerRanges() {
  order_ = entry_.MakePostOrder();
  for (int64_t l = 0; l < L(); ++l)
    for (Instruction* w : w_.of_layer[l]) weight_layer_[w] = static_cast<int>(l);
  for (Instruction* i : order_) {
    int latest = weight_layer_.count(i) ? weight_layer_[i] : kNoLayer;
    for (Instruction* o : i->operands()) latest = std::max(latest, latest_[o]);
    latest_[i] = latest;
  }
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    int earliest = INT_MAX;
    for (Instruction* u : (*it)->users()) {
      earliest = std::min(earliest, earliest_after_[u]);
      for (Instruction* o : u->operands())
        if (weight_layer_.count(o)) earliest = std::min(earliest, weight_layer_[o]);
    }
    earliest_after_[*it] = earliest;
  }
}

// Layer l's input: a value computed by layer l-1 (it reads weights of
// layer l-1 at the latest, and nothing after it reads weights before l)
// such that everything downstream of it or reading later weights reads
// nothing else of the earlier layers. The last such value in program
// order: an earlier one can pass for a cut only because the residual path
// around it starts from a value that reads no weights (layer 0's input).
StatusOr<Instruction*> LayerRoller::FindBoundary(int64_t l) const {
  Instruction* found = nullptr;
  for (Instruction* x : order_) {
    int latest = latest_.at(x);
    if (latest < 0 || latest > l - 1 || earliest_after_.at(x) < l) continue;
    std::set<const Instruction*> after;  // downstream of x, or reading layers >= l
    for (Instruction* i : order_) {
      bool downstream = latest_.at(i) >= l;
      for (Instruction* o : i->operands()) downstream = downstream || o == x || after.count(o);
      if (downstream && i != x) after.insert(i);
    }
    bool cut = true;
    for (const Instruction* i : after)
      for (const Instruction* o : i->operands())
        if (o != x && !after.count(o) && latest_.at(o) != kNoLayer) cut = false;
    if (cut) found = x;
  }
  if (found != nullptr) return found;
  return Status::Error("cannot roll the layers " + w_.pattern + ": no single value carries layer " +
                           std::to_string(l - 1) + "'s result into layer " + std::to_string(l) +
                           " (more than one value crosses between them)",
                       w_.of_layer[l][0]->loc());
}

// Whether y can be layer l's twin of layer 0's x, extending `trial`;
// reaching layer l's input identifies layer 0's (`input`).
bool LayerRoller::Infer(Instruction* x, Instruction* y, int64_t l,
                        std::map<Instruction*, Instruction*>& trial, Instruction*& input) const {
  if (x == y) return latest_.at(x) == kNoLayer && x != input;  // shared by every layer
  auto known = match_[l].find(x);
  if (known != match_[l].end()) return known->second == y;
  auto tried = trial.find(x);
  if (tried != trial.end()) return tried->second == y;
  // Constants computed apart but equal are one value (nothing to map).
  if (IsConstantExpression(x, constant_memo_) && IsConstantExpression(y, constant_memo_))
    return SameConstant(x, y);
  if (y == boundary_[l]) {
    if (input != nullptr && input != x) return false;
    input = x;
    trial[x] = y;
    return true;
  }
  if (latest_.at(x) != kNoLayer || x->opcode() == Opcode::kParameter ||
      y->opcode() == Opcode::kParameter || Signature(*x) != Signature(*y))
    return false;
  trial[x] = y;
  for (int k = 0; k < x->operand_count(); ++k)
    if (!Infer(x->operand(k), y->operand(k), l, trial, input)) return false;
  return true;
}

Status LayerRoller::MatchLayer(int64_t l) {
  std::map<Instruction*, Instruction*>& f = match_[l];
  for (size_t k = 0; k < w_.names.size(); ++k) {
    Instruction* a = w_.of_layer[0][k];
    Instruction* b = w_.of_layer[l][k];
    if (a->shape() != b->shape())
      return Differs(l, *b, "weight " + w_.names[k] + " has shape " + b->shape().ToString() +
                                " vs " + a->shape().ToString());
    f[a] = b;
  }
  Instruction* input = input_;
  for (Instruction* u : order_) {
    if (latest_.at(u) != 0 || weight_layer_.count(u)) continue;
    int anchor = -1;
    for (int k = 0; k < u->operand_count() && anchor < 0; ++k)
      if (latest_.at(u->operand(k)) == 0) anchor = k;
    Instruction* twin_operand = f.at(u->operand(anchor));
    std::string why;
    std::map<Instruction*, Instruction*> chosen;
    Instruction* twin = nullptr;
    for (Instruction* v : twin_operand->users()) {
      if (v->operand_count() <= anchor || v->operand(anchor) != twin_operand) continue;
      if (v->opcode() != u->opcode()) continue;
      if (v->shape() != u->shape()) {
        why = "shape " + v->shape().ToString() + " vs " + u->shape().ToString() + " (%" +
              v->name() + ")";
        continue;
      }
      if (Signature(*u) != Signature(*v)) {
        why = "its attributes differ from %" + v->name() + "'s";
        continue;
      }
      std::map<Instruction*, Instruction*> trial;
      Instruction* trial_input = input;
      bool same = true;
      for (int k = 0; k < u->operand_count() && same; ++k)
        same = Infer(u->operand(k), v->operand(k), l, trial, trial_input);
      if (!same) {
        why = "its operands do not correspond to those of %" + v->name();
        continue;
      }
      twin = v;
      chosen = std::move(trial);
      input = trial_input;
      break;
    }
    if (twin == nullptr) {
      if (why.empty())
        why = "no " + std::string(OpcodeName(u->opcode())) + " in layer " + std::to_string(l) +
              " reads %" + twin_operand->name() + " as %" + u->name() + " reads %" +
              u->operand(anchor)->name();
      return Differs(l, *u, why);
    }
    chosen[u] = twin;
    f.insert(chosen.begin(), chosen.end());
  }
  if (input == nullptr)
    return Status::Error("cannot roll the layers " + w_.pattern + ": layer 0 reads no activation " +
                             "that layer " + std::to_string(l) + "'s input %" +
                             boundary_[l]->name() + " corresponds to",
                         boundary_[l]->loc());
  input_ = input;
  return Status::Ok();
}

Status LayerRoller::Analyse() {
  ComputeLayerRanges();
  boundary_.assign(L(), nullptr);
  for (int64_t l = 1; l < L(); ++l) {
    MS_ASSIGN_OR_RETURN(boundary_[l], FindBoundary(l));
  }
  match_.assign(L(), {});
  for (int64_t l = 1; l < L(); ++l) MS_RETURN_IF_ERROR(MatchLayer(l));

  // Layer 0: what the matches cover (the same set for every l, checked
  // below), less its input and the weights.
  for (Instruction* i : order_)
    if (match_[1].count(i) && i != input_ && !weight_layer_.count(i)) body_.push_back(i);
  Instruction* first_output = boundary_[1];
  if (!match_[1].count(first_output))
    return Status::Error("cannot roll the layers " + w_.pattern + ": layer 1's input %" +
                             first_output->name() + " is not computed by layer 0",
                         first_output->loc());
  if (input_->shape() != first_output->shape())
    return Status::Error("cannot roll the layers " + w_.pattern + ": layer 0 takes %" +
                             input_->name() + " " + input_->shape().ToString() + " but gives %" +
                             first_output->name() + " " + first_output->shape().ToString(),
                         first_output->loc());
  std::set<const Instruction*> body(body_.begin(), body_.end());
  std::set<const Instruction*> claimed(body);
  for (int64_t l = 1; l < L(); ++l) {
    std::map<Instruction*, Instruction*>& f = match_[l];
    if (f.at(input_) != boundary_[l])
      return Differs(l, *input_, "its input is not layer " + std::to_string(l - 1) + "'s output");
    for (Instruction* x : body_) {
      auto it = f.find(x);
      if (it == f.end()) return Differs(l, *x, "it has no counterpart");
      if (!claimed.insert(it->second).second)
        return Differs(l, *x, "its counterpart %" + it->second->name() + " belongs to another layer");
    }
    if (l + 1 < L() && f.at(first_output) != boundary_[l + 1])
      return Differs(l, *first_output, "layer " + std::to_string(l + 1) + "'s input is %" +
                                           boundary_[l + 1]->name() + ", not its counterpart %" +
                                           f.at(first_output)->name());
  }
  output_ = match_[L() - 1].at(first_output);
  // Only a layer's output may leave it; everything else stays inside.
  for (int64_t l = 0; l < L(); ++l) {
    std::set<const Instruction*> image;
    for (Instruction* x : body_) image.insert(l == 0 ? x : match_[l].at(x));
    for (Instruction* x : body_) {
      if (x == first_output) continue;
      Instruction* y = l == 0 ? x : match_[l].at(x);
      for (Instruction* u : y->users())
        if (!image.count(u))
          return Status::Error("cannot roll the layers " + w_.pattern + ": layer " +
                                   std::to_string(l) + "'s %" + y->name() +
                                   " is read outside the layer by %" + u->name() +
                                   " (only a layer's output may leave it)",
                               u->loc());
    }
    for (Instruction* w : w_.of_layer[l])
      for (Instruction* u : w->users())
        if (!image.count(u))
          return Status::Error("cannot roll the layers " + w_.pattern + ": layer " +
                                   std::to_string(l) + "'s weight %" + w->name() +
                                   " is read outside the layer by %" + u->name(),
                               u->loc());
  }
  return Status::Ok();
}

RollLayersReport LayerRoller::Rewrite() {
  const SourceLoc loc = input_->loc();
  Builder eb(module_, entry_, loc);
  const size_t n_weights = w_.names.size();

  // Stacked weights: [1, ...] reshapes of each layer's weight, concatenated.
  std::vector<Instruction*> stacks;
  for (size_t k = 0; k < n_weights; ++k) {
    std::vector<Instruction*> rows;
    std::vector<int64_t> row_dims = {1};
    for (int64_t d : w_.of_layer[0][k]->shape().dimensions()) row_dims.push_back(d);
    for (int64_t l = 0; l < L(); ++l) rows.push_back(eb.Reshape(w_.of_layer[l][k], row_dims));
    std::vector<int64_t> dims = row_dims;
    dims[0] = L();
    Instruction* stack = eb.Add(Opcode::kConcatenate, Shape(w_.of_layer[0][k]->shape().element_type(), dims),
                                rows, "stacked");
    stack->mutable_attrs().dimensions = {0};
    stacks.push_back(stack);
  }
  // Values the body reads from outside: constants are rebuilt inside, the
  // rest are carried unchanged.
  std::set<const Instruction*> in_body(body_.begin(), body_.end());
  std::vector<Instruction*> invariants;
  for (Instruction* x : body_)
    for (Instruction* o : x->operands())
      if (!in_body.count(o) && o != input_ && !weight_layer_.count(o) &&
          !IsConstantExpression(o, constant_memo_) &&
          std::find(invariants.begin(), invariants.end(), o) == invariants.end())
        invariants.push_back(o);

  std::vector<Shape> carried = {Shape(PrimitiveType::S32, {}), input_->shape()};
  for (Instruction* s : stacks) carried.push_back(s->shape());
  for (Instruction* v : invariants) carried.push_back(v->shape());
  const Shape tuple_shape = Shape::Tuple(carried);
  const int64_t first_stack = 2, first_invariant = 2 + static_cast<int64_t>(n_weights);

  auto body = std::make_unique<Computation>(FreshComputationName(module_, "rolled_layer"));
  Builder b(module_, *body, loc);
  Instruction* param = b.Parameter(0, tuple_shape, "layer");
  Instruction* counter = b.Element(param, 0);
  std::map<const Instruction*, Instruction*> copy;
  copy[input_] = b.Element(param, 1);
  std::vector<Instruction*> stack_elements, invariant_elements;
  for (size_t k = 0; k < n_weights; ++k) {
    Instruction* stack = b.Element(param, first_stack + static_cast<int64_t>(k));
    stack_elements.push_back(stack);
    copy[w_.of_layer[0][k]] = b.Reshape(b.SliceRow(stack, counter), w_.of_layer[0][k]->shape().dimensions());
  }
  for (size_t k = 0; k < invariants.size(); ++k) {
    invariant_elements.push_back(b.Element(param, first_invariant + static_cast<int64_t>(k)));
    copy[invariants[k]] = invariant_elements.back();
  }
  // Clone `i` (its operands first) into the body.
  std::function<Instruction*(Instruction*)> clone = [&](Instruction* i) -> Instruction* {
    auto it = copy.find(i);
    if (it != copy.end()) return it->second;
    std::vector<Instruction*> operands;
    for (Instruction* o : i->operands()) operands.push_back(clone(o));
    Instruction* c = b.Add(i->opcode(), i->shape(), operands, i->name());
    c->mutable_attrs() = i->attrs();
    if (i->has_literal()) c->set_literal(i->literal());
    c->set_called_computations(i->called_computations());
    c->set_loc(i->loc());
    if (i->has_sharding()) c->set_sharding(*i->sharding());
    copy[i] = c;
    return c;
  };
  for (Instruction* x : body_) clone(x);
  std::vector<Instruction*> next = {b.Binary(Opcode::kAdd, counter, b.ConstantS32(1)),
                                    copy.at(boundary_[1])};
  next.insert(next.end(), stack_elements.begin(), stack_elements.end());
  next.insert(next.end(), invariant_elements.begin(), invariant_elements.end());
  body->set_root(b.Tuple(next));
  body->SortTopologically();

  auto cond = std::make_unique<Computation>(FreshComputationName(module_, "rolled_layer_left"));
  Builder cb(module_, *cond, loc);
  Instruction* cparam = cb.Parameter(0, tuple_shape, "layer");
  cond->set_root(cb.Compare(cb.Element(cparam, 0), cb.ConstantS32(L()), ComparisonDirection::kLt));
  Computation* cond_added = module_.AddComputation(std::move(cond));
  Computation* body_added = module_.AddComputation(std::move(body));

  std::vector<Instruction*> init = {eb.ConstantS32(0), input_};
  init.insert(init.end(), stacks.begin(), stacks.end());
  init.insert(init.end(), invariants.begin(), invariants.end());
  Instruction* loop = eb.Add(Opcode::kWhile, tuple_shape, {eb.Tuple(init)}, "rolled_layers");
  loop->set_called_computations({cond_added, body_added});
  Instruction* result = eb.Element(loop, 1);
  output_->ReplaceAllUsesWith(result);

  // The unrolled layers are dead now.
  std::set<Instruction*> unrolled(body_.begin(), body_.end());
  for (int64_t l = 1; l < L(); ++l)
    for (Instruction* x : body_) unrolled.insert(match_[l].at(x));
  for (auto it = order_.rbegin(); it != order_.rend(); ++it)
    if (unrolled.count(*it) && (*it)->users().empty() && entry_.root() != *it)
      entry_.RemoveInstruction(*it);
  entry_.SortTopologically();

  RollLayersReport report;
  report.pattern = w_.pattern;
  report.layers = L();
  report.weights = static_cast<int64_t>(n_weights);
  report.layer_instructions = static_cast<int64_t>(body_.size());
  report.loop = loop->name();
  return report;
}

}  // namespace

StatusOr<std::optional<RollLayersReport>> RollLayers(Module& module) {
  std::optional<LayerWeights> weights = FindLayerWeights(*module.entry());
  if (!weights) return std::optional<RollLayersReport>();
  LayerRoller roller(module, std::move(*weights));
  MS_RETURN_IF_ERROR(roller.Analyse());
  return std::optional<RollLayersReport>(roller.Rewrite());
}

}  // namespace meshsplit
