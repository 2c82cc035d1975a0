// The collective checker (collective_check.h). It reads only the partitioned
// program, the causes the partitioner recorded on each collective, and the
// original module's shardings; it shares no code with the partitioner's
// group construction (Sharding::GroupsAlongDims), so a wrong group there is
// not reproduced here.
#include "compiler/collective_check.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "ir/attribute_text.h"
#include "ir/opcode.h"
#include "sharding/sharding.h"

namespace meshsplit {
namespace {

// Above this many devices in one collective's groups the checker does not
// expand them (the partition count bounds a valid program's groups anyway).
constexpr int64_t kMaxExpandedDevices = int64_t{1} << 20;

std::string GroupText(const std::vector<int64_t>& g) {
  std::string s = "{";
  for (size_t i = 0; i < g.size() && i < 16; ++i) s += (i ? "," : "") + std::to_string(g[i]);
  if (g.size() > 16) s += ",...";
  return s + "}";
}

bool HasGroups(Opcode op) {
  switch (op) {
    case Opcode::kAllReduce:
    case Opcode::kAllReduceStart:
    case Opcode::kAllGather:
    case Opcode::kAllGatherStart:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
      return true;
    default:
      return false;
  }
}

bool HasPairs(Opcode op) {
  return op == Opcode::kCollectivePermute || op == Opcode::kCollectivePermuteStart;
}

// Collectives whose group order is the order of the pieces in the result.
bool Ordered(Opcode op) {
  return op == Opcode::kAllGather || op == Opcode::kAllGatherStart ||
         op == Opcode::kReduceScatter || op == Opcode::kAllToAll;
}

// The reducer's root opcode, when the reducer is a scalar binary op.
std::optional<Opcode> ReducerOp(const Instruction& c) {
  if (c.called_computations().empty()) return std::nullopt;
  const Instruction* root = c.called_computations()[0]->root();
  if (root == nullptr) return std::nullopt;
  return root->opcode();
}

bool Idempotent(Opcode op) {
  return op == Opcode::kMinimum || op == Opcode::kMaximum || op == Opcode::kAnd ||
         op == Opcode::kOr;
}

// A tiled sharding over the N devices, indexed for the group rules.
struct Candidate {
  std::string text;
  std::vector<int64_t> piece_dims;  // tile-assignment dims that tell pieces apart
  int64_t manual_dim = -1;
  std::vector<int64_t> tile_counts;          // per tile-assignment dim
  std::vector<std::vector<int64_t>> index;   // device -> tile-assignment index
};

std::optional<Candidate> MakeCandidate(const Sharding& s, int64_t n) {
  if (s.IsUnreduced()) {
    // Every device holds its own summand of the whole value.
    Candidate c;
    c.text = s.ToString(false);
    c.piece_dims = {0};
    c.tile_counts = {n};
    c.index.resize(n);
    for (int64_t d = 0; d < n; ++d) c.index[d] = {d};
    return c;
  }
  if (!s.IsTiled()) return std::nullopt;
  const TileAssignment& ta = s.tile_assignment();
  if (ta.num_devices() != n) return std::nullopt;
  Candidate c;
  c.text = s.ToString(false);
  c.tile_counts = ta.dims();
  const int64_t data = s.TiledDataRank();
  for (int64_t d = 0; d < data; ++d) c.piece_dims.push_back(d);
  const int64_t u = s.SubgroupDim(SubgroupType::kUnreduced);
  if (u >= 0) c.piece_dims.push_back(u);
  c.manual_dim = s.SubgroupDim(SubgroupType::kManual);
  std::vector<int64_t> devices = ta.Devices();
  c.index.assign(n, {});
  const int64_t rank = ta.num_dimensions();
  for (int64_t flat = 0; flat < static_cast<int64_t>(devices.size()); ++flat) {
    const int64_t dev = devices[flat];
    if (dev < 0 || dev >= n || !c.index[dev].empty()) return std::nullopt;
    std::vector<int64_t> idx(rank);
    int64_t rest = flat;
    for (int64_t d = rank - 1; d >= 0; --d) {
      idx[d] = rest % c.tile_counts[d];
      rest /= c.tile_counts[d];
    }
    c.index[dev] = std::move(idx);
  }
  return c;
}

// Why the groups disagree with `c` ("" when they agree).
std::string Disagreement(const Candidate& c, const std::vector<std::vector<int64_t>>& groups,
                         bool distinct, bool ordered) {
  std::optional<std::vector<int64_t>> common_d;
  for (const std::vector<int64_t>& g : groups) {
    if (g.size() < 2) continue;
    for (int64_t dev : g)
      if (dev < 0 || dev >= static_cast<int64_t>(c.index.size()) || c.index[dev].empty())
        return "device " + std::to_string(dev) + " is not in the sharding";
    const std::vector<int64_t>& first = c.index[g[0]];
    if (c.manual_dim >= 0)
      for (int64_t dev : g)
        if (c.index[dev][c.manual_dim] != first[c.manual_dim])
          return "group " + GroupText(g) + " crosses manual subgroups";
    std::vector<int64_t> d;
    for (int64_t p : c.piece_dims)
      for (int64_t dev : g)
        if (c.index[dev][p] != first[p]) {
          d.push_back(p);
          break;
        }
    if (common_d && *common_d != d)
      return "groups differ along different tile dims";
    common_d = d;
    if (distinct) {
      std::set<std::vector<int64_t>> seen;
      for (int64_t dev : g) {
        std::vector<int64_t> key;
        for (int64_t p : d) key.push_back(c.index[dev][p]);
        if (!seen.insert(key).second)
          return "group " + GroupText(g) + " holds device " + std::to_string(dev) +
                 "'s piece twice";
      }
    }
    if (ordered && d.size() == 1) {
      for (size_t i = 1; i < g.size(); ++i)
        if (c.index[g[i]][d[0]] <= c.index[g[i - 1]][d[0]])
          return "group " + GroupText(g) + " is not in tile order along tile dim " +
                 std::to_string(d[0]);
    }
  }
  return "";
}

using Pairs = FrontendAttributePairs;

const std::string* Lookup(const Pairs& pairs, const char* key) {
  for (const auto& kv : pairs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void AddSharding(const Sharding& s, std::vector<Sharding>& out) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements()) AddSharding(e, out);
    return;
  }
  if ((s.IsTiled() || s.IsUnreduced()) && std::find(out.begin(), out.end(), s) == out.end())
    out.push_back(s);
}

class Checker {
 public:
  Checker(const Module* original, int64_t n) : n_(n) {
    if (original != nullptr)
      for (const auto& c : original->computations())
        for (const auto& i : c->instructions()) by_name_.emplace(i->name(), i.get());
  }

