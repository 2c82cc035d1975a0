// The cost model: one walk over the call graph for FLOPs, bytes and
// collectives (loop bodies weighted by their trip counts), and a liveness
// sweep per computation for peak memory. See cost_model.h and docs/report.md.
#include "cost/cost_model.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/opcode.h"
#include "ir/shape_inference_async.h"
#include "support/small_helpers.h"

namespace meshsplit {
namespace {

int64_t ElementsOf(const Shape& s) {
  if (s.IsTuple()) {
    int64_t n = 0;
    for (const Shape& e : s.tuple_shapes()) n += ElementsOf(e);
    return n;
  }
  return s.IsArray() ? s.ElementCount() : 0;
}

bool IsCollective(Opcode op) {
  return op == Opcode::kAllReduce || op == Opcode::kAllGather ||
         op == Opcode::kReduceScatter || op == Opcode::kAllToAll ||
         op == Opcode::kCollectivePermute ||
         // An async collective counts once, at its start, as its sync op.
         op == Opcode::kAllReduceStart || op == Opcode::kAllGatherStart ||
         op == Opcode::kCollectivePermuteStart;
}

// The done (and async-update) halves of async pairs name the buffers their
// start made.
bool IsAsyncHalf(Opcode op) {
  return op == Opcode::kAsyncUpdate || op == Opcode::kAsyncDone ||
         op == Opcode::kAllReduceDone || op == Opcode::kAllGatherDone ||
         op == Opcode::kCollectivePermuteDone || op == Opcode::kCopyDone;
}

// Ops that only name (parts of) existing buffers: no traffic, no new memory.
bool IsView(Opcode op) {
  return op == Opcode::kTuple || op == Opcode::kGetTupleElement ||
         op == Opcode::kBitcast || op == Opcode::kWhile ||
         op == Opcode::kOptimizationBarrier || op == Opcode::kDomain || IsAsyncHalf(op);
}

// Transfers and group collectives that move data between devices: a send's
// operand crosses the wire once (recv receives it); collective-broadcast and
// ragged-all-to-all are costed from their operand bytes.
bool IsP2PCollective(Opcode op) {
  return op == Opcode::kSend || op == Opcode::kCollectiveBroadcast ||
         op == Opcode::kRaggedAllToAll;
}

// Values that only name an existing buffer: the -done halves of transfers
// and set-dimension-size (the data is unchanged; only a size is recorded).
bool IsP2PView(Opcode op) {
  return op == Opcode::kSendDone || op == Opcode::kRecvDone ||
         op == Opcode::kSetDimensionSize;
}

// Control ops whose work is in their called computations.
bool IsControl(Opcode op) {
  return op == Opcode::kWhile || op == Opcode::kCall || op == Opcode::kConditional;
}

std::optional<int64_t> ConstantInt(const Instruction* i) {
  // Looks through copies and tuple round trips (the partitioner rebuilds a
  // loop's init tuple from get-tuple-elements of the original one).
  for (int steps = 0; i && steps < 64; ++steps) {
    const Opcode op = i->opcode();
    if (op == Opcode::kCopy || op == Opcode::kConvert || op == Opcode::kReshape ||
        op == Opcode::kBitcast) {
      i = i->operand(0);
    } else if (op == Opcode::kGetTupleElement &&
               i->operand(0)->opcode() == Opcode::kTuple &&
               i->attrs().tuple_index < i->operand(0)->operand_count()) {
      i = i->operand(0)->operand(i->attrs().tuple_index);
    } else {
      break;
    }
  }
  if (!i || i->opcode() != Opcode::kConstant || !i->has_literal()) return std::nullopt;
  const Shape& s = i->shape();
  if (!s.IsArray() || s.ElementCount() != 1) return std::nullopt;
  if (IsFloatingPoint(s.element_type())) return std::nullopt;
  return i->literal().GetInt(0);
}

// The tuple index of the loop state that `i` reads in a computation whose
// parameter 0 is the loop state; nullopt otherwise.
std::optional<int64_t> StateIndex(const Instruction* i) {
  while (i->opcode() == Opcode::kCopy || i->opcode() == Opcode::kConvert)
    i = i->operand(0);
  if (i->opcode() == Opcode::kGetTupleElement &&
      i->operand(0)->opcode() == Opcode::kParameter)
    return i->attrs().tuple_index;
  if (i->opcode() == Opcode::kParameter && !i->shape().IsTuple()) return -1;
  return std::nullopt;
}

ComparisonDirection Flip(ComparisonDirection d) {
  switch (d) {
    case ComparisonDirection::kLt: return ComparisonDirection::kGt;
    case ComparisonDirection::kLe: return ComparisonDirection::kGe;
    case ComparisonDirection::kGt: return ComparisonDirection::kLt;
    case ComparisonDirection::kGe: return ComparisonDirection::kLe;
    default: return d;
  }
}

}  // namespace

double InstructionFlops(const Instruction& instr) {
  const Opcode op = instr.opcode();
  if (op == Opcode::kDot && instr.attrs().dot_dnums) {
    double k = 1;
    const Shape& lhs = instr.operand(0)->shape();
    for (int64_t d : instr.attrs().dot_dnums->lhs_contracting_dimensions)
      k *= static_cast<double>(lhs.dimensions(d));
    return 2.0 * static_cast<double>(ElementsOf(instr.shape())) * k;
  }
  if (op == Opcode::kConvolution && instr.attrs().conv_dnums) {
    const auto& dn = *instr.attrs().conv_dnums;
    const Shape& kernel = instr.operand(1)->shape();
    double per_output = static_cast<double>(
        kernel.dimensions(dn.kernel_input_feature_dimension));
    for (int64_t d : dn.kernel_spatial_dimensions)
      per_output *= static_cast<double>(kernel.dimensions(d));
    return 2.0 * static_cast<double>(ElementsOf(instr.shape())) * per_output;
  }
  // copy moves data and computes nothing.
  if (IsElementwise(op) && op != Opcode::kCopy)
    return static_cast<double>(ElementsOf(instr.shape()));
  if (op == Opcode::kReduce) {
    // Operands: N inputs then N init values.
    int64_t n = instr.operand_count() / 2;
    double total = 0;
    for (int64_t i = 0; i < n; ++i)
      total += static_cast<double>(ElementsOf(instr.operand(i)->shape()));
    return total;
  }
  return 0;
}

int64_t WhileTripCount(const Instruction& w) {
  if (const std::string* bc = w.attrs().FindExtra("backend_config")) {
    size_t p = bc->find("known_trip_count");
    if (p != std::string::npos) {
      size_t n = bc->find("\"n\"", p);
      if (n != std::string::npos) {
        size_t d = bc->find_first_of("0123456789", n + 3);
        if (d != std::string::npos) return std::strtoll(bc->c_str() + d, nullptr, 10);
      }
    }
  }
  if (w.called_computations().size() < 2) return -1;
  const Instruction* root = w.while_condition()->root();
  if (!root || root->opcode() != Opcode::kCompare ||
      !root->attrs().comparison_direction)
    return -1;
  ComparisonDirection dir = *root->attrs().comparison_direction;
  std::optional<int64_t> index = StateIndex(root->operand(0));
  std::optional<int64_t> limit = ConstantInt(root->operand(1));
  if (!index || !limit) {
    index = StateIndex(root->operand(1));
    limit = ConstantInt(root->operand(0));
    dir = Flip(dir);
  }
  if (!index || !limit) return -1;
  // Initial value.
  const Instruction* init = w.operand(0);
  std::optional<int64_t> start;
  if (*index >= 0) {
    if (init->opcode() != Opcode::kTuple || *index >= init->operand_count()) return -1;
    start = ConstantInt(init->operand(*index));
  } else {
    start = ConstantInt(init);
  }
  if (!start) return -1;
  // Step: body root element = add(state[index], constant).
  const Instruction* next = w.while_body()->root();
  if (*index >= 0) {
    if (next->opcode() != Opcode::kTuple || *index >= next->operand_count()) return -1;
    next = next->operand(*index);
  }
  if (next->opcode() != Opcode::kAdd && next->opcode() != Opcode::kSubtract) return -1;
  std::optional<int64_t> step;
  if (StateIndex(next->operand(0)) == index) step = ConstantInt(next->operand(1));
  else if (next->opcode() == Opcode::kAdd && StateIndex(next->operand(1)) == index)
    step = ConstantInt(next->operand(0));
  if (!step || *step == 0) return -1;
  int64_t s = next->opcode() == Opcode::kSubtract ? -*step : *step;
  int64_t a = *start, c = *limit;
  switch (dir) {
    case ComparisonDirection::kLt:
      return s > 0 ? std::max<int64_t>(0, CeilDiv(c - a, s)) : -1;
    case ComparisonDirection::kLe:
      return s > 0 ? std::max<int64_t>(0, (c - a) / s + 1) : -1;
    case ComparisonDirection::kGt:
      return s < 0 ? std::max<int64_t>(0, CeilDiv(a - c, -s)) : -1;
    case ComparisonDirection::kGe:
      return s < 0 ? std::max<int64_t>(0, (a - c) / -s + 1) : -1;
    case ComparisonDirection::kNe:
      return ((c - a) % s == 0 && (c - a) / s >= 0) ? (c - a) / s : -1;
    default:
      return -1;
  }
}

std::string MeshAxesOfGroup(const Mesh& mesh, const std::vector<int64_t>& group) {
  if (group.empty() || mesh.num_axes() == 0) return "";
  std::vector<std::set<int64_t>> coords(mesh.num_axes());
  for (int64_t d : group) {
    auto index = mesh.devices().IndexOfDevice(d);
    if (!index) return "";
    for (int64_t a = 0; a < mesh.num_axes(); ++a) coords[a].insert((*index)[a]);
  }
  std::string out;
  int64_t product = 1;
  for (int64_t a = 0; a < mesh.num_axes(); ++a) {
    if (coords[a].size() <= 1) continue;
    // A whole axis must be spanned for the group to be "along" it.
    if (static_cast<int64_t>(coords[a].size()) != mesh.axes()[a].size) return "";
    product *= mesh.axes()[a].size;
    if (!out.empty()) out += ",";
    out += mesh.axes()[a].name;
  }
  if (product != static_cast<int64_t>(group.size())) return "";
  return out;
}

std::string MeshAxesOfPairs(const Mesh& mesh,
                            const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::vector<bool> moves(mesh.num_axes(), false);
  for (const auto& [source, target] : pairs) {
    auto s = mesh.devices().IndexOfDevice(source);
    auto t = mesh.devices().IndexOfDevice(target);
    if (!s || !t) return "";
    for (int64_t a = 0; a < mesh.num_axes(); ++a)
      if ((*s)[a] != (*t)[a]) moves[a] = true;
  }
  std::string out;
  for (int64_t a = 0; a < mesh.num_axes(); ++a)
    if (moves[a]) out += (out.empty() ? "" : ",") + mesh.axes()[a].name;
  return out;
}

BufferLiveness ComputeBufferLiveness(const Computation& comp, bool is_entry) {
  const auto& instrs = comp.instructions();
  const int64_t n = static_cast<int64_t>(instrs.size());
  BufferLiveness live;
  live.owns.assign(n, false);
  live.start.assign(n, 0);
  live.end.assign(n, -1);
  std::unordered_map<const Instruction*, int64_t> index;
  for (int64_t k = 0; k < n; ++k) index[instrs[k].get()] = k;
  // Buffers each value refers to (views forward their operands').
  std::unordered_map<const Instruction*, std::vector<const Instruction*>> sources;
  for (int64_t k = 0; k < n; ++k) {
    const Instruction* i = instrs[k].get();
    const Opcode op = i->opcode();
    auto& src = sources[i];
    if (op == Opcode::kTuple) {
      for (const Instruction* o : i->operands())
        src.insert(src.end(), sources[o].begin(), sources[o].end());
    } else if (op == Opcode::kGetTupleElement) {
      const Instruction* t = i->operand(0);
      if (t->opcode() == Opcode::kTuple && i->attrs().tuple_index < t->operand_count())
        src = sources[t->operand(i->attrs().tuple_index)];
      else
        src = sources[t];
    } else if ((IsView(op) || IsP2PView(op)) && i->operand_count() > 0) {
      src = sources[i->operand(0)];
    } else {
      src = {i};
      live.owns[k] = true;
      live.start[k] = (op == Opcode::kParameter) ? 0 : k;
      live.end[k] = (op == Opcode::kParameter && is_entry) ? n : k;
    }
  }
  auto extend = [&](const Instruction* v, int64_t until) {
    for (const Instruction* s : sources[v]) {
      int64_t si = index[s];
      live.end[si] = std::max(live.end[si], until);
    }
  };
  for (int64_t k = 0; k < n; ++k)
    for (const Instruction* o : instrs[k]->operands()) extend(o, k);
  if (comp.root()) {
    extend(comp.root(), n);
    for (const Instruction* s : sources[comp.root()]) live.root_buffers.push_back(index[s]);
  }
  return live;
}

namespace {

struct Partial {
  double flops = 0, bytes_read = 0, bytes_written = 0;
  std::vector<CollectiveCost> collectives;
  void Add(const Partial& o, int64_t mult) {
    flops += o.flops * mult;
    bytes_read += o.bytes_read * mult;
    bytes_written += o.bytes_written * mult;
    for (CollectiveCost c : o.collectives) {
      c.count *= mult;
      collectives.push_back(std::move(c));
    }
  }
};

class CostWalker {
 public:
  CostWalker(const Module& m, const CostOptions& o, ModuleCost* out)
      : module_(m), options_(o), out_(out) {}

