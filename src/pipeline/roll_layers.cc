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
#include "pipeline/region.h"
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

// One run of layers as a scan will read it. Steps are the layers in program
// order: layer s, or layer L-1-s when the run is reversed (a backward pass).
struct LayerRun {
  std::string pattern;
  int64_t layers = 0;
  bool reversed = false;
  // Values every layer reads its own copy of: weights, and in a backward
  // run the forward run's residuals. `stack`, when set, already holds them
  // as [L, ...] (layer l at row l); otherwise the rolling stacks them.
  struct PerLayer {
    std::string name;
    std::vector<Instruction*> of_layer;
    Instruction* stack = nullptr;
  };
  std::vector<PerLayer> per_layer;
  // The instructions that may belong to a layer; the rest read the layers'
  // values from outside (a backward pass reading residuals, the outputs).
  std::set<const Instruction*> scope;
  int64_t LayerOf(int64_t step) const { return reversed ? layers - 1 - step : step; }
};

class LayerRoller {
 public:
  LayerRoller(Module& module, LayerRun run)
      : module_(module), entry_(*module.entry()), run_(std::move(run)) {}

  Status Analyse();
  // Rewrites the run into one while; the per-layer values it now keeps
  // stacked for readers outside the scope are returned (their rows).
  std::vector<LayerRun::PerLayer> Rewrite(RollLayersReport& report);
  // The run, with the stacks Rewrite built.
  const LayerRun& run() const { return run_; }

 private:
  int64_t L() const { return run_.layers; }
  bool InScope(const Instruction* i) const { return run_.scope.count(i) > 0; }
  Status Error(const std::string& what, const SourceLoc& loc) const {
    return Status::Error("cannot roll the layers " + run_.pattern + ": " + what, loc);
  }
  Status Differs(int64_t step, const Instruction& at, const std::string& why) const {
    return Error("layer " + std::to_string(run_.LayerOf(step)) + " differs from layer " +
                     std::to_string(run_.LayerOf(0)) + " at %" + at.name() + ": " + why,
                 at.loc());
  }
  void ComputeStepRanges();
  StatusOr<Instruction*> FindBoundary(int64_t step) const;
  Status MatchStep(int64_t step);
  bool Infer(Instruction* x, Instruction* y, int64_t step,
             std::map<Instruction*, Instruction*>& trial, Instruction*& input) const;
  // What depends on `x` within the scope (not `x` itself).
  std::set<const Instruction*> Downstream(const Instruction* x) const {
    std::set<const Instruction*> out;
    std::vector<const Instruction*> todo = {x};
    while (!todo.empty()) {
      const Instruction* i = todo.back();
      todo.pop_back();
      for (const Instruction* u : i->users())
        if (InScope(u) && out.insert(u).second) todo.push_back(u);
    }
    return out;
  }
  Instruction* At(int64_t step, Instruction* x) const { return step == 0 ? x : match_[step].at(x); }

  Module& module_;
  Computation& entry_;
  LayerRun run_;
  mutable std::map<const Instruction*, bool> constant_memo_;
  std::vector<Instruction*> order_;  // the entry in post order
  std::map<const Instruction*, int> per_layer_step_;
  // The latest step whose per-layer values an instruction of the scope
  // reads (kNoLayer: none), and the earliest step whose per-layer values
  // something downstream of it reads.
  std::map<const Instruction*, int> latest_, earliest_after_;
  std::vector<Instruction*> boundary_;  // boundary_[s]: step s's input (s >= 1)
  // match_[s]: step 0's instructions -> step s's.
  std::vector<std::map<Instruction*, Instruction*>> match_;
  Instruction* input_ = nullptr;   // step 0's input (the activation it receives)
  Instruction* output_ = nullptr;  // the last step's output
  std::vector<Instruction*> body_;  // step 0's instructions, in post order
  // Body values (other than the carried one) read outside the scope.
  std::vector<Instruction*> read_outside_;
  // The carried activation is read outside the scope (a residual): every
  // step's input is kept.
  bool keep_inputs_ = false;
};

