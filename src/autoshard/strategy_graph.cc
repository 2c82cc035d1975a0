// The strategy graph of the exact planner (strategy_graph.h): nodes,
// strategies from the op rules, follower merging, free sources, layer
// linking, and the one reshard estimate its edges use.
#include "autoshard/strategy_graph.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>

#include "cost/cost_model.h"
#include "import/shard_spec.h"
#include "ir/computation.h"
#include "ir/instruction.h"
#include "partitioner/reshard.h"
#include "rules/op_rules.h"
#include "support/small_helpers.h"

namespace meshsplit::autoshard {
namespace {

// A factor the planner may put mesh axes on: operand dims (-1: absent) and
// the result dim (-1: reduced away, the result holds partial sums).
struct PlanFactor {
  bool reduction = false;
  std::vector<int64_t> operand_dims;
  int64_t result_dim = -1;
};

int64_t Rank(const Instruction* i) { return i->shape().IsArray() ? i->shape().rank() : -1; }

// The cost model's view ops move no bytes (cost_model.cc IsView).
bool MovesNoBytes(Opcode op) {
  return op == Opcode::kTuple || op == Opcode::kGetTupleElement || op == Opcode::kBitcast ||
         op == Opcode::kWhile || op == Opcode::kParameter || op == Opcode::kConstant;
}

// Opcodes whose factor rule the planner does not use: their partitioning
// needs halos, index handling or a replicated dim that one factor
// assignment does not describe.
bool PlannerSkips(Opcode op) {
  switch (op) {
    case Opcode::kSort:
    case Opcode::kReduceWindow:
    case Opcode::kSelectAndScatter:
    case Opcode::kReverse:
    case Opcode::kBitcast:
      return true;
    default:
      return false;
  }
}

// A gather's parallel factors (GSPMD's index and operand pass-through):
// each result batch dim with its indices dim, and each offset dim with the
// operand dim it slices whole. Indexed operand dims stay replicated.
bool GatherFactors(const Instruction& instr, std::vector<PlanFactor>* out) {
  const auto& dn = instr.attrs().gather_dnums;
  if (!dn || instr.operand_count() != 2 || !dn->operand_batching_dims.empty()) return false;
  const Shape& operand = instr.operand(0)->shape();
  const Shape& indices = instr.operand(1)->shape();
  const auto& sizes = instr.attrs().gather_slice_sizes;
  if (!operand.IsArray() || !indices.IsArray() ||
      static_cast<int64_t>(sizes.size()) != operand.rank())
    return false;
  int64_t index_dim = 0, operand_dim = 0;
  for (int64_t r = 0; r < instr.shape().rank(); ++r) {
    PlanFactor f;
    f.operand_dims = {-1, -1};
    f.result_dim = r;
    if (Contains(dn->offset_dims, r)) {
      while (operand_dim < operand.rank() && Contains(dn->collapsed_slice_dims, operand_dim))
        ++operand_dim;
      if (operand_dim >= operand.rank()) return false;
      const int64_t od = operand_dim++;
      if (sizes[od] != operand.dimensions(od) || Contains(dn->start_index_map, od)) continue;
      f.operand_dims[0] = od;
    } else {
      if (index_dim == dn->index_vector_dim) ++index_dim;
      if (index_dim >= indices.rank()) return false;
      f.operand_dims[1] = index_dim++;
    }
    out->push_back(std::move(f));
  }
  return true;
}

// The factors of `instr` the planner assigns axes to; false when the op is
// opaque.
bool PlanFactors(const Instruction& instr, std::vector<PlanFactor>* out) {
  if (!instr.shape().IsArray() || PlannerSkips(instr.opcode())) return false;
  const OpShardingRule rule = GetOpShardingRule(instr);
  const Shape& rs = instr.shape();
  switch (rule.kind) {
    case RuleKind::kElementwise:
    case RuleKind::kFactors:
    case RuleKind::kDot:
    case RuleKind::kConvolution:
    case RuleKind::kSameAsOperand0:
      for (const auto& f : rule.factors) {
        if (f.kind != FactorKind::kPassThrough && f.kind != FactorKind::kReduction) continue;
        PlanFactor p;
        p.reduction = f.kind == FactorKind::kReduction;
        p.result_dim = p.reduction ? -1 : f.result_dim;
        p.operand_dims = f.operand_dims;
        p.operand_dims.resize(instr.operand_count(), -1);
        // A pass-through dim must have one size everywhere (slice, pad and
        // concatenate change it: those dims stay replicated here).
        bool same = true;
        int64_t size = p.result_dim >= 0 ? rs.dimensions(p.result_dim) : -1;
        for (int k = 0; k < instr.operand_count(); ++k) {
          const int64_t d = p.operand_dims[k];
          if (d < 0) continue;
          const int64_t od = instr.operand(k)->shape().dimensions(d);
          if (size < 0) size = od;
          if (od != size) same = false;
        }
        if (same) out->push_back(std::move(p));
      }
      return true;
    case RuleKind::kGather:
      return GatherFactors(instr, out);
    case RuleKind::kReshape:
      // The major dims of each compound group move together.
      for (const auto& c : rule.compound) {
        if (c.operand_dims.empty() || c.result_dims.empty()) continue;
        PlanFactor p;
        p.operand_dims.assign(instr.operand_count(), -1);
        p.operand_dims[0] = c.operand_dims.front();
        p.result_dim = c.result_dims.front();
        out->push_back(std::move(p));
      }
      return true;
    default:
      return false;
  }
}

int64_t AxisProduct(const std::vector<int64_t>& axes, const Mesh& mesh) {
  int64_t n = 1;
  for (int64_t a : axes) n *= mesh.axes()[a].size;
  return n;
}

// "data,model": the axes as the cost model names a collective's group
// (cost_model.h MeshAxesOfGroup), which a machine profile is keyed by.
std::string AxesName(std::vector<int64_t> axes, const Mesh& mesh) {
  std::sort(axes.begin(), axes.end());
  std::string out;
  for (int64_t a : axes) out += (out.empty() ? "" : ",") + mesh.axes()[a].name;
  return out;
}

DimsMapping Unsplit(const Instruction* i) {
  return DimsMapping(std::max<int64_t>(0, Rank(i)));
}

std::vector<std::vector<std::string>> AxisNames(const DimsMapping& option, const Mesh& mesh) {
  std::vector<std::vector<std::string>> names;
  for (const auto& axes : option) {
    names.emplace_back();
    for (int64_t a : axes) names.back().push_back(mesh.axes()[a].name);
  }
  return names;
}

// The mapping `sharding` is for a value of `shape`, or unsplit when it is no
// mesh_split of the mesh (replicated, maximal, manual, ...).
DimsMapping MappingOf(const Shape& shape, const Sharding& sharding, const Mesh& mesh) {
  if (!shape.IsArray()) return {};
  for (const DimsMapping& o : EnumerateOptions(shape.dimensions(), mesh, 2)) {
    auto s = MeshSplit(mesh, AxisNames(o, mesh), shape.rank());
    if (s.ok() && *s == sharding) return o;
  }
  return DimsMapping(shape.rank());
}

DimsMapping ExistingMapping(const Instruction& instr, const Mesh& mesh) {
  if (!instr.has_sharding() || !instr.shape().IsArray()) return Unsplit(&instr);
  return MappingOf(instr.shape(), *instr.sharding(), mesh);
}

class Builder {
 public:
  Builder(const Module& module, const DecisionSpace& space, const MachineModel& machine,
          const StrategyGraphOptions& options)
      : module_(module), space_(space), machine_(machine), options_(options) {
    graph_.mesh = &space_.mesh;
  }

