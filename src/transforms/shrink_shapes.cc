// Shape shrinking (see shrink_shapes.h), the driver: build the dim classes,
// pick a size per class, rewrite shapes and size attributes, check every
// instruction with shape inference, and retry with the offending
// instruction's dims frozen when the check fails.
#include "transforms/shrink_shapes.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ir/computation.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "transforms/shrink_shapes_graph.h"

namespace meshsplit {
namespace {

using shrink_internal::DimGraph;

// Adds the tile counts of `s` (laid over `target`'s leaves) to the classes
// of the dims they cut.
void AddShardingTiles(const Instruction* target, const Sharding& s, DimGraph& g) {
  for (int leaf = 0; leaf < g.LeafCount(target); ++leaf) {
    const Sharding* ls = &s;
    if (s.IsTuple()) {
      if (leaf >= static_cast<int>(s.tuple_elements().size())) return;
      ls = &s.tuple_elements()[leaf];
    }
    if (!ls->IsTiled()) continue;
    int64_t rank = std::min<int64_t>(g.LeafRank(target, leaf), ls->TiledDataRank());
    for (int64_t d = 0; d < rank; ++d) g.AddTiles(g.Node(target, leaf, d), ls->TileDim(d));
  }
}

void AddAllShardingTiles(const Module& module, const Module* source, DimGraph& g) {
  std::unordered_map<std::string, const Instruction*> by_name;
  if (source != nullptr)
    for (const auto& c : source->computations())
      for (const auto& i : c->instructions()) by_name[i->name()] = i.get();
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions()) {
      if (i->has_sharding()) AddShardingTiles(i.get(), *i->sharding(), g);
      auto it = by_name.find(i->name());
      if (it != by_name.end() && it->second->has_sharding() &&
          it->second->shape().Compatible(i->shape()))
        AddShardingTiles(i.get(), *it->second->sharding(), g);
    }
}

// The new size of a class of original size `size`: congruent to it modulo
// the lcm of its tile counts (so every split keeps its remainder), with at
// least two rounds of tiles when there were, and at least `want`.
int64_t NewSize(int64_t size, int64_t lcm, int64_t want) {
  if (lcm > size) return size;
  int64_t rem = size % lcm, rounds = size / lcm;
  int64_t q = std::min<int64_t>(rounds, 2);
  if (rem + lcm * q < want) q = std::min(rounds, (want - rem + lcm - 1) / lcm);
  return rem + lcm * q;
}

// Rebuilds `shape` with each array leaf's dims taken from the node sizes.
void ResizeLeaves(Shape& shape, const Instruction* instr, DimGraph& g,
                  const std::vector<int64_t>& node_size, int& leaf) {
  if (shape.IsTuple()) {
    for (Shape& e : shape.mutable_tuple_shapes()) ResizeLeaves(e, instr, g, node_size, leaf);
    return;
  }
  if (shape.IsArray())
    for (int d = 0; d < shape.rank(); ++d)
      shape.mutable_dimensions()[d] = node_size[g.Find(g.Node(instr, leaf, d))];
  ++leaf;
}

// Moves the attributes that spell sizes along with the new shapes. Only
// the relations shrink_shapes_rules.cc lets change are handled: whole-dim
// slices, dynamic slices and gather windows, and windows that are 1 wide,
// cover their input, or pad a size-1 input to a full correlation.
void AdjustAttributes(Instruction& instr,
                      const std::unordered_map<const Instruction*, Shape>& old_shapes) {
  Attributes& a = instr.mutable_attrs();
  if (instr.operand_count() == 0) return;
  const Instruction* op0 = instr.operand(0);
  const Shape& old0 = old_shapes.at(op0);
  const Shape& new0 = op0->shape();
  if (!old0.IsArray() || !new0.IsArray()) return;
  auto old_dim = [&](size_t d) { return old0.dimensions(static_cast<int>(d)); };
  auto new_dim = [&](size_t d) { return new0.dimensions(static_cast<int>(d)); };
  switch (instr.opcode()) {
    case Opcode::kSlice:
      for (size_t d = 0; d < a.slice.size() && d < new0.dimensions().size(); ++d)
        if (a.slice[d].start == 0 && a.slice[d].stride == 1 && a.slice[d].limit == old_dim(d))
          a.slice[d].limit = new_dim(d);
      return;
    case Opcode::kDynamicSlice:
      for (size_t d = 0; d < a.dynamic_slice_sizes.size() && d < new0.dimensions().size(); ++d)
        if (a.dynamic_slice_sizes[d] == old_dim(d)) a.dynamic_slice_sizes[d] = new_dim(d);
      return;
    case Opcode::kGather:
      for (size_t d = 0; d < a.gather_slice_sizes.size() && d < new0.dimensions().size(); ++d)
        if (a.gather_slice_sizes[d] == old_dim(d)) a.gather_slice_sizes[d] = new_dim(d);
      return;
    case Opcode::kReduceWindow:
    case Opcode::kSelectAndScatter:
      if (!a.window) return;
      for (size_t d = 0; d < a.window->size() && d < new0.dimensions().size(); ++d) {
        WindowDimension& w = (*a.window)[d];
        if (w.size == old_dim(d) && w.size > 1) w.size = new_dim(d);
      }
      return;
    case Opcode::kConvolution: {
      if (!a.window || !a.conv_dnums || instr.operand_count() < 2) return;
      const Shape& old_k = old_shapes.at(instr.operand(1));
      const Shape& new_k = instr.operand(1)->shape();
      const auto& ks = a.conv_dnums->kernel_spatial_dimensions;
      for (size_t s = 0; s < a.window->size() && s < ks.size(); ++s) {
        int64_t k = old_k.dimensions(static_cast<int>(ks[s]));
        int64_t nk = new_k.dimensions(static_cast<int>(ks[s]));
        if (k == nk) continue;
        WindowDimension& w = (*a.window)[s];
        if (w.size == k) w.size = nk;
        if (w.padding_low == k - 1 && w.padding_high == k - 1) w.padding_low = w.padding_high = nk - 1;
      }
      return;
    }
    default:
      return;
  }
}

// The instruction a verifier error points at (by source position), or null.
const Instruction* InstructionAt(const Module& module, const SourceLoc& loc) {
  if (!loc.known()) return nullptr;
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions())
      if (i->loc().file == loc.file && i->loc().line == loc.line) return i.get();
  return nullptr;
}