void LayerRoller::ComputeStepRanges() {
  order_ = entry_.MakePostOrder();
  for (const LayerRun::PerLayer& p : run_.per_layer)
    for (int64_t s = 0; s < L(); ++s) per_layer_step_[p.of_layer[run_.LayerOf(s)]] = static_cast<int>(s);
  for (Instruction* i : order_) {
    int latest = kNoLayer;
    if (per_layer_step_.count(i)) {
      latest = per_layer_step_[i];
    } else if (InScope(i)) {
      for (Instruction* o : i->operands()) latest = std::max(latest, latest_[o]);
    }
    latest_[i] = latest;
  }
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    int earliest = INT_MAX;
    for (Instruction* u : (*it)->users()) {
      if (!InScope(u)) continue;
      earliest = std::min(earliest, earliest_after_[u]);
      for (Instruction* o : u->operands())
        if (per_layer_step_.count(o)) earliest = std::min(earliest, per_layer_step_[o]);
    }
    earliest_after_[*it] = earliest;
  }
}

// Step s's input: a value computed by step s-1 (it reads per-layer values
// of step s-1 at the latest, and nothing after it reads those of earlier
// steps) such that everything downstream of it or reading later per-layer
// values reads nothing else of the earlier steps. The last such value in
// program order: an earlier one can pass for a cut only because the
// residual path around it starts from a value that reads no per-layer
// value (step 0's input).
StatusOr<Instruction*> LayerRoller::FindBoundary(int64_t step) const {
  Instruction* found = nullptr;
  for (Instruction* x : order_) {
    int latest = latest_.at(x);
    if (!InScope(x) || latest < 0 || latest > step - 1 || earliest_after_.at(x) < step) continue;
    std::set<const Instruction*> after;  // downstream of x, or reading steps >= s
    for (Instruction* i : order_) {
      if (!InScope(i) || i == x) continue;
      bool downstream = latest_.at(i) >= step;
      for (Instruction* o : i->operands()) downstream = downstream || o == x || after.count(o);
      if (downstream) after.insert(i);
    }
    bool cut = true;
    for (const Instruction* i : after)
      for (const Instruction* o : i->operands())
        if (o != x && !after.count(o) && latest_.at(o) != kNoLayer && !per_layer_step_.count(o))
          cut = false;
    if (cut) found = x;
  }
  if (found != nullptr) return found;
  return Error("no single value carries layer " + std::to_string(run_.LayerOf(step - 1)) +
                   "'s result into layer " + std::to_string(run_.LayerOf(step)) +
                   " (more than one value crosses between them)",
               run_.per_layer[0].of_layer[run_.LayerOf(step)]->loc());
}

// Whether y can be step s's twin of step 0's x, extending `trial`;
// reaching step s's input identifies step 0's (`input`).
bool LayerRoller::Infer(Instruction* x, Instruction* y, int64_t step,
                        std::map<Instruction*, Instruction*>& trial, Instruction*& input) const {
  if (x == y) return latest_.at(x) == kNoLayer && x != input;  // shared by every layer
  auto known = match_[step].find(x);
  if (known != match_[step].end()) return known->second == y;
  auto tried = trial.find(x);
  if (tried != trial.end()) return tried->second == y;
  // Constants computed apart but equal are one value (nothing to map).
  if (IsConstantExpression(x, constant_memo_) && IsConstantExpression(y, constant_memo_))
    return SameConstant(x, y);
  if (y == boundary_[step]) {
    if (input != nullptr && input != x) return false;
    input = x;
    trial[x] = y;
    return true;
  }
  if (latest_.at(x) != kNoLayer || !InScope(x) || !InScope(y) ||
      x->opcode() == Opcode::kParameter || Signature(*x) != Signature(*y))
    return false;
  trial[x] = y;
  for (int k = 0; k < x->operand_count(); ++k)
    if (!Infer(x->operand(k), y->operand(k), step, trial, input)) return false;
  return true;
}

