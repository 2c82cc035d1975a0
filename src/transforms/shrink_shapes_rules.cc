// Shape shrinking, the per-op half: which dims of an instruction's operands
// and result must stay equal, which must keep their size, and which only
// need a minimum size. Anything not understood here is frozen, so a new op
// costs shrinkability, never correctness.
#include <algorithm>
#include <unordered_set>

#include "ir/computation.h"
#include "rules/op_rules.h"
#include "support/small_helpers.h"
#include "transforms/shrink_shapes_graph.h"

namespace meshsplit::shrink_internal {

DimGraph::DimGraph(const Module& module) {
  for (const auto& comp : module.computations())
    for (const auto& instr : comp->instructions()) AddLeaves(instr->shape(), values_[instr.get()]);
}

int DimGraph::NewNode(int64_t size) {
  parent_.push_back(static_cast<int>(parent_.size()));
  size_.push_back(size);
  min_.push_back(1);
  lcm_.push_back(1);
  frozen_.push_back(false);
  return parent_.back();
}

void DimGraph::AddLeaves(const Shape& s, Value& v) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple_shapes()) AddLeaves(e, v);
    return;
  }
  v.base.push_back(static_cast<int>(parent_.size()));
  int rank = s.IsArray() ? s.rank() : 0;
  v.rank.push_back(rank);
  for (int d = 0; d < rank; ++d) NewNode(s.dimensions(d));
}

int DimGraph::ArrayNode(const Instruction* i, int64_t dim) const {
  const Value& v = values_.at(i);
  if (v.base.size() != 1 || !i->shape().IsArray() || dim < 0 || dim >= v.rank[0]) return -1;
  return v.base[0] + static_cast<int>(dim);
}

int DimGraph::Find(int n) {
  while (parent_[n] != n) {
    parent_[n] = parent_[parent_[n]];
    n = parent_[n];
  }
  return n;
}

void DimGraph::Union(int a, int b) {
  if (a < 0 || b < 0) return;
  a = Find(a);
  b = Find(b);
  if (a == b) return;
  parent_[b] = a;
  frozen_[a] = frozen_[a] || frozen_[b] || size_[a] != size_[b];
  min_[a] = std::max(min_[a], min_[b]);
  lcm_[a] = std::lcm(lcm_[a], lcm_[b]);
  // An lcm past the size cannot be kept modulo anything smaller; cap it so
  // it never overflows.
  if (lcm_[a] > size_[a]) lcm_[a] = size_[a] + 1;
}

void DimGraph::AddTiles(int n, int64_t tiles) {
  if (n < 0 || tiles <= 1) return;
  int r = Find(n);
  lcm_[r] = std::lcm(lcm_[r], tiles);
  if (lcm_[r] > size_[r]) lcm_[r] = size_[r] + 1;
}

void DimGraph::UnionLeaves(const Instruction* a, int leaf_a, const Instruction* b, int leaf_b) {
  if (leaf_a >= LeafCount(a) || leaf_b >= LeafCount(b)) return;
  int rank = LeafRank(a, leaf_a);
  if (rank != LeafRank(b, leaf_b)) {
    FreezeLeaf(a, leaf_a);
    FreezeLeaf(b, leaf_b);
    return;
  }
  for (int d = 0; d < rank; ++d) Union(Node(a, leaf_a, d), Node(b, leaf_b, d));
}

void DimGraph::UnionLeafRange(const Instruction* a, int first_a, const Instruction* b,
                              int first_b, int count) {
  for (int k = 0; k < count; ++k) UnionLeaves(a, first_a + k, b, first_b + k);
}

void DimGraph::UnionValues(const Instruction* a, const Instruction* b) {
  if (LeafCount(a) != LeafCount(b)) {
    FreezeValue(a);
    FreezeValue(b);
    return;
  }
  UnionLeafRange(a, 0, b, 0, LeafCount(a));
}

void DimGraph::FreezeLeaf(const Instruction* i, int leaf) {
  if (leaf >= LeafCount(i)) return;
  for (int d = 0; d < LeafRank(i, leaf); ++d) Freeze(Node(i, leaf, d));
}