  StatusOr<StrategyGraph> Build() {
    const Computation* entry = module_.entry();
    if (entry == nullptr) return Status::Error("module has no entry computation");
    std::map<std::string, int> group_of_name;
    for (size_t g = 0; g < space_.groups.size(); ++g)
      for (const auto& m : space_.groups[g].members) group_of_name[m] = static_cast<int>(g);
    const std::vector<Instruction*> order = entry->MakePostOrder();
    graph_.instructions = static_cast<int64_t>(order.size());
    for (const Instruction* instr : order) {
      const Opcode op = instr->opcode();
      if (op == Opcode::kTuple && instr == entry->root()) continue;
      if (op == Opcode::kParameter || op == Opcode::kConstant) {
        auto it = group_of_name.find(instr->name());
        if (it != group_of_name.end()) {
          AddDecided(instr, it->second);
          continue;
        }
        if (Rank(instr) == 0 ||
            (op == Opcode::kConstant && instr->shape().ByteSize() < options_.free_constant_bytes)) {
          free_.insert(instr);
          continue;
        }
        AddSingle(instr, ExistingMapping(*instr, space_.mesh), /*opaque=*/false);
        continue;
      }
      if (IsFree(*instr)) {
        free_.insert(instr);
        // Its own traffic and that of the free values it reads, once.
        double bytes = 0;
        if (!MovesNoBytes(op)) {
          bytes += static_cast<double>(instr->shape().ByteSize());
          for (const Instruction* o : instr->operands()) {
            bytes += static_cast<double>(o->shape().ByteSize());
            if (auto f = free_bytes_.find(o); f != free_bytes_.end() && charged_.insert(o).second)
              bytes += f->second;
          }
        }
        free_bytes_[instr] = bytes;
        ++graph_.free_sources;
        continue;
      }
      // A tuple only get-tuple-elements read is no value of its own: each
      // element keeps its producer's sharding through it (the partitioner
      // passes tuples through as views), so it is no node, and the reads
      // follow the elements.
      if (op == Opcode::kTuple && OnlyElementsRead(*instr, *entry)) continue;
      if (TryForwardElement(instr)) continue;
      charge_.assign(instr->operand_count(), false);
      for (int k = 0; k < instr->operand_count(); ++k)
        if (free_bytes_.count(instr->operand(k)) && charged_.insert(instr->operand(k)).second)
          charge_[k] = true;
      if (TryFollower(instr)) continue;
      std::vector<PlanFactor> factors;
      if (!PlanFactors(*instr, &factors)) {
        AddSingle(instr, Unsplit(instr), /*opaque=*/true);
        continue;
      }
      AddFactorNode(instr, factors);
    }
    // Edges: every array operand with a node.
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      const GraphNode& node = graph_.nodes[n];
      if (node.follower) continue;  // reads its producer as it is
      for (int k = 0; k < node.instr->operand_count(); ++k) {
        const Instruction* o = node.instr->operand(k);
        if (Rank(o) <= 0) continue;
        auto it = graph_.node_of.find(o);
        if (it == graph_.node_of.end()) continue;
        graph_.edges.push_back({it->second, static_cast<int>(n), k});
      }
    }
    AddOutputSinks(*entry);
    AddLiveSets(*entry);
    for (const auto& c : graph_.classes) graph_.strategies += c.num_strategies;
    return std::move(graph_);
  }