struct Saved {
  Instruction* instr;
  Shape shape;
  Attributes attrs;
};

}  // namespace

std::string ShrinkShapesReport::Summary(size_t max_items) const {
  std::string out;
  for (size_t k = 0; k < changes.size() && k < max_items; ++k) out += (k ? ", " : "") + changes[k];
  if (changes.size() > max_items)
    out += ", ... (" + std::to_string(changes.size() - max_items) + " more)";
  return out;
}

StatusOr<ShrinkShapesReport> ShrinkShapes(Module& module, const ShrinkShapesOptions& options) {
  if (module.entry() == nullptr) return Status::Error("module has no entry computation");
  std::vector<Saved> saved;
  std::unordered_map<const Instruction*, Shape> old_shapes;
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions()) {
      saved.push_back({i.get(), i->shape(), i->attrs()});
      old_shapes[i.get()] = i->shape();
    }
  const auto saved_header = module.header_attrs();
  auto restore = [&]() {
    for (Saved& s : saved) {
      s.instr->set_shape(s.shape);
      s.instr->mutable_attrs() = s.attrs;
    }
    module.mutable_header_attrs() = saved_header;
  };
  // The header's entry_computation_layout spells the entry's old shapes;
  // the verifier would hold the new ones against it, so it goes.
  auto drop_entry_layout = [&]() {
    auto& header = module.mutable_header_attrs();
    auto it = std::remove_if(header.begin(), header.end(), [](const auto& kv) {
      return kv.first == "entry_computation_layout";
    });
    bool dropped = it != header.end();
    header.erase(it, header.end());
    return dropped;
  };
  ShrinkShapesReport report;
  std::vector<const Instruction*> pinned;  // failed a check: dims kept
  const int max_attempts = std::max(1, options.max_attempts);
  for (int attempt = 1; attempt <= max_attempts; ++attempt) {
    report.attempts = attempt;
    DimGraph g(module);
    shrink_internal::AddOpConstraints(module, g);
    AddAllShardingTiles(module, options.sharding_source, g);
    for (const Instruction* i : pinned) {
      g.FreezeValue(i);
      for (const Instruction* o : i->operands()) g.FreezeValue(o);
    }
    std::vector<int64_t> node_size(g.NodeCount(), -1);
    report.classes_shrunk = report.classes_frozen = 0;
    for (int n = 0; n < g.NodeCount(); ++n) {
      int r = g.Find(n);
      if (node_size[r] >= 0) continue;
      int64_t size = g.OriginalSize(n);
      if (size <= 1 || g.frozen(r)) {
        node_size[r] = size;
        if (size > 1) ++report.classes_frozen;
        continue;
      }
      int64_t want = std::max(g.min_size(r), std::min(size, std::max<int64_t>(1, options.min_dim)));
      if (options.divisor > 0) want = std::max(want, (size + options.divisor - 1) / options.divisor);
      node_size[r] = NewSize(size, g.tiles_lcm(r), want);
      if (node_size[r] != size) ++report.classes_shrunk;
    }
    if (report.classes_shrunk == 0) {
      restore();
      return Status::Error(
          "no dimension can shrink: every dim is at most " + std::to_string(options.min_dim) +
          ", needs its size for its tile counts, or is pinned by a constant, window, padding, "
          "partial slice, reshape factor or an op the shrinker does not rewrite (" +
          std::to_string(report.classes_frozen) + " classes pinned)" +
          (pinned.empty() ? "" : "; " + report.notes.back()));
    }
    // Rewrite shapes, then the attributes that spell sizes.
    report.dims_shrunk = 0;
    for (Saved& s : saved) {
      Shape shape = s.shape;
      int leaf = 0;
      ResizeLeaves(shape, s.instr, g, node_size, leaf);
      s.instr->set_shape(shape);
    }
    for (Saved& s : saved) AdjustAttributes(*s.instr, old_shapes);
    drop_entry_layout();
    for (Saved& s : saved)
      if (s.shape.IsArray() && s.instr->shape().dimensions() != s.shape.dimensions())
        ++report.dims_shrunk;
    // Check each instruction against shape inference, in order, so that
    // the first one a rule got wrong can be pinned.
    const Instruction* bad = nullptr;
    std::string why;
    for (const Computation* c : module.MakeComputationPostOrder()) {
      for (Instruction* i : c->MakePostOrder()) {
        StatusOr<Shape> inferred = InferShape(*i);
        if (!inferred.ok()) {
          bad = i;
          why = inferred.status().message();
        } else if (!inferred->Compatible(i->shape())) {
          bad = i;
          why = "inferred " + inferred->ToString(false) + ", declared " + i->shape().ToString(false);
        }
        if (bad) break;
      }
      if (bad) break;
    }
    if (bad == nullptr) {
      Status v = VerifyModule(module);
      if (v.ok()) break;
      bad = InstructionAt(module, v.loc());
      why = v.message();
      if (bad == nullptr) {
        restore();
        return Status::Error("the shrunk module does not verify: " + why);
      }
    }
    restore();
    if (std::find(pinned.begin(), pinned.end(), bad) != pinned.end() ||
        attempt == max_attempts)
      return Status::Error("cannot shrink %" + bad->name() + ": " + why, bad->loc());
    pinned.push_back(bad);
    report.notes.push_back("kept the dims of %" + bad->name() + " (" + why + ")");
  }
  // Report the entry signature; the old layout header stays dropped only
  // when the signature changed.
  const Computation* entry = module.entry();
  bool signature_changed = false;
  auto note_change = [&](const Instruction* i) {
    const Shape& before = old_shapes.at(i);
    if (before.Compatible(i->shape())) return;
    signature_changed = true;
    report.changes.push_back("%" + i->name() + ": " + before.ToString(false) + " -> " +
                             i->shape().ToString(false));
  };
  for (const Instruction* p : entry->parameters()) note_change(p);
  if (entry->root() != nullptr && entry->root()->opcode() != Opcode::kParameter)
    note_change(entry->root());
  if (!signature_changed) {
    module.mutable_header_attrs() = saved_header;
  } else if (module.header_attrs().size() != saved_header.size()) {
    report.notes.push_back("dropped entry_computation_layout (its shapes changed)");
  }
  return report;
}

}  // namespace meshsplit