void DimGraph::FreezeValue(const Instruction* i) {
  for (int leaf = 0; leaf < LeafCount(i); ++leaf) FreezeLeaf(i, leaf);
}

int CountLeaves(const Shape& shape) {
  if (!shape.IsTuple()) return 1;
  int n = 0;
  for (const Shape& e : shape.tuple_shapes()) n += CountLeaves(e);
  return n;
}

std::pair<int, int> LeafRange(const Shape& shape, int64_t index) {
  int first = 0;
  for (int64_t k = 0; k < index && k < shape.tuple_size(); ++k)
    first += CountLeaves(shape.tuple_shapes(static_cast<int>(k)));
  if (index >= shape.tuple_size()) return {first, 0};
  return {first, CountLeaves(shape.tuple_shapes(static_cast<int>(index)))};
}

namespace {

// Dims of `rank` not in `excluded`, in order.
std::vector<int64_t> OtherDims(int64_t rank, const std::vector<int64_t>& excluded) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (!Contains(excluded, d)) out.push_back(d);
  return out;
}

// A start index whose value stays right when the dim it indexes shrinks:
// the literal 0, or an entry parameter (random in the verifier anyway).
// Anything else (constants like 192, values computed from constants) pins
// the indexed dim.
bool IndexSurvivesShrink(const Instruction* index) {
  if (index->opcode() == Opcode::kParameter) return index->parent()->IsEntry();
  if (index->opcode() == Opcode::kConstant && index->shape().IsArray() &&
      index->shape().rank() == 0 && index->has_literal())
    return index->literal().GetInt(0) == 0;
  return false;
}

class Rules {
 public:
  Rules(const Module& module, DimGraph& g) : module_(module), g_(g) {}

  void Run() {
    for (const auto& comp : module_.computations())
      for (const auto& instr : comp->instructions()) Add(*instr);
    // Computations reached only through ops that do not link their
    // parameters to operands keep every dim (scalar reducers have none).
    for (const auto& comp : module_.computations()) {
      if (comp.get() == module_.entry() || linked_.count(comp.get())) continue;
      for (const auto& instr : comp->instructions()) g_.FreezeValue(instr.get());
    }
  }

 private:
  int N(const Instruction* i, int64_t d) { return g_.ArrayNode(i, d); }
  void UnionDim(const Instruction* a, int64_t da, const Instruction* b, int64_t db) {
    g_.Union(N(a, da), N(b, db));
  }
  void FreezeDim(const Instruction* i, int64_t d) {
    int n = N(i, d);
    if (n >= 0) g_.Freeze(n);
  }
  // The result's leaves are the operands' leaves in order (tuple, and
  // variadic all-reduce / collective-permute).
  void UnionOperandLeaves(const Instruction& i) {
    int first = 0;
    for (const Instruction* o : i.operands()) {
      int count = g_.LeafCount(o);
      g_.UnionLeafRange(o, 0, &i, first, count);
      first += count;
    }
  }

  void FreezeAll(const Instruction& i) {
    g_.FreezeValue(&i);
    for (const Instruction* o : i.operands()) g_.FreezeValue(o);
  }
  bool IsArray(const Instruction* i) { return i->shape().IsArray(); }
  int64_t Rank(const Instruction* i) { return i->shape().IsArray() ? i->shape().rank() : -1; }
  int64_t Dim(const Instruction* i, int64_t d) { return i->shape().dimensions(static_cast<int>(d)); }

  // Every dim of a called computation's parameters and root follows the
  // caller: operands -> parameters, root -> result.
  void LinkCall(const Instruction& i, const Computation* c,
                const std::vector<const Instruction*>& args) {
    if (c == nullptr) return;
    linked_.insert(c);
    if (static_cast<int>(args.size()) != c->parameter_count()) {
      FreezeAll(i);
      for (const auto& instr : c->instructions()) g_.FreezeValue(instr.get());
      return;
    }
    for (size_t k = 0; k < args.size(); ++k) g_.UnionValues(args[k], c->parameter(static_cast<int>(k)));
    if (c->root() != nullptr) g_.UnionValues(c->root(), &i);
  }