  Partial Visit(const Computation* comp) {
    auto it = partial_cache_.find(comp);
    if (it != partial_cache_.end()) return it->second;
    Partial p;
    for (const auto& owned : comp->instructions()) {
      const Instruction* i = owned.get();
      const Opcode op = i->opcode();
      if (op == Opcode::kWhile) {
        int64_t trips = WhileTripCount(*i);
        if (trips < 0) {
          out_->notes.push_back("while " + i->name() +
                                ": trip count not derivable, body counted once");
          trips = 1;
        }
        Partial body = Visit(i->while_body());
        body.Add(Visit(i->while_condition()), 1);
        p.Add(body, trips);
        // The condition runs once more than the body.
        p.Add(Visit(i->while_condition()), 1);
        continue;
      }
      if (op == Opcode::kCall || op == Opcode::kAsyncStart) {
        for (const Computation* c : i->called_computations()) p.Add(Visit(c), 1);
        continue;
      }
      if (op == Opcode::kFusion) {
        // The fused computation's work; its intermediate values stay on
        // chip, so only the fusion's own operands and result count as
        // traffic (below).
        for (const Computation* c : i->called_computations()) {
          Partial inner = Visit(c);
          p.flops += inner.flops;
          for (CollectiveCost& cc : inner.collectives) p.collectives.push_back(std::move(cc));
        }
      }
      if (op == Opcode::kConditional) {
        // The most expensive branch (by FLOPs) is taken.
        Partial best;
        bool first = true;
        for (const Computation* c : i->called_computations()) {
          Partial b = Visit(c);
          if (first || b.flops > best.flops) best = b;
          first = false;
        }
        p.Add(best, 1);
        continue;
      }
      p.flops += InstructionFlops(*i);
      if (!IsView(op) && !IsP2PView(op) && op != Opcode::kParameter &&
          op != Opcode::kConstant) {
        for (const Instruction* o : i->operands()) p.bytes_read += o->shape().ByteSize();
        p.bytes_written += i->shape().ByteSize();
      }
      if (IsCollective(op) || IsP2PCollective(op)) p.collectives.push_back(Collective(*i, comp));
    }
    partial_cache_[comp] = p;
    return p;
  }