 private:
  DimsMapping MappingOf(const Shape& shape, const Sharding& s) const {
    return autoshard::MappingOf(shape, s, space_.mesh);
  }

  // Built in whatever sharding the consumer reads: no operands but scalars
  // (broadcast of a scalar, iota) or only free operands (elementwise).
  bool IsFree(const Instruction& instr) const {
    const Opcode op = instr.opcode();
    if (!instr.shape().IsArray()) return false;
    if (op == Opcode::kIota) return true;
    if (op != Opcode::kBroadcast && op != Opcode::kConvert && op != Opcode::kCopy &&
        GetOpShardingRule(instr).kind != RuleKind::kElementwise)
      return false;
    for (const Instruction* o : instr.operands())
      if (Rank(o) != 0 && !free_.count(o)) return false;
    return true;
  }

  // An elementwise op (convert and copy included) with one operand that is
  // not free joins that operand's class.
  bool TryFollower(const Instruction* instr) {
    if (!instr->shape().IsArray()) return false;
    if (GetOpShardingRule(*instr).kind != RuleKind::kElementwise) return false;
    int real = -1;
    for (int k = 0; k < instr->operand_count(); ++k) {
      const Instruction* o = instr->operand(k);
      if (Rank(o) == 0 || free_.count(o)) continue;
      if (real >= 0 && instr->operand(real) != o) return false;
      if (real < 0) real = k;
    }
    if (real < 0) return false;
    const Instruction* p = instr->operand(real);
    if (p->shape().dimensions() != instr->shape().dimensions()) return false;
    return AddFollower(instr, p);
  }