  void Elementwise(const Instruction& i) {
    if (!IsArray(&i)) return FreezeAll(i);
    for (const Instruction* o : i.operands()) {
      if (!IsArray(o)) return FreezeAll(i);
      if (Rank(o) == 0 && Rank(&i) != 0) continue;  // a scalar of select / clamp
      if (Rank(o) != Rank(&i)) return FreezeAll(i);
      g_.UnionLeaves(o, 0, &i, 0);
    }
  }

  void Reshape(const Instruction& i) {
    const Instruction* o = i.operand(0);
    if (!IsArray(o) || !IsArray(&i)) return FreezeAll(i);
    std::vector<int64_t> a, b;  // dims of size > 1
    for (int64_t d = 0; d < Rank(o); ++d)
      if (Dim(o, d) > 1) a.push_back(d);
    for (int64_t d = 0; d < Rank(&i); ++d)
      if (Dim(&i, d) > 1) b.push_back(d);
    size_t x = 0, y = 0;
    while (x < a.size() && y < b.size()) {
      std::vector<int64_t> ga{a[x]}, gb{b[y]};
      int64_t pa = Dim(o, a[x++]), pb = Dim(&i, b[y++]);
      while (pa != pb) {
        if (pa < pb && x < a.size()) {
          pa *= Dim(o, a[x]);
          ga.push_back(a[x++]);
        } else if (pb < pa && y < b.size()) {
          pb *= Dim(&i, b[y]);
          gb.push_back(b[y++]);
        } else {
          return FreezeAll(i);  // element counts differ: not ours to judge
        }
      }
      if (ga.size() == 1 && gb.size() == 1) {
        UnionDim(o, ga[0], &i, gb[0]);
      } else {
        // A split or merge of factors: the product must hold, so the
        // factors keep their sizes.
        for (int64_t d : ga) FreezeDim(o, d);
        for (int64_t d : gb) FreezeDim(&i, d);
      }
    }
    for (; x < a.size(); ++x) FreezeDim(o, a[x]);
    for (; y < b.size(); ++y) FreezeDim(&i, b[y]);
  }

  // Whether every dim of the result and of each operand is in exactly one of
  // the rule's factors (a malformed op is not, and is then frozen).
  bool CoversEveryDimOnce(const Instruction& i, const OpShardingRule& rule) {
    std::vector<std::vector<int>> seen(i.operand_count() + 1);
    seen[0].assign(Rank(&i), 0);
    for (int k = 0; k < i.operand_count(); ++k) seen[k + 1].assign(Rank(i.operand(k)), 0);
    auto mark = [&](size_t value, int64_t d) {
      if (d < 0) return true;
      if (value >= seen.size() || d >= static_cast<int64_t>(seen[value].size())) return false;
      return ++seen[value][d] == 1;
    };
    for (const Factor& f : rule.factors) {
      if (!mark(0, f.result_dim)) return false;
      for (size_t k = 0; k < f.operand_dims.size(); ++k)
        if (!mark(k + 1, f.operand_dims[k])) return false;
    }
    for (const std::vector<int>& dims : seen)
      for (int n : dims)
        if (n != 1) return false;
    return true;
  }

  // Dims that share one of the op's sharding factors (src/rules) share one
  // size: a dot's batch, contracting and free dims, a transpose's or a
  // broadcast's dim map. Only for ops whose factors are the whole story.
  void FactorDims(const Instruction& i) {
    if (!IsArray(&i)) return FreezeAll(i);
    for (const Instruction* o : i.operands())
      if (!IsArray(o)) return FreezeAll(i);
    const OpShardingRule rule = GetOpShardingRule(i);
    if (rule.kind == RuleKind::kNoRule || !CoversEveryDimOnce(i, rule)) return FreezeAll(i);
    for (const Factor& f : rule.factors) {
      const Instruction* first = f.result_dim >= 0 ? &i : nullptr;
      int64_t first_dim = f.result_dim;
      for (size_t k = 0; k < f.operand_dims.size(); ++k) {
        if (f.operand_dims[k] < 0) continue;
        const Instruction* o = i.operand(static_cast<int>(k));
        if (first == nullptr) {
          first = o;
          first_dim = f.operand_dims[k];
        } else {
          UnionDim(first, first_dim, o, f.operand_dims[k]);
        }
      }
    }
  }