Status LayerRoller::MatchStep(int64_t step) {
  std::map<Instruction*, Instruction*>& f = match_[step];
  for (const LayerRun::PerLayer& p : run_.per_layer) {
    Instruction* a = p.of_layer[run_.LayerOf(0)];
    Instruction* b = p.of_layer[run_.LayerOf(step)];
    if (a->shape() != b->shape())
      return Differs(step, *b, p.name + " has shape " + b->shape().ToString() + " vs " +
                                   a->shape().ToString());
    f[a] = b;
  }
  // What reads the next step's input belongs to the next steps, even when
  // it reads no per-layer value of them yet (a norm's statistics).
  const std::set<const Instruction*> step1 = Downstream(boundary_[1]);
  const std::set<const Instruction*> next =
      step + 1 < L() ? Downstream(boundary_[step + 1]) : std::set<const Instruction*>();
  Instruction* input = input_;
  std::set<const Instruction*> taken;
  for (Instruction* u : order_) {
    if (!InScope(u) || per_layer_step_.count(u) || step1.count(u) || f.count(u)) continue;
    // An op of step 0: it reads its per-layer values, or values of it
    // already matched (a bias gradient reads only the incoming gradient).
    int anchor = -1;
    for (int k = 0; k < u->operand_count() && anchor < 0; ++k)
      if (f.count(u->operand(k)) && u->operand(k) != input) anchor = k;
    if (anchor < 0) continue;
    Instruction* twin_operand = f.at(u->operand(anchor));
    std::string why;
    std::map<Instruction*, Instruction*> chosen;
    Instruction* twin = nullptr;
    for (Instruction* v : twin_operand->users()) {
      if (v->operand_count() <= anchor || v->operand(anchor) != twin_operand) continue;
      // Duplicates (the same op twice on the same operands) pair up in
      // program order: a twin already taken is not one.
      // Before it reads its per-layer values, step s reads only step s-1.
      const int want = static_cast<int>(latest_.at(u) == kNoLayer ? step - 1 : step);
      if (v->opcode() != u->opcode() || !InScope(v) || latest_.at(v) != want || next.count(v) ||
          taken.count(v))
        continue;
      if (v->shape() != u->shape()) {
        why = "shape " + v->shape().ToString() + " vs " + u->shape().ToString() + " (%" +
              v->name() + ")";
        continue;
      }
      if (Signature(*u) != Signature(*v)) {
        why = "attributes {" + Signature(*v) + "} of %" + v->name() + " vs {" + Signature(*u) + "}";
        continue;
      }
      std::map<Instruction*, Instruction*> trial;
      Instruction* trial_input = input;
      bool same = true;
      int failed = -1;
      for (int k = 0; k < u->operand_count() && same; ++k) {
        same = Infer(u->operand(k), v->operand(k), step, trial, trial_input);
        if (!same) failed = k;
      }
      if (!same) {
        why = "its operand %" + u->operand(failed)->name() + " does not correspond to %" +
              v->name() + "'s operand %" + v->operand(failed)->name();
        continue;
      }
      twin = v;
      chosen = std::move(trial);
      input = trial_input;
      break;
    }
    if (twin == nullptr) {
      if (why.empty()) {
        why = "no " + std::string(OpcodeName(u->opcode())) + " of layer " +
              std::to_string(run_.LayerOf(step)) + " reads %" + twin_operand->name() + " as %" +
              u->name() + " reads %" + u->operand(anchor)->name();
        std::string instead;
        for (const Instruction* v : twin_operand->users())
          if (InScope(v) && !taken.count(v))
            instead += (instead.empty() ? "" : ", ") + std::string(OpcodeName(v->opcode())) + " %" +
                       v->name();
        if (!instead.empty()) why += " (it is read by " + instead + ")";
      }
      return Differs(step, *u, why);
    }
    chosen[u] = twin;
    for (auto& [x, y] : chosen) taken.insert(y);
    f.insert(chosen.begin(), chosen.end());
  }
  if (input == nullptr)
    return Error("layer " + std::to_string(run_.LayerOf(0)) +
                     " reads no activation that layer " + std::to_string(run_.LayerOf(step)) +
                     "'s input %" + boundary_[step]->name() + " corresponds to",
                 boundary_[step]->loc());
  input_ = input;
  return Status::Ok();
}