  // Peak bytes of the values a computation creates (its parameters belong to
  // the caller, except for the entry whose parameters live throughout).
  int64_t Peak(const Computation* comp, bool is_entry,
               std::vector<MemoryHolder>* holders) {
    if (!is_entry) {
      auto it = peak_cache_.find(comp);
      if (it != peak_cache_.end()) return it->second;
    }
    const auto& instrs = comp->instructions();
    const int64_t n = static_cast<int64_t>(instrs.size());
    const BufferLiveness ranges = ComputeBufferLiveness(*comp, is_entry);
    const std::vector<int64_t>& start = ranges.start;
    const std::vector<int64_t>& end = ranges.end;
    std::vector<int64_t> size(n, 0), transient(n, 0);
    for (int64_t k = 0; k < n; ++k) {
      const Instruction* i = instrs[k].get();
      const Opcode op = i->opcode();
      if (ranges.owns[k] && (op != Opcode::kParameter || is_entry))
        size[k] = i->shape().ByteSize();
      if (IsControl(op)) {
        int64_t t = 0;
        for (const Computation* c : i->called_computations())
          t = std::max(t, Peak(c, false, nullptr));
        transient[k] = t;
      }
    }
    std::vector<int64_t> delta(n + 2, 0);
    for (int64_t k = 0; k < n; ++k) {
      if (size[k] == 0) continue;
      delta[start[k]] += size[k];
      delta[std::min(end[k], n) + 1] -= size[k];
    }
    int64_t live = 0, peak = 0, peak_at = -1;
    for (int64_t k = 0; k < n; ++k) {
      live += delta[k];
      if (live + transient[k] > peak) {
        peak = live + transient[k];
        peak_at = k;
      }
    }
    if (holders && peak_at >= 0) {
      // The buffers the root returns (a parameter returned as is stays a
      // parameter).
      std::unordered_set<const Instruction*> outputs;
      for (int64_t k : ranges.root_buffers) outputs.insert(instrs[k].get());
      for (int64_t k = 0; k < n; ++k) {
        if (size[k] == 0 || start[k] > peak_at || end[k] < peak_at) continue;
        const Instruction* i = instrs[k].get();
        const bool param = i->opcode() == Opcode::kParameter;
        holders->push_back({i->name(), i->shape().ToString(false), size[k], param,
                            !param && outputs.count(i) > 0});
      }
      if (transient[peak_at] > 0)
        holders->push_back({instrs[peak_at]->name() + " (inside)", "",
                            transient[peak_at], false});
      std::stable_sort(holders->begin(), holders->end(),
                       [](const MemoryHolder& a, const MemoryHolder& b) {
                         return a.bytes > b.bytes;
                       });
    }
    if (!is_entry) peak_cache_[comp] = peak;
    return peak;
  }