  // One spatial dim of a convolution: input dim `a`, kernel dim `b`, output
  // dim `c`. Three shapes of window are rewritten (shrink_shapes.cc moves
  // the window with the sizes); any other freezes the three dims. Window
  // reversal does not change any of the three relations.
  void ConvSpatial(const Instruction& i, int64_t a, int64_t b, int64_t c, const WindowDimension& w) {
    const Instruction* lhs = i.operand(0);
    const Instruction* rhs = i.operand(1);
    int64_t in = Dim(lhs, a), k = Dim(rhs, b);
    bool plain = w.stride == 1 && w.window_dilation == 1 && w.base_dilation == 1 && w.size == k;
    if (plain && k == 1 && w.padding_low == 0 && w.padding_high == 0) {
      UnionDim(lhs, a, &i, c);  // a 1-wide window maps the dim through
      return;
    }
    if (plain && in == k && w.padding_low == 0 && w.padding_high == 0) {
      UnionDim(lhs, a, rhs, b);  // the window covers the input: output 1
      FreezeDim(&i, c);
      return;
    }
    if (plain && in == 1 && w.padding_low == k - 1 && w.padding_high == k - 1) {
      UnionDim(rhs, b, &i, c);  // a size-1 input padded to a full correlation
      FreezeDim(lhs, a);
      return;
    }
    FreezeDim(lhs, a);
    FreezeDim(rhs, b);
    FreezeDim(&i, c);
  }

  void Convolution(const Instruction& i) {
    const Instruction* lhs = i.operand(0);
    const Instruction* rhs = i.operand(1);
    if (!i.attrs().conv_dnums || !IsArray(lhs) || !IsArray(rhs) || !IsArray(&i)) return FreezeAll(i);
    const ConvolutionDimensionNumbers& dn = *i.attrs().conv_dnums;
    const Attributes& at = i.attrs();
    if (at.batch_group_count == 1) {
      UnionDim(lhs, dn.input_batch_dimension, &i, dn.output_batch_dimension);
    } else {
      FreezeDim(lhs, dn.input_batch_dimension);
      FreezeDim(&i, dn.output_batch_dimension);
      FreezeDim(rhs, dn.kernel_output_feature_dimension);
    }
    if (at.feature_group_count == 1) {
      UnionDim(lhs, dn.input_feature_dimension, rhs, dn.kernel_input_feature_dimension);
    } else {
      FreezeDim(lhs, dn.input_feature_dimension);
      FreezeDim(rhs, dn.kernel_input_feature_dimension);
      FreezeDim(rhs, dn.kernel_output_feature_dimension);
    }
    UnionDim(rhs, dn.kernel_output_feature_dimension, &i, dn.output_feature_dimension);
    size_t n = dn.input_spatial_dimensions.size();
    if (dn.kernel_spatial_dimensions.size() != n || dn.output_spatial_dimensions.size() != n ||
        (at.window && at.window->size() != n))
      return FreezeAll(i);
    for (size_t s = 0; s < n; ++s) {
      WindowDimension w;
      if (at.window) {
        w = (*at.window)[s];
      } else {
        w.size = Dim(rhs, dn.kernel_spatial_dimensions[s]);
      }
      ConvSpatial(i, dn.input_spatial_dimensions[s], dn.kernel_spatial_dimensions[s],
                  dn.output_spatial_dimensions[s], w);
    }
  }