Status LayerRoller::Analyse() {
  ComputeStepRanges();
  boundary_.assign(L(), nullptr);
  for (int64_t s = 1; s < L(); ++s) {
    MS_ASSIGN_OR_RETURN(boundary_[s], FindBoundary(s));
  }
  match_.assign(L(), {});
  for (int64_t s = 1; s < L(); ++s) MS_RETURN_IF_ERROR(MatchStep(s));

  // Step 0: what the matches cover (the same set for every step, checked
  // below), less its input and the per-layer values.
  for (Instruction* i : order_)
    if (match_[1].count(i) && i != input_ && !per_layer_step_.count(i)) body_.push_back(i);
  Instruction* first_output = boundary_[1];
  if (!match_[1].count(first_output))
    return Error("layer " + std::to_string(run_.LayerOf(1)) + "'s input %" +
                     first_output->name() + " is not computed by layer " +
                     std::to_string(run_.LayerOf(0)),
                 first_output->loc());
  if (input_->shape() != first_output->shape())
    return Error("layer " + std::to_string(run_.LayerOf(0)) + " takes %" + input_->name() + " " +
                     input_->shape().ToString() + " but gives %" + first_output->name() + " " +
                     first_output->shape().ToString(),
                 first_output->loc());
  std::set<const Instruction*> claimed(body_.begin(), body_.end());
  for (int64_t s = 1; s < L(); ++s) {
    std::map<Instruction*, Instruction*>& f = match_[s];
    if (f.at(input_) != boundary_[s])
      return Differs(s, *input_, "its input is not the previous layer's output");
    for (Instruction* x : body_) {
      auto it = f.find(x);
      if (it == f.end()) return Differs(s, *x, "it has no counterpart");
      if (!claimed.insert(it->second).second)
        return Differs(s, *x, "its counterpart %" + it->second->name() + " belongs to another layer");
    }
    if (s + 1 < L() && f.at(first_output) != boundary_[s + 1])
      return Differs(s, *first_output, "the next layer's input is %" + boundary_[s + 1]->name() +
                                           ", not its counterpart %" + f.at(first_output)->name());
  }
  output_ = At(L() - 1, first_output);
  // Inside the scope only a layer's output may leave it; readers outside
  // the scope (a backward pass, the outputs) get the values stacked.
  std::set<Instruction*> outside;
  for (Instruction* u : input_->users())
    if (!InScope(u)) keep_inputs_ = true;
  for (int64_t s = 0; s < L(); ++s) {
    std::set<const Instruction*> image;
    for (Instruction* x : body_) image.insert(At(s, x));
    for (Instruction* x : body_) {
      Instruction* y = At(s, x);
      for (Instruction* u : y->users()) {
        if (image.count(u)) continue;
        if (x == first_output) {
          if (!InScope(u) && s + 1 < L()) keep_inputs_ = true;
          continue;
        }
        if (InScope(u))
          return Error("layer " + std::to_string(run_.LayerOf(s)) + "'s %" + y->name() +
                           " is read outside the layer by %" + u->name() +
                           " (only a layer's output may leave it)",
                       u->loc());
        outside.insert(x);
      }
    }
    for (const LayerRun::PerLayer& p : run_.per_layer)
      for (Instruction* u : p.of_layer[run_.LayerOf(s)]->users())
        if (InScope(u) && !image.count(u))
          return Error("layer " + std::to_string(run_.LayerOf(s)) + "'s %" +
                           p.of_layer[run_.LayerOf(s)]->name() +
                           " is read outside the layer by %" + u->name(),
                       u->loc());
  }
  for (Instruction* x : body_)
    if (outside.count(x)) read_outside_.push_back(x);
  return Status::Ok();
}