  void Check(const Computation& comp, const Instruction& c, CollectiveCheckResult& out) {
    ++out.collectives;
    Context ctx = ContextOf(comp, c);
    auto fail = [&](const std::string& why) {
      out.problems.push_back(Status::Error(ctx.what + ": " + why, ctx.loc));
    };
    const Attributes& a = c.attrs();
    const bool partition_mode = a.channel_id.has_value() || a.use_global_device_ids;
    if (!partition_mode) return;  // replica ids: not this program's devices
    if (HasPairs(c.opcode())) {
      std::set<int64_t> sources, targets;
      for (const auto& [s, t] : a.source_target_pairs) {
        if (s < 0 || s >= n_ || t < 0 || t >= n_)
          return fail("pair {" + std::to_string(s) + "," + std::to_string(t) +
                      "} names a device outside [0, " + std::to_string(n_) + ")");
        if (!sources.insert(s).second)
          return fail("device " + std::to_string(s) + " is the source of two pairs");
        if (!targets.insert(t).second)
          return fail("device " + std::to_string(t) + " is the target of two pairs");
      }
      return;
    }
    if (!HasGroups(c.opcode())) return;
    std::vector<std::vector<int64_t>> groups;
    if (!a.replica_groups || a.replica_groups->empty()) {
      groups.emplace_back(n_);
      for (int64_t i = 0; i < n_; ++i) groups[0][i] = i;
    } else {
      const ReplicaGroups& rg = *a.replica_groups;
      if (rg.is_iota) {
        int64_t total = 1;
        for (int64_t d : rg.group_dims) total *= std::max<int64_t>(d, 0);
        if (total != n_)
          return fail("replica groups " + std::to_string(rg.group_dims.size() == 2
                                                              ? rg.group_dims[0] : 0) +
                      "x" + std::to_string(rg.group_dims.size() == 2 ? rg.group_dims[1] : 0) +
                      " name " + std::to_string(total) + " devices, the program has " +
                      std::to_string(n_));
        if (total > kMaxExpandedDevices) return;
      }
      groups = rg.Expand();
    }
    std::vector<int64_t> count(n_, 0);
    for (const auto& g : groups) {
      if (g.size() != groups[0].size())
        return fail("replica groups of different sizes (" + std::to_string(groups[0].size()) +
                    " and " + std::to_string(g.size()) + ")");
      for (int64_t d : g) {
        if (d < 0 || d >= n_)
          return fail("device " + std::to_string(d) + " is outside [0, " + std::to_string(n_) +
                      ")");
        if (++count[d] > 1) return fail("device " + std::to_string(d) + " is in two groups");
      }
    }
    for (int64_t d = 0; d < n_; ++d)
      if (count[d] == 0) return fail("device " + std::to_string(d) + " is in no replica group");
    const int64_t size = static_cast<int64_t>(groups[0].size());
    if (!CheckDims(c, size, fail)) return;
    if (size == 1 || ctx.candidates.empty()) return;
    std::optional<Opcode> reducer = ReducerOp(c);
    const bool distinct = !(reducer && Idempotent(*reducer));
    std::string why;
    bool crosses_manual = false;
    for (const Sharding& s : ctx.candidates) {
      std::optional<Candidate> cand = MakeCandidate(s, n_);
      if (!cand) continue;
      std::string w = Disagreement(*cand, groups, distinct, Ordered(c.opcode()));
      if (w.find("crosses manual subgroups") != std::string::npos) crosses_manual = true;
      if (w.empty()) {
        ++out.checked;
        return;
      }
      why += (why.empty() ? "" : "; ") + cand->text + ": " + w;
    }
    if (why.empty()) return;  // no candidate over these devices
    // Unchecked (see ContextOf): layouts the recorded causes do not name.
    const bool reduction = reducer.has_value();
    if ((!ctx.reshard || (ctx.through_partial_sums && !reduction)) && !crosses_manual) return;
    ++out.checked;
    fail("replica groups " + GroupText(groups[0]) + (groups.size() > 1 ? ",..." : "") +
         " agree with no sharding of the values it serves (" + why + ")");
  }