  bool OnlyElementsRead(const Instruction& tuple, const Computation& entry) const {
    if (&tuple == entry.root() || tuple.users().empty()) return false;
    for (const Instruction* user : tuple.users())
      if (user->opcode() != Opcode::kGetTupleElement) return false;
    return true;
  }

  // A get-tuple-element of such a tuple follows the element's producer.
  bool TryForwardElement(const Instruction* instr) {
    if (instr->opcode() != Opcode::kGetTupleElement || !instr->shape().IsArray()) return false;
    const Instruction* tuple = instr->operand(0);
    if (tuple->opcode() != Opcode::kTuple || graph_.node_of.count(tuple)) return false;
    const int64_t index = instr->attrs().tuple_index;
    if (index < 0 || index >= tuple->operand_count()) return false;
    const Instruction* element = tuple->operand(index);
    if (element->shape().dimensions() != instr->shape().dimensions()) return false;
    return AddFollower(instr, element);
  }

  // `instr` joins the class of `p`'s node, with `p`'s result sharding for its
  // result and its array operands (false when `p` has no node).
  bool AddFollower(const Instruction* instr, const Instruction* p) {
    auto it = graph_.node_of.find(p);
    if (it == graph_.node_of.end()) return false;
    const GraphNode& producer = graph_.nodes[it->second];
    GraphNode node;
    node.instr = instr;
    node.cls = producer.cls;
    node.follower = true;
    for (const NodeStrategy& ps : producer.strategies) {
      NodeStrategy s;
      s.label = "follows " + p->name();
      s.result = ps.result;
      s.operands.assign(instr->operand_count(), DimsMapping());
      for (int k = 0; k < instr->operand_count(); ++k)
        if (Rank(instr->operand(k)) > 0) s.operands[k] = ps.result;
      Cost(*instr, &s, 1);
      node.strategies.push_back(std::move(s));
    }
    ++graph_.followers;
    Add(std::move(node), /*link=*/false);
    return true;
  }

  // The memory estimate's live sets (StrategyGraph::live_sets), from the
  // cost model's buffer ranges over the entry's program order.
  void AddLiveSets(const Computation& entry) {
    const auto& instrs = entry.instructions();
    const int64_t n = static_cast<int64_t>(instrs.size());
    const BufferLiveness live = ComputeBufferLiveness(entry, /*is_entry=*/true);
    std::map<const Instruction*, int64_t> position;
    for (int64_t k = 0; k < n; ++k) position[instrs[k].get()] = k;
    std::vector<LiveValue> value_at(n);  // buffers the estimate counts
    std::vector<bool> counted(n, false), dies_at(n, false);
    if (n > 0) dies_at[n - 1] = true;  // the outputs, all live at the end
    for (int64_t k = 0; k < n; ++k) {
      const Instruction* instr = instrs[k].get();
      if (!live.owns[k]) continue;
      if (live.end[k] < n) dies_at[live.end[k]] = true;
      if (instr->opcode() == Opcode::kParameter) continue;  // counted once, throughout
      if (auto it = graph_.node_of.find(instr); it != graph_.node_of.end()) {
        value_at[k] = {it->second, -1};
        counted[k] = true;
      } else if (free_.count(instr)) {
        // Built as its first reader with a node (in program order) reads it.
        int64_t first = n;
        for (const Instruction* user : instr->users()) {
          auto u = graph_.node_of.find(user);
          if (u == graph_.node_of.end() || graph_.nodes[u->second].sink) continue;
          const int64_t at = position.at(user);
          if (at >= first) continue;
          first = at;
          for (int o = 0; o < user->operand_count(); ++o)
            if (user->operand(o) == instr) value_at[k] = {u->second, o};
          counted[k] = true;
        }
      }
    }
    // The live set can only be largest just before a buffer dies (or at the
    // end): between deaths it only grows.
    std::vector<int64_t> active;  // counted buffers live at t
    for (int64_t t = 0; t < n; ++t) {
      if (counted[t]) active.push_back(t);
      if (!dies_at[t]) continue;
      std::vector<LiveValue> set;
      for (int64_t k : active) set.push_back(value_at[k]);
      if (!set.empty() && (graph_.live_sets.empty() || graph_.live_sets.back() != set))
        graph_.live_sets.push_back(std::move(set));
      active.erase(std::remove_if(active.begin(), active.end(),
                                  [&](int64_t k) { return live.end[k] == t; }),
                   active.end());
    }
  }