std::vector<LayerRun::PerLayer> LayerRoller::Rewrite(RollLayersReport& report) {
  const SourceLoc loc = input_->loc();
  Builder eb(module_, entry_, loc);
  const int64_t n_per_layer = static_cast<int64_t>(run_.per_layer.size());

  // Stacked per-layer values: [1, ...] reshapes of each layer's, concatenated.
  std::vector<Instruction*> stacks;
  for (LayerRun::PerLayer& p : run_.per_layer) {
    if (p.stack != nullptr) {
      stacks.push_back(p.stack);
      continue;
    }
    std::vector<Instruction*> rows;
    std::vector<int64_t> row_dims = {1};
    for (int64_t d : p.of_layer[0]->shape().dimensions()) row_dims.push_back(d);
    for (int64_t l = 0; l < L(); ++l) rows.push_back(eb.Reshape(p.of_layer[l], row_dims));
    std::vector<int64_t> dims = row_dims;
    dims[0] = L();
    Instruction* stack = eb.Add(Opcode::kConcatenate, Shape(p.of_layer[0]->shape().element_type(), dims),
                                rows, "stacked");
    stack->mutable_attrs().dimensions = {0};
    stacks.push_back(stack);
    p.stack = stack;
  }
  // Values the body reads from outside: constants are rebuilt inside, the
  // rest are carried unchanged.
  std::set<const Instruction*> in_body(body_.begin(), body_.end());
  std::vector<Instruction*> invariants;
  for (Instruction* x : body_)
    for (Instruction* o : x->operands())
      if (!in_body.count(o) && o != input_ && !per_layer_step_.count(o) &&
          !IsConstantExpression(o, constant_memo_) &&
          std::find(invariants.begin(), invariants.end(), o) == invariants.end())
        invariants.push_back(o);
  // Stacked results: each step's value of what is read outside the scope
  // (and its input, when the carried activation is).
  std::vector<Instruction*> kept = read_outside_;
  if (keep_inputs_) kept.insert(kept.begin(), input_);

  std::vector<Shape> carried = {Shape(PrimitiveType::S32, {}), input_->shape()};
  auto stacked_shape = [&](const Instruction* x) {
    std::vector<int64_t> dims = {L()};
    for (int64_t d : x->shape().dimensions()) dims.push_back(d);
    return Shape(x->shape().element_type(), dims);
  };
  for (Instruction* s : stacks) carried.push_back(s->shape());
  for (Instruction* v : invariants) carried.push_back(v->shape());
  for (Instruction* x : kept) carried.push_back(stacked_shape(x));
  const Shape tuple_shape = Shape::Tuple(carried);
  const int64_t first_stack = 2, first_invariant = first_stack + n_per_layer;
  const int64_t first_kept = first_invariant + static_cast<int64_t>(invariants.size());

  auto body = std::make_unique<Computation>(FreshComputationName(module_, "rolled_layer"));
  Builder b(module_, *body, loc);
  Instruction* param = b.Parameter(0, tuple_shape, "layer");
  Instruction* counter = b.Element(param, 0);
  Instruction* index = run_.reversed ? b.Binary(Opcode::kSubtract, b.ConstantS32(L() - 1), counter)
                                     : counter;
  std::map<const Instruction*, Instruction*> copy;
  copy[input_] = b.Element(param, 1);
  std::vector<Instruction*> passed;  // stacks and invariants, unchanged
  for (int64_t k = 0; k < n_per_layer; ++k) {
    Instruction* stack = b.Element(param, first_stack + k);
    passed.push_back(stack);
    Instruction* step0 = run_.per_layer[k].of_layer[run_.LayerOf(0)];
    copy[step0] = b.Reshape(b.SliceRow(stack, index), step0->shape().dimensions());
  }
  for (size_t k = 0; k < invariants.size(); ++k) {
    passed.push_back(b.Element(param, first_invariant + static_cast<int64_t>(k)));
    copy[invariants[k]] = passed.back();
  }
  // Clone `i` (its operands first) into the body.
  std::function<Instruction*(Instruction*)> clone = [&](Instruction* i) -> Instruction* {
    auto it = copy.find(i);
    if (it != copy.end()) return it->second;
    // A splat constant becomes a broadcast of its scalar, which the
    // pipeline can rebatch (a constant with a batch dim it cannot).
    if (std::optional<Literal> splat = SplatValue(*i)) {
      Instruction* scalar = b.Add(Opcode::kConstant, splat->shape(), {}, i->name() + ".scalar");
      scalar->set_literal(*splat);
      return copy[i] = b.Broadcast(scalar, i->shape().dimensions());
    }
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
  next.insert(next.end(), passed.begin(), passed.end());
  auto row_dims = [](const Instruction* x) {
    std::vector<int64_t> d = {1};
    for (int64_t n : x->shape().dimensions()) d.push_back(n);
    return d;
  };
  for (size_t k = 0; k < kept.size(); ++k) {
    Instruction* ys = b.Element(param, first_kept + static_cast<int64_t>(k));
    next.push_back(b.UpdateRow(ys, b.Reshape(copy.at(kept[k]), row_dims(kept[k])), index));
  }
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
  for (Instruction* x : kept)
    init.push_back(eb.Broadcast(eb.Scalar(x->shape().element_type(), 0), stacked_shape(x).dimensions()));
  Instruction* loop = eb.Add(Opcode::kWhile, tuple_shape, {eb.Tuple(init)}, "rolled_layers");
  loop->set_called_computations({cond_added, body_added});

  // Readers outside the scope of the values kept: row l of their stack.
  auto redirect_outside = [&](Instruction* from, Instruction* to) {
    std::vector<Instruction*> users = from->users();
    for (Instruction* u : users)
      if (!InScope(u) && u != loop->operand(0))
        for (int i = 0; i < u->operand_count(); ++i)
          if (u->operand(i) == from) u->ReplaceOperand(i, to);
  };
  std::vector<LayerRun::PerLayer> rows;
  for (size_t k = 0; k < kept.size(); ++k) {
    LayerRun::PerLayer p;
    p.name = "the residual %" + kept[k]->name();
    p.stack = eb.Element(loop, first_kept + static_cast<int64_t>(k));
    for (int64_t l = 0; l < L(); ++l) {
      Instruction* row = eb.Add(Opcode::kSlice, Shape(kept[k]->shape().element_type(), row_dims(kept[k])),
                                {p.stack}, "residual");
      std::vector<SliceDimension> slice = {{l, l + 1, 1}};
      for (int64_t n : kept[k]->shape().dimensions()) slice.push_back({0, n, 1});
      row->mutable_attrs().slice = slice;
      p.of_layer.push_back(eb.Reshape(row, kept[k]->shape().dimensions()));
    }
    for (int64_t s = 0; s < L(); ++s) {
      Instruction* row = p.of_layer[run_.LayerOf(s)];
      if (kept[k] == input_) {
        redirect_outside(s == 0 ? input_ : At(s - 1, boundary_[1]), row);
      } else {
        redirect_outside(At(s, kept[k]), row);
      }
    }
    rows.push_back(std::move(p));
  }
  output_->ReplaceAllUsesWith(eb.Element(loop, 1));

  // The unrolled layers are dead now.
  std::set<Instruction*> unrolled(body_.begin(), body_.end());
  for (int64_t s = 1; s < L(); ++s)
    for (Instruction* x : body_) unrolled.insert(match_[s].at(x));
  for (auto it = order_.rbegin(); it != order_.rend(); ++it)
    if (unrolled.count(*it) && (*it)->users().empty() && entry_.root() != *it)
      entry_.RemoveInstruction(*it);
  entry_.SortTopologically();

  report.pattern = run_.pattern;
  report.layers = L();
  report.weights = n_per_layer;
  report.layer_instructions = static_cast<int64_t>(body_.size());
  report.loop = loop->name();
  return rows;
}

// ---- The runs of a module -------------------------------------------------

// The loss of a training step: the first scalar the root returns; nullptr
// when it returns none.
const Instruction* Loss(const Computation& entry) {
  const Instruction* root = entry.root();
  if (root->opcode() != Opcode::kTuple) return nullptr;
  for (const Instruction* o : root->operands())
    if (o->shape().IsArray() && o->shape().rank() == 0) return o;
  return nullptr;
}

// The forward pass: what the loss is computed from (everything when the
// module returns no loss), less the root.
std::set<const Instruction*> ForwardScope(const Computation& entry) {
  std::set<const Instruction*> scope;
  if (const Instruction* loss = Loss(entry)) {
    scope = stage_region::Ancestors({loss});
  } else {
    for (const auto& i : entry.instructions()) scope.insert(i.get());
  }
  scope.erase(entry.root());
  return scope;
}

// The backward pass: what the loss is not computed from, less the root and
// the optimizer's updates (a weight plus or minus its step, and what
// follows), which stay unrolled outside the scan.
std::set<const Instruction*> BackwardScope(const Computation& entry,
                                           const std::vector<LayerRun::PerLayer>& weights) {
  std::set<const Instruction*> forward;
  if (const Instruction* loss = Loss(entry)) forward = stage_region::Ancestors({loss});
  std::set<const Instruction*> weight_set;
  for (const LayerRun::PerLayer& p : weights) weight_set.insert(p.of_layer.begin(), p.of_layer.end());
  std::set<const Instruction*> update;
  const std::vector<Instruction*> order = entry.MakePostOrder();
  for (Instruction* i : order)
    for (const Instruction* o : i->operands())
      if (update.count(o) || (weight_set.count(o) && i->shape() == o->shape() &&
                              (i->opcode() == Opcode::kAdd || i->opcode() == Opcode::kSubtract)))
        update.insert(i);
  // The step size times the gradient belongs to the update too: the scan
  // returns the gradient itself (a sum over the batch).
  std::map<const Instruction*, bool> memo;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Instruction* i = *it;
    if (update.count(i) || i->users().empty()) continue;
    bool scales = i->opcode() == Opcode::kMultiply || i->opcode() == Opcode::kDivide;
    bool by_constant = false;
    for (int k = 0; k < i->operand_count(); ++k)
      by_constant = by_constant || IsConstantExpression(i->operand(k), memo);
    bool feeds_updates_only = true;
    for (const Instruction* u : i->users()) feeds_updates_only = feeds_updates_only && update.count(u);
    if (scales && by_constant && feeds_updates_only) update.insert(i);
  }
  std::set<const Instruction*> scope;
  for (Instruction* i : order)
    if (!update.count(i) && !forward.count(i) && i != entry.root() &&
        i->opcode() != Opcode::kParameter)
      scope.insert(i);
  return scope;
}

}  // namespace