  // reduce-window / select-and-scatter: a 1-wide window maps a dim
  // through; a window covering the whole (unpadded) dim reduces it to 1
  // and follows its size; anything else pins both.
  void WindowDims(const Instruction& i, const std::vector<const Instruction*>& inputs,
                  const std::vector<std::pair<const Instruction*, int>>& outputs) {
    if (!i.attrs().window) return FreezeAll(i);
    const Window& win = *i.attrs().window;
    for (size_t d = 0; d < win.size(); ++d) {
      const WindowDimension& w = win[d];
      bool no_pad = w.padding_low == 0 && w.padding_high == 0 && w.base_dilation == 1 &&
                    w.window_dilation == 1;
      bool unit = no_pad && w.size == 1 && w.stride == 1;
      bool global = no_pad && !inputs.empty() && Rank(inputs[0]) > static_cast<int64_t>(d) &&
                    w.size == Dim(inputs[0], static_cast<int64_t>(d)) && w.size > 1;
      for (const Instruction* in : inputs) {
        if (Rank(in) <= static_cast<int64_t>(d)) return FreezeAll(i);
        if (in != inputs[0]) UnionDim(inputs[0], d, in, d);
      }
      for (const auto& [out, leaf] : outputs) {
        if (leaf >= g_.LeafCount(out) || g_.LeafRank(out, leaf) <= static_cast<int>(d))
          return FreezeAll(i);
        int on = g_.Node(out, leaf, static_cast<int64_t>(d));
        if (unit) {
          g_.Union(N(inputs[0], d), on);
        } else {
          g_.Freeze(on);
          if (!global) FreezeDim(inputs[0], d);
        }
      }
    }
  }

  // The dim structure gather and scatter share. The index batch dims (all
  // but `index_vector_dim`) pair in order with the dims of `windowed` (the
  // gather result, the scatter updates) outside `window_dims`; operand
  // batching dims pair with index batching dims. The remaining operand dims
  // pair in order with `window_dims`: a window that takes operand dim d
  // whole (`size(d, w)` equals it) lets both shrink together; otherwise the
  // window dim keeps its size and the operand dim stays at least that big.
  template <typename WindowSize>
  void IndexedWindows(const Instruction& i, const Instruction* op, const Instruction* idx,
                      const Instruction* windowed, int64_t index_vector_dim,
                      const std::vector<int64_t>& window_dims,
                      const std::vector<int64_t>& operand_batching_dims,
                      const std::vector<int64_t>& index_batching_dims,
                      std::vector<int64_t> excluded, WindowSize size) {
    std::vector<int64_t> idx_batch = OtherDims(Rank(idx), {index_vector_dim});
    std::vector<int64_t> windowed_batch = OtherDims(Rank(windowed), window_dims);
    if (idx_batch.size() != windowed_batch.size()) return FreezeAll(i);
    for (size_t k = 0; k < idx_batch.size(); ++k)
      UnionDim(idx, idx_batch[k], windowed, windowed_batch[k]);
    for (size_t k = 0; k < operand_batching_dims.size() && k < index_batching_dims.size(); ++k)
      UnionDim(op, operand_batching_dims[k], idx, index_batching_dims[k]);
    excluded.insert(excluded.end(), operand_batching_dims.begin(), operand_batching_dims.end());
    std::vector<int64_t> window = OtherDims(Rank(op), excluded);
    if (window.size() != window_dims.size()) return FreezeAll(i);
    for (size_t k = 0; k < window.size(); ++k) {
      const int64_t d = window[k], w = window_dims[k];
      const int64_t extent = size(d, w);
      if (extent == Dim(op, d)) {
        UnionDim(op, d, windowed, w);
      } else {
        FreezeDim(windowed, w);
        int n = N(op, d);
        if (n >= 0) g_.RaiseMin(n, extent);
      }
    }
  }

  void Gather(const Instruction& i) {
    const Instruction* op = i.operand(0);
    const Instruction* idx = i.operand(1);
    const Attributes& at = i.attrs();
    if (!at.gather_dnums || !IsArray(op) || !IsArray(idx) || !IsArray(&i) ||
        static_cast<int64_t>(at.gather_slice_sizes.size()) != Rank(op))
      return FreezeAll(i);
    const GatherDimensionNumbers& dn = *at.gather_dnums;
    FreezeDim(idx, dn.index_vector_dim);
    // Written-out start indices mean particular rows: the dims they index
    // keep their sizes so the rows stay where they were.
    if (idx->opcode() == Opcode::kConstant)
      for (int64_t d : dn.start_index_map) FreezeDim(op, d);
    // Output batch dims follow the index batch dims in order.
    IndexedWindows(i, op, idx, &i, dn.index_vector_dim, dn.offset_dims, dn.operand_batching_dims,
                   dn.start_indices_batching_dims, dn.collapsed_slice_dims,
                   [&](int64_t d, int64_t) { return at.gather_slice_sizes[d]; });
  }