  // The entry outputs are read once more, by the caller: an updated copy of
  // a parameter (UpdatedCopies, which outputs_follow_inputs shards like the
  // parameter) in that parameter's sharding, an annotated element in its
  // annotation, any other in replicated (the entry result's default). A
  // sink node per output holds that read; its edge costs the reshard.
  void AddOutputSinks(const Computation& entry) {
    const Instruction* root = entry.root();
    const bool tuple = root->opcode() == Opcode::kTuple;
    std::vector<const Instruction*> outs;
    if (tuple) outs.assign(root->operands().begin(), root->operands().end());
    else outs.push_back(root);
    std::map<int64_t, int64_t> follows;
    for (auto [output, param] : UpdatedCopies(module_)) follows[output] = param;
    for (size_t k = 0; k < outs.size(); ++k) {
      const Instruction* o = outs[k];
      auto it = graph_.node_of.find(o);
      if (it == graph_.node_of.end() || Rank(o) <= 0) continue;
      graph_.outputs.push_back(it->second);
      GraphNode sink;
      sink.instr = root;
      sink.sink = true;
      const int operand = tuple ? static_cast<int>(k) : 0;
      auto read = [&](DimsMapping m) {
        NodeStrategy s;
        s.label = "output " + std::to_string(k);
        s.operands.assign(tuple ? outs.size() : 1, DimsMapping());
        s.operands[operand] = std::move(m);
        return s;
      };
      const Instruction* param = nullptr;
      if (auto f = follows.find(static_cast<int64_t>(k)); f != follows.end())
        for (const Instruction* p : entry.parameters())
          if (p->attrs().parameter_number == f->second) param = p;
      auto pn = param ? graph_.node_of.find(param) : graph_.node_of.end();
      if (pn != graph_.node_of.end()) {
        const GraphNode& q = graph_.nodes[pn->second];
        sink.cls = q.cls;
        for (const NodeStrategy& qs : q.strategies) sink.strategies.push_back(read(qs.result));
      } else {
        DimsMapping m = Unsplit(o);
        if (root->has_sharding()) {
          const Sharding& rs = *root->sharding();
          if (!tuple) m = MappingOf(o->shape(), rs);
          else if (rs.IsTuple() && k < rs.tuple_elements().size())
            m = MappingOf(o->shape(), rs.tuple_elements()[k]);
        }
        sink.strategies.push_back(read(std::move(m)));
      }
      const int id = static_cast<int>(graph_.nodes.size());
      const int from = it->second;
      Add(std::move(sink), /*link=*/false);
      graph_.edges.push_back({from, id, operand});
    }
  }

  void AddDecided(const Instruction* instr, int group) {
    const DecisionGroup& g = space_.groups[group];
    GraphNode node;
    node.instr = instr;
    node.decision_group = group;
    for (const DimsMapping& o : g.options) {
      NodeStrategy s;
      s.label = OptionToString(o, space_.mesh);
      s.result = o;
      s.result_bytes = LocalBytes(instr->shape(), o, space_.mesh);
      node.strategies.push_back(std::move(s));
    }
    auto [it, inserted] = group_class_.emplace(group, static_cast<int>(graph_.classes.size()));
    if (inserted) {
      StrategyClass c;
      c.label = g.label;
      c.num_strategies = static_cast<int>(g.options.size());
      c.decision_group = group;
      graph_.classes.push_back(c);
    }
    node.cls = it->second;
    Add(std::move(node), /*link=*/false);
  }

  void AddSingle(const Instruction* instr, DimsMapping result, bool opaque) {
    GraphNode node;
    node.instr = instr;
    node.opaque = opaque;
    NodeStrategy s;
    s.label = opaque ? "opaque" : OptionToString(result, space_.mesh);
    s.result = std::move(result);
    s.operands.reserve(instr->operand_count());
    for (const Instruction* o : instr->operands()) s.operands.push_back(Unsplit(o));
    Cost(*instr, &s, 1);
    node.strategies.push_back(std::move(s));
    if (opaque) ++graph_.opaque;
    Add(std::move(node), /*link=*/opaque);
  }