 private:
  struct Context {
    std::string what;
    SourceLoc loc;
    std::vector<Sharding> candidates;
    bool through_partial_sums = false;
    // A reshard (Reshard, the one entry point) recorded the collective's
    // source and target. Collectives an op rule emits by itself (a halo
    // exchange's gather, a gather's sum of masked pieces) use groups of the
    // operand layouts the rule chose, which only partly coincide with the
    // input's shardings: a disagreement there is not an error.
    bool reshard = false;
  };

  Context ContextOf(const Computation& comp, const Instruction& c) {
    Context ctx;
    ctx.what = std::string(OpcodeName(c.opcode())) + " %" + c.name() + " (in %" + comp.name();
    const std::string* text = c.attrs().FindExtra("frontend_attributes");
    Pairs attrs;
    if (text != nullptr) attrs = ParseFrontendAttributes(*text).value_or(Pairs{});
    if (const std::string* instr = Lookup(attrs, "ms_instr")) {
      ctx.what += ", for %" + *instr;
      auto it = by_name_.find(*instr);
      if (it != by_name_.end()) {
        const Instruction* orig = it->second;
        ctx.loc = orig->loc();
        if (orig->has_sharding()) AddSharding(*orig->sharding(), ctx.candidates);
        for (const Instruction* op : orig->operands())
          if (op->has_sharding()) AddSharding(*op->sharding(), ctx.candidates);
      }
    }
    if (Lookup(attrs, "ms_instr") == nullptr) {
      // Not emitted by the partitioner: the input's own collective (manual
      // code), which keeps its name.
      auto it = by_name_.find(c.name());
      if (it != by_name_.end() && it->second->opcode() == c.opcode()) ctx.loc = it->second->loc();
    }
    if (const std::string* r = Lookup(attrs, "ms_reshard")) {
      ctx.what += ", reshard " + *r;
      ctx.reshard = true;
      size_t arrow = r->find(" -> ");  // sharding text never contains " -> "
      if (arrow != std::string::npos) {
        StatusOr<Sharding> from = Sharding::Parse(r->substr(0, arrow));
        StatusOr<Sharding> to = Sharding::Parse(r->substr(arrow + 4));
        // Partial sums are resolved by the mesh-axis planner through
        // layouts the recorded pair does not name (the unreduced axis
        // scattered onto a data dim, then gathered): only the structural
        // and manual-subgroup rules hold for sure there.
        for (const StatusOr<Sharding>* s : {&from, &to})
          if (s->ok() && ((*s)->IsUnreduced() || (*s)->SubgroupDim(SubgroupType::kUnreduced) >= 0))
            ctx.through_partial_sums = true;
        if (from.ok()) AddSharding(*from, ctx.candidates);
        if (to.ok()) AddSharding(*to, ctx.candidates);
        // A reshard between unrelated device orders may first move every
        // tile onto the target's devices in the source's layout (or lay the
        // value out as the target on the source's devices, then move it):
        // the collectives in between serve those layouts.
        if (from.ok() && to.ok() && from->IsTiled() && to->IsTiled() &&
            from->tile_assignment().num_devices() == to->tile_assignment().num_devices()) {
          AddSharding(Sharding::Subgroup(
                          to->tile_assignment().Reshape(from->tile_assignment().dims()),
                          from->subgroup_types()),
                      ctx.candidates);
          AddSharding(Sharding::Subgroup(
                          from->tile_assignment().Reshape(to->tile_assignment().dims()),
                          to->subgroup_types()),
                      ctx.candidates);
        }
      }
    }
    ctx.what += ")";
    return ctx;
  }