  void Scatter(const Instruction& i) {
    const Attributes& at = i.attrs();
    int n = i.operand_count();
    if (!at.scatter_dnums || n < 3 || n % 2 == 0) return FreezeAll(i);
    int k = (n - 1) / 2;
    const Instruction* op = i.operand(0);
    const Instruction* idx = i.operand(k);
    const Instruction* upd = i.operand(k + 1);
    if (!IsArray(op) || !IsArray(idx) || !IsArray(upd)) return FreezeAll(i);
    for (int j = 1; j < k; ++j) g_.UnionLeaves(op, 0, i.operand(j), 0);
    for (int j = 1; j < k; ++j) g_.UnionLeaves(upd, 0, i.operand(k + 1 + j), 0);
    for (int j = 0; j < k && j < g_.LeafCount(&i); ++j) g_.UnionLeaves(op, 0, &i, j);
    const ScatterDimensionNumbers& dn = *at.scatter_dnums;
    FreezeDim(idx, dn.index_vector_dim);
    if (idx->opcode() == Opcode::kConstant)
      for (int64_t d : dn.scatter_dims_to_operand_dims) FreezeDim(op, d);
    IndexedWindows(i, op, idx, upd, dn.index_vector_dim, dn.update_window_dims,
                   dn.input_batching_dims, dn.scatter_indices_batching_dims,
                   dn.inserted_window_dims, [&](int64_t, int64_t u) { return Dim(upd, u); });
  }

  // slice / pad: a dim the op leaves whole (`whole(d)`) shrinks together
  // with the operand; any other dim keeps its size on both sides.
  template <typename WholeDim>
  void WholeDimsFollow(const Instruction& i, const Instruction* o, WholeDim whole) {
    for (int64_t d = 0; d < Rank(o); ++d) {
      if (whole(d)) {
        UnionDim(o, d, &i, d);
      } else {
        FreezeDim(o, d);
        FreezeDim(&i, d);
      }
    }
  }

  // dynamic-slice / dynamic-update-slice: `window` is the slice (result or
  // update), `first_index` the operand number of the first start index.
  void DynamicWindow(const Instruction& i, const Instruction* op, const Instruction* window,
                     int first_index) {
    if (!IsArray(op) || !IsArray(window) || Rank(op) != Rank(window)) return FreezeAll(i);
    bool scalar_indices = i.operand_count() == first_index + Rank(op);
    for (int64_t d = 0; d < Rank(op); ++d) {
      if (Dim(window, d) == Dim(op, d)) {
        UnionDim(op, d, window, d);  // starts clamp to 0: a whole dim
        continue;
      }
      FreezeDim(window, d);
      int n = N(op, d);
      if (n >= 0) g_.RaiseMin(n, Dim(window, d));
      if (!scalar_indices || !IndexSurvivesShrink(i.operand(first_index + static_cast<int>(d))))
        FreezeDim(op, d);
    }
  }