  void AddFactorNode(const Instruction* instr, const std::vector<PlanFactor>& factors) {
    const Mesh& mesh = space_.mesh;
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < mesh.num_axes(); ++a)
      if (mesh.axes()[a].size > 1) axes.push_back(a);
    GraphNode node;
    node.instr = instr;
    // assign[i]: factor of axes[i], or -1.
    std::vector<int> assign(axes.size(), -1);
    std::function<void(size_t)> rec = [&](size_t i) {
      if (i == axes.size()) {
        node.strategies.push_back(MakeStrategy(*instr, factors, axes, assign));
        return;
      }
      assign[i] = -1;
      rec(i + 1);
      for (size_t f = 0; f < factors.size(); ++f) {
        assign[i] = static_cast<int>(f);
        if (Divides(*instr, factors, axes, assign, f)) rec(i + 1);
      }
      assign[i] = -1;
    };
    rec(0);
    Add(std::move(node), /*link=*/true);
  }

  // Whether the axes assigned to factor `f` so far divide every dim it maps.
  bool Divides(const Instruction& instr, const std::vector<PlanFactor>& factors,
               const std::vector<int64_t>& axes, const std::vector<int>& assign, size_t f) const {
    int64_t n = 1;
    for (size_t i = 0; i < axes.size(); ++i)
      if (assign[i] == static_cast<int>(f)) n *= space_.mesh.axes()[axes[i]].size;
    const PlanFactor& p = factors[f];
    if (p.result_dim >= 0 && instr.shape().dimensions(p.result_dim) % n != 0) return false;
    for (int k = 0; k < instr.operand_count(); ++k)
      if (p.operand_dims[k] >= 0 &&
          instr.operand(k)->shape().dimensions(p.operand_dims[k]) % n != 0)
        return false;
    return true;
  }