  template <typename Fail>
  bool CheckDims(const Instruction& c, int64_t size, Fail&& fail) {
    if (c.operand_count() != 1 || !c.operand(0)->shape().IsArray() || !c.shape().IsArray())
      return true;
    const Attributes& a = c.attrs();
    if (a.dimensions.size() != 1) return true;
    const int64_t d = a.dimensions[0];
    const Shape& in = c.operand(0)->shape();
    const Shape& res = c.shape();
    if (d < 0 || d >= in.rank() || d >= res.rank()) return true;  // the IR verifier's
    auto bad = [&](const std::string& what) {
      fail(what + " along dim " + std::to_string(d) + " does not match groups of " +
           std::to_string(size));
      return false;
    };
    if (c.opcode() == Opcode::kAllGather && res.dimensions(d) != in.dimensions(d) * size)
      return bad("result " + res.ToString(false) + " of operand " + in.ToString(false));
    if (c.opcode() == Opcode::kReduceScatter && in.dimensions(d) != res.dimensions(d) * size)
      return bad("result " + res.ToString(false) + " of operand " + in.ToString(false));
    if (c.opcode() == Opcode::kAllToAll && in.dimensions(d) % size != 0)
      return bad("operand " + in.ToString(false));
    return true;
  }

  int64_t n_;
  std::unordered_map<std::string, const Instruction*> by_name_;
};

}  // namespace

Status CollectiveCheckResult::ToStatus() const {
  if (problems.empty()) return Status::Ok();
  std::string msg = "collective check: " + std::to_string(problems.size()) +
                    " collective(s) disagree with the shardings";
  for (const Status& p : problems) msg += "\n  " + p.message();
  return Status::Error(msg, problems[0].loc());
}

CollectiveCheckResult CheckCollectives(const Module& partitioned, const Module* original,
                                       int64_t num_partitions) {
  CollectiveCheckResult out;
  Checker checker(original, num_partitions);
  for (const auto& comp : partitioned.computations())
    for (const auto& instr : comp->instructions())
      if (GetOpcodeFamily(instr->opcode()) == OpcodeFamily::kCollective)
        checker.Check(*comp, *instr, out);
  return out;
}

}  // namespace meshsplit