  void Add(const Instruction& i) {
    const Attributes& at = i.attrs();
    switch (GetOpcodeFamily(i.opcode())) {
      case OpcodeFamily::kElementwiseUnary:
      case OpcodeFamily::kElementwiseBinary:
      case OpcodeFamily::kElementwiseTernary:
        return Elementwise(i);
      default:
        break;
    }
    switch (i.opcode()) {
      case Opcode::kParameter:
      case Opcode::kIota:
      case Opcode::kPartitionId:
      case Opcode::kReplicaId:
      case Opcode::kAfterAll:
      case Opcode::kRng:
      case Opcode::kOutfeed:
        return;  // sizes free (or no dims)
      case Opcode::kConstant:
        // An array literal has its size written out.
        if (!i.shape().IsArray() || i.shape().rank() > 0) g_.FreezeValue(&i);
        return;
      case Opcode::kMap:
        Elementwise(i);
        linked_.insert(i.to_apply());  // scalar computation
        return;
      case Opcode::kBitcastConvert:
        if (IsArray(&i) && IsArray(i.operand(0)) && Rank(&i) == Rank(i.operand(0)))
          return g_.UnionLeaves(i.operand(0), 0, &i, 0);
        return FreezeAll(i);
      case Opcode::kBroadcast:
      case Opcode::kTranspose:
      case Opcode::kDot:
        return FactorDims(i);
      case Opcode::kReshape:
        return Reshape(i);
      case Opcode::kReverse:
        return g_.UnionLeaves(i.operand(0), 0, &i, 0);
      case Opcode::kSlice: {
        const Instruction* o = i.operand(0);
        if (!IsArray(o) || static_cast<int64_t>(at.slice.size()) != Rank(o)) return FreezeAll(i);
        return WholeDimsFollow(i, o, [&](int64_t d) {
          const SliceDimension& s = at.slice[d];
          return s.start == 0 && s.stride == 1 && s.limit == Dim(o, d);
        });
      }
      case Opcode::kPad: {
        const Instruction* o = i.operand(0);
        if (!IsArray(o) || static_cast<int64_t>(at.padding.size()) != Rank(o)) return FreezeAll(i);
        return WholeDimsFollow(i, o, [&](int64_t d) {
          const PaddingDimension& p = at.padding[d];
          return p.low == 0 && p.high == 0 && p.interior == 0;
        });
      }
      case Opcode::kConcatenate: {
        if (!IsArray(&i) || at.dimensions.size() != 1) return FreezeAll(i);
        int64_t cd = at.dimensions[0];
        for (const Instruction* o : i.operands()) {
          if (Rank(o) != Rank(&i)) return FreezeAll(i);
          for (int64_t d = 0; d < Rank(o); ++d) {
            if (d == cd) {
              FreezeDim(o, d);
            } else {
              UnionDim(o, d, &i, d);
            }
          }
        }
        FreezeDim(&i, cd);
        return;
      }
      case Opcode::kDynamicSlice: {
        const Instruction* o = i.operand(0);
        if (!IsArray(&i) || !IsArray(o) ||
            static_cast<int64_t>(at.dynamic_slice_sizes.size()) != Rank(o))
          return FreezeAll(i);
        return DynamicWindow(i, o, &i, 1);
      }
      case Opcode::kDynamicUpdateSlice:
        if (i.operand_count() < 2) return FreezeAll(i);
        g_.UnionLeaves(i.operand(0), 0, &i, 0);
        return DynamicWindow(i, i.operand(0), i.operand(1), 2);
      case Opcode::kGather:
        return Gather(i);
      case Opcode::kScatter:
        linked_.insert(i.to_apply());
        return Scatter(i);
      case Opcode::kReduce: {
        linked_.insert(i.to_apply());
        int n = i.operand_count() / 2;
        if (n < 1 || i.operand_count() != 2 * n || g_.LeafCount(&i) != n) return FreezeAll(i);
        for (int k = 0; k < n; ++k) {
          const Instruction* o = i.operand(k);
          if (!IsArray(o)) return FreezeAll(i);
          if (k > 0) g_.UnionLeaves(i.operand(0), 0, o, 0);
          std::vector<int64_t> kept = OtherDims(Rank(o), at.dimensions);
          if (static_cast<int>(kept.size()) != g_.LeafRank(&i, k)) return FreezeAll(i);
          for (size_t q = 0; q < kept.size(); ++q)
            g_.Union(N(o, kept[q]), g_.Node(&i, k, static_cast<int64_t>(q)));
        }
        return;
      }
      case Opcode::kReduceWindow: {
        linked_.insert(i.to_apply());
        int n = i.operand_count() / 2;
        if (n < 1 || i.operand_count() != 2 * n || g_.LeafCount(&i) != n) return FreezeAll(i);
        std::vector<const Instruction*> inputs;
        std::vector<std::pair<const Instruction*, int>> outputs;
        for (int k = 0; k < n; ++k) {
          inputs.push_back(i.operand(k));
          outputs.push_back({&i, k});
        }
        return WindowDims(i, inputs, outputs);
      }
      case Opcode::kSelectAndScatter:
        for (const Computation* c : i.called_computations()) linked_.insert(c);
        g_.UnionLeaves(i.operand(0), 0, &i, 0);
        return WindowDims(i, {i.operand(0)}, {{i.operand(1), 0}});
      case Opcode::kSort:
        linked_.insert(i.to_apply());
        for (const Instruction* o : i.operands()) {
          if (!IsArray(o)) return FreezeAll(i);
          g_.UnionLeaves(i.operand(0), 0, o, 0);
        }
        for (int leaf = 0; leaf < g_.LeafCount(&i); ++leaf) g_.UnionLeaves(i.operand(0), 0, &i, leaf);
        return;
      case Opcode::kConvolution:
        return Convolution(i);
      case Opcode::kTuple:
        return UnionOperandLeaves(i);
      case Opcode::kGetTupleElement: {
        auto [first, count] = LeafRange(i.operand(0)->shape(), at.tuple_index);
        if (count != g_.LeafCount(&i)) return FreezeAll(i);
        g_.UnionLeafRange(i.operand(0), first, &i, 0, count);
        return;
      }
      case Opcode::kOptimizationBarrier:
      case Opcode::kDomain:
        return g_.UnionValues(i.operand(0), &i);
      case Opcode::kWhile:
        if (i.called_computations().size() != 2) return FreezeAll(i);
        g_.UnionValues(i.operand(0), &i);
        LinkCall(i, i.while_body(), {i.operand(0)});
        linked_.insert(i.while_condition());
        if (i.while_condition()->parameter_count() == 1)
          g_.UnionValues(i.operand(0), i.while_condition()->parameter(0));
        return;
      case Opcode::kCall: {
        std::vector<const Instruction*> args(i.operands().begin(), i.operands().end());
        return LinkCall(i, i.to_apply(), args);
      }
      case Opcode::kConditional: {
        const auto& branches = i.called_computations();
        if (i.operand_count() != static_cast<int>(branches.size()) + 1) return FreezeAll(i);
        for (size_t b = 0; b < branches.size(); ++b)
          LinkCall(i, branches[b], {i.operand(static_cast<int>(b) + 1)});
        return;
      }
      case Opcode::kCustomCall:
        if (at.custom_call_target == "Sharding" && i.operand_count() == 1)
          return g_.UnionValues(i.operand(0), &i);
        return FreezeAll(i);
      case Opcode::kAllReduce:
      case Opcode::kCollectivePermute: {
        linked_.insert(i.to_apply());
        if (i.opcode() == Opcode::kCollectivePermute && i.operand_count() != 1) return FreezeAll(i);
        return UnionOperandLeaves(i);
      }
      case Opcode::kAllGather:
      case Opcode::kReduceScatter:
      case Opcode::kAllToAll: {
        linked_.insert(i.to_apply());
        if (i.operand_count() != 1 || !IsArray(&i) || !IsArray(i.operand(0)) ||
            Rank(&i) != Rank(i.operand(0)))
          return FreezeAll(i);
        for (int64_t d = 0; d < Rank(&i); ++d) {
          if (Contains(at.dimensions, d) || at.dimensions.empty()) {
            FreezeDim(i.operand(0), d);
            FreezeDim(&i, d);
          } else {
            UnionDim(i.operand(0), d, &i, d);
          }
        }
        return;
      }
      default:
        // Bitcasts, FFTs, linear algebra, batch norms, ragged dots, infeed,
        // rng-bit-generator, ...: their sizes stay.
        FreezeAll(i);
        for (const Computation* c : i.called_computations())
          if (c != nullptr)
            for (const auto& instr : c->instructions()) g_.FreezeValue(instr.get());
        return;
    }
  }

  const Module& module_;
  DimGraph& g_;
  std::unordered_set<const Computation*> linked_;
};

}  // namespace

void AddOpConstraints(const Module& module, DimGraph& graph) { Rules(module, graph).Run(); }

}  // namespace meshsplit::shrink_internal