  NodeStrategy MakeStrategy(const Instruction& instr, const std::vector<PlanFactor>& factors,
                            const std::vector<int64_t>& axes,
                            const std::vector<int>& assign) const {
    const Mesh& mesh = space_.mesh;
    NodeStrategy s;
    s.result = Unsplit(&instr);
    s.operands.reserve(instr.operand_count());
    for (const Instruction* o : instr.operands()) s.operands.push_back(Unsplit(o));
    std::vector<int64_t> partial;
    int64_t tiles = 1;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (assign[i] < 0) continue;
      const PlanFactor& f = factors[assign[i]];
      const int64_t a = axes[i];
      tiles *= mesh.axes()[a].size;
      s.label += (s.label.empty() ? "f" : " f") + std::to_string(assign[i]) + "=" +
                 mesh.axes()[a].name;
      if (f.result_dim >= 0) s.result[f.result_dim].push_back(a);
      if (f.reduction) partial.push_back(a);
      for (int k = 0; k < instr.operand_count(); ++k)
        if (f.operand_dims[k] >= 0) s.operands[k][f.operand_dims[k]].push_back(a);
    }
    if (s.label.empty()) s.label = "replicated";
    Cost(instr, &s, tiles);
    if (!partial.empty()) {
      const double n = static_cast<double>(AxisProduct(partial, mesh));
      s.comm_seconds += machine_.CollectiveSeconds(
          "all-reduce", AxesName(partial, mesh),
          2 * (n - 1) / n * static_cast<double>(s.result_bytes));
    }
    return s;
  }

  // Compute and memory time of `instr` under strategy `s` (its result and
  // operand mappings set), the work split over `tiles` devices.
  void Cost(const Instruction& instr, NodeStrategy* s, int64_t tiles) const {
    const Mesh& mesh = space_.mesh;
    s->result_bytes = instr.shape().IsArray() ? LocalBytes(instr.shape(), s->result, mesh)
                                              : instr.shape().ByteSize();
    s->compute_seconds =
        InstructionFlops(instr) / static_cast<double>(tiles) / machine_.flops_per_second;
    if (MovesNoBytes(instr.opcode())) return;
    double bytes = static_cast<double>(s->result_bytes);
    for (int k = 0; k < instr.operand_count(); ++k) {
      const Instruction* o = instr.operand(k);
      const bool mapped = o->shape().IsArray() && static_cast<int64_t>(s->operands[k].size()) ==
                                                      o->shape().rank();
      const double b = mapped ? static_cast<double>(LocalBytes(o->shape(), s->operands[k], mesh))
                              : static_cast<double>(o->shape().ByteSize());
      bytes += b;
      // A free source is built where it is read, in the sharding read: the
      // first reader pays its traffic, split like its read.
      if (k < static_cast<int>(charge_.size()) && charge_[k]) {
        const double full = static_cast<double>(o->shape().ByteSize());
        bytes += full > 0 ? free_bytes_.at(o) * b / full : 0;
      }
    }
    s->memory_seconds = bytes / machine_.memory_bytes_per_second;
  }

  // Adds `node`, in a linked class when `link` and a structurally equal
  // instruction came before, else in a class of its own.
  void Add(GraphNode node, bool link) {
    const int id = static_cast<int>(graph_.nodes.size());
    if (node.cls < 0) {
      std::string key;
      if (link && options_.link_layers) {
        const Instruction& i = *node.instr;
        key = DigitFreePattern(i.name()) + "|" + std::string(OpcodeName(i.opcode())) + "|" +
              i.shape().ToString(false) + "|" + std::to_string(node.strategies.size()) + "|" +
              RuleToString(GetOpShardingRule(i));
        for (const Instruction* o : i.operands())
          key += "|" + DigitFreePattern(o->name()) + ":" + o->shape().ToString(false);
      }
      auto it = key.empty() ? linked_.end() : linked_.find(key);
      if (it != linked_.end()) {
        node.cls = it->second;
      } else {
        node.cls = static_cast<int>(graph_.classes.size());
        StrategyClass c;
        c.label = link && options_.link_layers ? DigitFreePattern(node.instr->name())
                                               : node.instr->name();
        c.num_strategies = static_cast<int>(node.strategies.size());
        graph_.classes.push_back(c);
        if (!key.empty()) linked_.emplace(key, node.cls);
      }
    }
    graph_.classes[node.cls].nodes.push_back(id);
    graph_.node_of[node.instr] = id;
    graph_.nodes.push_back(std::move(node));
  }

  const Module& module_;
  const DecisionSpace& space_;
  const MachineModel& machine_;
  const StrategyGraphOptions& options_;
  StrategyGraph graph_;
  std::set<const Instruction*> free_;
  // Traffic of each free source (with the free values only it reads), which
  // free sources have been paid for, and which operands the node being built
  // pays for.
  std::map<const Instruction*, double> free_bytes_;
  std::set<const Instruction*> charged_;
  std::vector<bool> charge_;
  std::map<int, int> group_class_;
  std::map<std::string, int> linked_;
};

}  // namespace

int64_t LocalBytes(const Shape& shape, const DimsMapping& mapping, const Mesh& mesh) {
  if (!shape.IsArray()) return shape.ByteSize();
  int64_t elems = 1;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    const int64_t n = d < static_cast<int64_t>(mapping.size()) ? AxisProduct(mapping[d], mesh) : 1;
    elems *= (shape.dimensions(d) + n - 1) / n;
  }
  return elems * ByteWidth(shape.element_type());
}

double EstimateReshardSeconds(const Shape& shape, const DimsMapping& from,
                              const DimsMapping& to, const Mesh& mesh,
                              const MachineModel& machine) {
  if (!shape.IsArray() || shape.rank() == 0 || from == to) return 0;
  auto sharding = [&](DimsMapping m) {
    m.resize(shape.rank());
    return TileOverMeshAxes(mesh.devices(), m);
  };
  const spmd::ReshardPlan plan =
      spmd::PlanReshard(shape, sharding(from), sharding(to), mesh.num_devices(), &mesh);
  if (!plan.possible) return kNoReshardPath;
  double seconds = 0;
  for (const CollectiveCost& c : plan.collectives)
    seconds += machine.CollectiveSeconds(c.kind, c.mesh_axes, c.wire_bytes);
  return seconds;
}

StatusOr<StrategyGraph> BuildStrategyGraph(const Module& module, const DecisionSpace& space,
                                           const MachineModel& machine,
                                           const StrategyGraphOptions& options) {
  return Builder(module, space, machine, options).Build();
}

}  // namespace meshsplit::autoshard