StatusOr<std::optional<RollLayersReport>> RollLayers(Module& module) {
  std::optional<LayerWeights> weights = FindLayerWeights(*module.entry());
  if (!weights) return std::optional<RollLayersReport>();
  LayerRun forward;
  forward.pattern = weights->pattern;
  forward.layers = weights->layers();
  for (size_t k = 0; k < weights->names.size(); ++k) {
    LayerRun::PerLayer p;
    p.name = weights->names[k];
    for (int64_t l = 0; l < weights->layers(); ++l) p.of_layer.push_back(weights->of_layer[l][k]);
    forward.per_layer.push_back(std::move(p));
  }
  forward.scope = ForwardScope(*module.entry());
  LayerRun backward = forward;  // the same weights, before they are stacked
  LayerRoller forward_roller(module, std::move(forward));
  MS_RETURN_IF_ERROR(forward_roller.Analyse());
  RollLayersReport report;
  std::vector<LayerRun::PerLayer> residuals = forward_roller.Rewrite(report);
  if (residuals.empty()) return std::optional<RollLayersReport>(report);

  // A training step: the backward pass reads the forward's residuals. Its
  // layers run from the last to the first, each reading its weights (the
  // forward's stacks) and its residuals (rows of the forward's results).
  const std::vector<LayerRun::PerLayer>& stacked = forward_roller.run().per_layer;
  for (size_t k = 0; k < stacked.size(); ++k) backward.per_layer[k].stack = stacked[k].stack;
  backward.reversed = true;
  backward.scope = BackwardScope(*module.entry(), backward.per_layer);
  backward.per_layer.insert(backward.per_layer.end(), residuals.begin(), residuals.end());
  LayerRoller backward_roller(module, std::move(backward));
  MS_RETURN_IF_ERROR(backward_roller.Analyse());
  RollLayersReport backward_report;
  backward_roller.Rewrite(backward_report);
  report.backward_loop = backward_report.loop;
  report.backward_layer_instructions = backward_report.layer_instructions;
  // The rows the backward layers read are now read from the stacks.
  Computation& entry = *module.entry();
  for (const LayerRun::PerLayer& p : residuals)
    for (Instruction* row : p.of_layer)
      if (row->users().empty()) {
        Instruction* slice = row->operand(0);
        entry.RemoveInstruction(row);
        if (slice->users().empty()) entry.RemoveInstruction(slice);
      }
  return std::optional<RollLayersReport>(report);
}

}  // namespace meshsplit