 private:
  CollectiveCost Collective(const Instruction& i, const Computation* comp) {
    CollectiveCost c = CostOfCollective(i, module_.num_partitions(), options_.mesh);
    c.computation = comp->name();
    return c;
  }

  const Module& module_;
  const CostOptions& options_;
  ModuleCost* out_;
  std::unordered_map<const Computation*, Partial> partial_cache_;
  std::unordered_map<const Computation*, int64_t> peak_cache_;
};

}  // namespace

double CollectiveWireBytes(Opcode op, int64_t group_size, double operand_bytes,
                           double result_bytes) {
  const double n = static_cast<double>(std::max<int64_t>(group_size, 1));
  switch (op) {
    case Opcode::kAllReduce: return 2 * (n - 1) / n * operand_bytes;
    case Opcode::kAllGather: return (n - 1) / n * result_bytes;
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll: return (n - 1) / n * operand_bytes;
    default: return operand_bytes;
  }
}

CollectiveCost CostOfCollective(const Instruction& i, int64_t num_partitions, const Mesh* mesh) {
  CollectiveCost c;
  c.instr = &i;
  const Opcode sync = SyncCollectiveOf(i.opcode());  // a start as its sync op
  c.kind = std::string(OpcodeName(sync));
  c.instruction = i.name();
  for (const Instruction* o : i.operands()) c.operand_bytes += o->shape().ByteSize();
  c.result_bytes = DeclaredStartResult(i).ByteSize();
  std::vector<int64_t> first_group;
  if (sync == Opcode::kCollectivePermute) {
    c.group_size = static_cast<int64_t>(i.attrs().source_target_pairs.size());
    if (mesh && mesh->num_devices() == num_partitions)
      c.mesh_axes = MeshAxesOfPairs(*mesh, i.attrs().source_target_pairs);
  } else {
    const auto& rg = i.attrs().replica_groups;
    if (!rg || rg->empty()) {
      c.group_size = num_partitions;
      // The group only names mesh axes; bounded as the iota case below.
      if (mesh && c.group_size <= (int64_t{1} << 16))
        for (int64_t d = 0; d < c.group_size; ++d) first_group.push_back(d);
    } else if (rg->is_iota) {
      c.group_size = rg->group_dims.size() == 2 ? rg->group_dims[1] : 1;
      // Expand() is O(devices): past 2^16 devices the collective is costed
      // without naming its mesh axes (a mesh axis mutated to 2^40 made the
      // expansion throw std::bad_alloc).
      int64_t devices = 1;
      bool small = true;
      for (int64_t d : rg->reshape_dims)
        small = small && !__builtin_mul_overflow(devices, d, &devices) &&
                devices <= (int64_t{1} << 16);
      if (mesh && small) {
        auto all = rg->Expand();
        if (!all.empty()) first_group = all[0];
      }
    } else {
      c.group_size = static_cast<int64_t>(rg->groups[0].size());
      first_group = rg->groups[0];
    }
  }
  c.wire_bytes = CollectiveWireBytes(sync, c.group_size, static_cast<double>(c.operand_bytes),
                                     static_cast<double>(c.result_bytes));
  if (mesh && mesh->num_devices() == num_partitions && !first_group.empty())
    c.mesh_axes = MeshAxesOfGroup(*mesh, first_group);
  return c;
}

ModuleCost ComputeModuleCost(const Module& module, const CostOptions& options) {
  ModuleCost out;
  out.num_partitions = module.num_partitions();
  const Computation* entry = module.entry();
  if (!entry) return out;
  CostWalker walker(module, options, &out);
  Partial p = walker.Visit(entry);
  out.flops = p.flops;
  out.bytes_read = p.bytes_read;
  out.bytes_written = p.bytes_written;
  out.collectives = std::move(p.collectives);
  for (const CollectiveCost& c : out.collectives) {
    out.wire_bytes_by_kind[c.kind] += c.wire_bytes * c.count;
    if (!c.mesh_axes.empty()) out.wire_bytes_by_axis[c.mesh_axes] += c.wire_bytes * c.count;
  }
  for (const Instruction* param : entry->parameters())
    out.parameter_bytes += param->shape().ByteSize();
  if (entry->root()) out.output_bytes = entry->root()->shape().ByteSize();
  out.peak_memory_bytes = walker.Peak(entry, true, &out.live_at_peak);
  std::sort(out.notes.begin(), out.notes.end());
  out.notes.erase(std::unique(out.notes.begin(), out.notes.end()), out.notes.end());
  return out;
}

}  // namespace meshsplit
