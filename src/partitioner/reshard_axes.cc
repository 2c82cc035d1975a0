// The mesh-axis reshard planner (see reshard_axes.h). Both shardings are
// read over their common device axes (sharding/device_axes.h): every
// tile-assignment dim is an ordered list of axes (major first), and a reshard
// is a short sequence of per-axis moves whose collectives run over exactly
// the axes that move.
#include "partitioner/reshard_axes.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>

#include "partitioner/sharding_helpers.h"
#include "sharding/device_axes.h"
#include "support/check.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {

// --- statistics -------------------------------------------------------------

namespace {

constexpr int kNumPaths = static_cast<int>(ReshardPath::kNumPaths);
std::atomic<int64_t> g_calls{0};
std::atomic<int64_t> g_paths[kNumPaths];

bool DebugReshard() {
  static const bool on = [] {
    const char* e = std::getenv("MESHSPLIT_DEBUG");
    return e != nullptr && std::strstr(e, "reshard") != nullptr;
  }();
  return on;
}

void PrintSummaryAtExit() {
  std::fprintf(stderr, "meshsplit: reshard stats: %s\n", GetReshardStats().ToString().c_str());
}

}  // namespace

const char* ReshardPathName(ReshardPath p) {
  switch (p) {
    case ReshardPath::kSlice: return "slice";
    case ReshardPath::kAllGather: return "all_gather";
    case ReshardPath::kAllToAll: return "all_to_all";
    case ReshardPath::kCollectivePermute: return "collective_permute";
    case ReshardPath::kAllReduce: return "all_reduce";
    case ReshardPath::kReduceScatter: return "reduce_scatter";
    case ReshardPath::kToUnreduced: return "to_unreduced";
    case ReshardPath::kManualGroups: return "manual_groups";
    case ReshardPath::kAxisPlan: return "axis_plan";
    case ReshardPath::kFallbackGatherSome: return "fallback_gather_some";
    case ReshardPath::kFallbackGatherAll: return "fallback_gather_all";
    case ReshardPath::kNumPaths: break;
  }
  return "?";
}

std::string ReshardStats::ToString() const {
  std::string s = "calls=" + std::to_string(calls);
  for (int i = 0; i < kNumPaths; ++i)
    s += std::string(" ") + ReshardPathName(static_cast<ReshardPath>(i)) + "=" +
         std::to_string(paths[i]);
  return s;
}

ReshardStats GetReshardStats() {
  ReshardStats s;
  s.calls = g_calls.load();
  for (int i = 0; i < kNumPaths; ++i) s.paths[i] = g_paths[i].load();
  return s;
}

void ResetReshardStats() {
  g_calls = 0;
  for (int i = 0; i < kNumPaths; ++i) g_paths[i] = 0;
}

namespace {
// Depth of ScopedReshardEstimate on this thread.
thread_local int g_estimating = 0;
}  // namespace

ScopedReshardEstimate::ScopedReshardEstimate() { ++g_estimating; }
ScopedReshardEstimate::~ScopedReshardEstimate() { --g_estimating; }

void CountReshardCall() {
  if (g_estimating > 0) return;
  static std::once_flag once;
  if (DebugReshard()) std::call_once(once, [] { std::atexit(PrintSummaryAtExit); });
  ++g_calls;
}

void RecordReshardPath(ReshardPath path, const PartitionedValue& v, const Sharding& dst) {
  if (g_estimating > 0) return;
  ++g_paths[static_cast<int>(path)];
  if (DebugReshard() &&
      (path == ReshardPath::kFallbackGatherSome || path == ReshardPath::kFallbackGatherAll)) {
    std::string dims;
    for (int64_t i = 0; i < v.shape.rank(); ++i)
      dims += (i ? "," : "") + std::to_string(v.shape.dimensions(i));
    std::fprintf(stderr, "meshsplit: reshard %s: [%s] %s -> %s\n", ReshardPathName(path),
                 dims.c_str(), v.sharding.ToString(false).c_str(), dst.ToString(false).c_str());
  }
}

// --- the planner --------------------------------------------------------------

namespace {

// A sharding as a tile assignment over all n devices plus the role of each
// of its dims.
struct View {
  int64_t data_rank = 0;
  TileAssignment ta;
  std::vector<SubgroupType> types;  // of dims data_rank..
};

std::optional<View> ViewOf(const Sharding& s, int64_t rank, int64_t n) {
  View v;
  v.data_rank = rank;
  if (s.IsReplicated() || s.kind() == Sharding::Kind::kUnreduced) {
    std::vector<int64_t> dims(rank, 1);
    dims.push_back(n);
    v.ta = TileAssignment::Iota(dims);
    v.types = {s.IsReplicated() ? SubgroupType::kReplicated : SubgroupType::kUnreduced};
    return v;
  }
  if (!s.IsTiled() || s.TiledDataRank() != rank) return std::nullopt;
  if (s.tile_assignment().num_devices() != n) return std::nullopt;
  v.ta = s.tile_assignment();
  v.types = s.subgroup_types();
  return v;
}

using Axes = AxisList;

class AxisPlanner {
 public:
  AxisPlanner(SpmdBuilder& b, const PartitionedValue& v, const Sharding& dst)
      : b_(b), v_(v), dst_(dst), n_(b.module()->num_partitions()),
        rank_(v.shape.rank()) {}

  // Reads both shardings as axis layouts; false when the planner does not
  // apply. Emits nothing.
  bool Prepare() {
    auto src = ViewOf(v_.sharding, rank_, n_);
    auto dst = ViewOf(dst_, rank_, n_);
    if (!src || !dst || n_ < 1) return false;
    if (!Renumber(*src, *dst)) return false;
    axes_ = DeviceAxes::Common(n_, {&src->ta, &dst->ta});
    if (!axes_) return false;
    auto ls = ToAxisLayout(src->ta, rank_, src->types, *axes_);
    auto lt = ToAxisLayout(dst->ta, rank_, dst->types, *axes_);
    if (!ls || !lt) return false;
    s_ = LayoutOf(*ls);
    t_ = LayoutOf(*lt);
    return s_.manual == t_.manual;
  }

  std::optional<PartitionedValue> Run() { return Execute(s_, t_); }

 private:
  struct Layout {
    std::vector<Axes> dims;  // data dims, axes major first
    std::set<int> unreduced, manual;
  };

  // Explicit device lists are renumbered by their position in the first
  // explicit tile assignment, so that a permutation both sides share drops
  // out. O(devices), like the explicit lists themselves.
  bool Renumber(View& s, View& d) {
    if (s.ta.is_iota() && d.ta.is_iota()) return true;
    const TileAssignment& ref = s.ta.is_iota() ? d.ta : s.ta;
    real_of_ = ref.Devices();
    std::vector<int64_t> virt(n_, -1);
    for (int64_t i = 0; i < static_cast<int64_t>(real_of_.size()); ++i) {
      const int64_t dev = real_of_[i];
      if (dev < 0 || dev >= n_ || virt[dev] >= 0) return false;
      virt[dev] = i;
    }
    for (View* w : {&s, &d}) {
      std::vector<int64_t> ids = w->ta.Devices();
      for (int64_t& id : ids) {
        if (id < 0 || id >= n_ || virt[id] < 0) return false;
        id = virt[id];
      }
      w->ta = TileAssignment::FromDevices(w->ta.dims(), std::move(ids));
      if (!w->ta.is_iota()) return false;
    }
    return true;
  }

  static Layout LayoutOf(const AxisLayout& l) {
    return Layout{l.dims, std::set<int>(l.unreduced.begin(), l.unreduced.end()),
                  std::set<int>(l.manual.begin(), l.manual.end())};
  }

  int64_t Product(const Axes& xs) const { return axes_->Product(xs); }

  // A tile assignment with one dim per axis, in real device ids; `order`
  // lists the axes (a permutation of all of them).
  TileAssignment AxisArray(const std::vector<int64_t>& order) const {
    TileAssignment t = TileAssignment::Iota(axes_->sizes());
    bool identity = true;
    for (size_t i = 0; i < order.size(); ++i) identity &= order[i] == static_cast<int64_t>(i);
    if (!identity) t = t.Transpose(order);
    if (real_of_.empty()) return t;
    std::vector<int64_t> ids = t.Devices();
    for (int64_t& id : ids) id = real_of_[id];
    return TileAssignment::FromDevices(t.dims(), std::move(ids));
  }

  // Groups of the devices that differ only in the digits of `xs`, members
  // numbered row-major over `xs` in the given order.
  DeviceGroups GroupsOf(const Axes& xs) const {
    std::vector<int64_t> order;
    for (int a = 0; a < axes_->num_axes(); ++a)
      if (!Contains(xs, a)) order.push_back(a);
    for (int a : xs) order.push_back(a);
    const int64_t size = Product(xs);
    return DeviceGroups{AxisArray(order).Reshape({n_ / size, size})};
  }

  // This partition's digit along axis `a` (s32 scalar).
  Instruction* Digit(int a) {
    std::vector<int64_t> order(axes_->num_axes());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    return b_.TileIndices(AxisArray(order))[a];
  }

  // Row-major index of this partition over the digits of `xs`.
  Instruction* IndexOver(const Axes& xs) {
    Instruction* idx = nullptr;
    for (int a : xs) {
      Instruction* d = Digit(a);
      idx = idx == nullptr
                ? d
                : b_.Binary(Opcode::kAdd,
                            b_.Binary(Opcode::kMultiply, idx, b_.ScalarS32(axes_->size(a))), d);
    }
    return idx == nullptr ? b_.ScalarS32(0) : idx;
  }

  // Pads or trims the local dim `d` of x_ (a whole dim) to `len`.
  void Resize(int64_t d, int64_t len) {
    const int64_t cur = x_->shape().dimensions(d);
    if (cur < len) {
      std::vector<int64_t> high(rank_, 0);
      high[d] = len - cur;
      x_ = b_.PadHigh(x_, high);
    } else if (cur > len) {
      std::vector<int64_t> starts(rank_, 0);
      std::vector<int64_t> limits = x_->shape().dimensions();
      limits[d] = len;
      x_ = b_.Slice(x_, starts, limits);
    }
  }

  // Moves the minor axes `xs` of dim `a` to the minor end of dim `e`: dim e
  // is cut into Product(xs) pieces, piece j goes to member j of the group,
  // and the received pieces are stacked as the minor part of dim a.
  void AllToAll(int64_t a, int64_t e, const Axes& xs) {
    const int64_t k = Product(xs);
    std::vector<int64_t> dims = x_->shape().dimensions();
    MS_CHECK(dims[e] % k == 0);
    std::vector<int64_t> split;
    for (int64_t i = 0; i < rank_; ++i) {
      if (i == e) split.push_back(k);
      split.push_back(i == e ? dims[i] / k : dims[i]);
    }
    Instruction* x = b_.Reshape(x_, split);
    // Piece dim (at position e of `split`) to the front.
    std::vector<int64_t> to_front = {e};
    for (int64_t i = 0; i <= rank_; ++i)
      if (i != e) to_front.push_back(i);
    x = b_.Transpose(x, to_front);
    x = b_.AllToAll(x, 0, GroupsOf(xs));
    // x dims: [k, d0, .., d_{e-1}, dims[e]/k, .., d_{rank-1}]: put k just
    // before dim a and merge.
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < rank_; ++i) {
      if (i == a) perm.push_back(0);
      perm.push_back(i + 1);
    }
    x = b_.Transpose(x, perm);
    std::vector<int64_t> merged = dims;
    merged[a] *= k;
    merged[e] /= k;
    x_ = b_.Reshape(x, merged);
  }

  std::optional<PartitionedValue> Execute(const Layout& s, const Layout& t) {
    x_ = v_.hlo;
    const Shape& shape = v_.shape;
    std::vector<Axes> cur = s.dims;
    std::vector<int64_t> len(rank_), len_t(rank_);
    std::vector<size_t> keep(rank_), added(rank_);
    for (int64_t d = 0; d < rank_; ++d) {
      const int64_t nd = shape.dimensions(d);
      const int64_t ks = Product(s.dims[d]), kt = Product(t.dims[d]);
      len[d] = CeilDiv(nd, ks) * ks;
      len_t[d] = CeilDiv(nd, kt) * kt;
      size_t p = 0;
      if (len[d] == len_t[d])
        while (p < s.dims[d].size() && p < t.dims[d].size() && s.dims[d][p] == t.dims[d][p]) ++p;
      keep[d] = p;
      added[d] = p;  // target axes of dim d in place
    }
    auto extras = [&](int64_t d) { return cur[d].size() > keep[d] && added[d] == keep[d]; };
    auto needs = [&](int64_t d) {
      return Axes(t.dims[d].begin() + added[d], t.dims[d].end());
    };
    auto ready = [&](int64_t d) { return cur[d].size() == added[d]; };
    // A whole dim about to take its first target axes gets the target's
    // padded length.
    auto prepare = [&](int64_t d) {
      if (cur[d].empty()) {
        Resize(d, len_t[d]);
        len[d] = len_t[d];
      }
    };
    auto take = [&](int64_t d, const Axes& xs) {
      cur[d].insert(cur[d].end(), xs.begin(), xs.end());
      added[d] += xs.size();
    };

    // 1. Partial sums the target does not keep: reduce-scatter into a dim
    // that needs those axes next, all-reduce the rest.
    Axes reduce;
    for (int a : s.unreduced)
      if (!t.unreduced.count(a)) reduce.push_back(a);
    const PrimitiveType et = shape.element_type();
    Computation* sum = nullptr;
    if (!reduce.empty())
      sum = b_.Reducer(et == PrimitiveType::PRED ? Opcode::kOr : Opcode::kAdd, et);
    for (int64_t e = 0; e < rank_ && !reduce.empty(); ++e) {
      if (!ready(e)) continue;
      Axes want = needs(e), chunk;
      for (int a : want) {
        if (!Contains(reduce, a)) break;
        chunk.push_back(a);
      }
      if (chunk.empty()) continue;
      prepare(e);
      x_ = b_.ReduceScatter(x_, e, GroupsOf(chunk), sum);
      take(e, chunk);
      for (int a : chunk) reduce.erase(std::find(reduce.begin(), reduce.end(), a));
    }
    if (!reduce.empty()) x_ = b_.AllReduce(x_, GroupsOf(reduce), sum);

    // 2. Axes leaving a dim: all-to-all to a dim that needs them next, else
    // all-gather.
    for (int guard = 0; guard < 64; ++guard) {
      bool any = false, moved = false;
      for (int64_t a = 0; a < rank_ && !moved; ++a) {
        if (!extras(a)) continue;
        any = true;
        const Axes ex(cur[a].begin() + keep[a], cur[a].end());
        for (size_t len_x = ex.size(); len_x >= 1 && !moved; --len_x) {
          const Axes xs(ex.end() - len_x, ex.end());
          for (int64_t e = 0; e < rank_ && !moved; ++e) {
            if (e == a || !ready(e)) continue;
            Axes want = needs(e);
            if (want.size() < xs.size() || !std::equal(xs.begin(), xs.end(), want.begin()))
              continue;
            prepare(e);
            AllToAll(a, e, xs);
            cur[a].resize(cur[a].size() - xs.size());
            take(e, xs);
            moved = true;
          }
        }
      }
      if (!any) break;
      if (moved) continue;
      // No move: gather the longest minor run that no other dim needs (or
      // one axis, to break a cycle).
      int64_t best_dim = -1;
      size_t best_len = 0;
      for (int64_t a = 0; a < rank_; ++a) {
        if (!extras(a)) continue;
        if (best_dim < 0) best_dim = a;
        size_t run = 0;
        for (size_t i = cur[a].size(); i > keep[a]; --i) {
          const int ax = cur[a][i - 1];
          bool needed = false;
          for (int64_t e = 0; e < rank_; ++e)
            if (e != a && Contains(needs(e), ax)) needed = true;
          if (needed) break;
          ++run;
        }
        if (run > best_len) {
          best_len = run;
          best_dim = a;
        }
      }
      const int64_t a = best_dim;
      const size_t g = std::max<size_t>(best_len, 1);
      const Axes xs(cur[a].end() - g, cur[a].end());
      x_ = b_.AllGather(x_, a, GroupsOf(xs));
      cur[a].resize(cur[a].size() - g);
    }
    for (int64_t a = 0; a < rank_; ++a)
      if (extras(a)) return std::nullopt;  // MS guard: should not happen

    // 3. Missing target axes are replicated now: slice them locally.
    std::vector<Instruction*> starts(rank_, nullptr);
    bool slice = false;
    for (int64_t d = 0; d < rank_; ++d) {
      const Axes want = needs(d);
      if (want.empty()) continue;
      for (int a : want)
        if (s.manual.count(a) || t.unreduced.count(a)) return std::nullopt;
      prepare(d);
      const int64_t tile = len_t[d] / Product(t.dims[d]);
      starts[d] = b_.Binary(Opcode::kMultiply, IndexOver(want), b_.ScalarS32(tile));
      take(d, want);
      slice = true;
    }
    if (slice) {
      std::vector<int64_t> sizes = x_->shape().dimensions();
      for (int64_t d = 0; d < rank_; ++d) {
        if (starts[d] == nullptr) {
          starts[d] = b_.ScalarS32(0);
        } else {
          sizes[d] = len_t[d] / Product(t.dims[d]);
        }
      }
      x_ = b_.DynamicSlice(x_, starts, sizes);
    }
    // Dims the target leaves whole lose their padding.
    for (int64_t d = 0; d < rank_; ++d)
      if (t.dims[d].empty()) Resize(d, shape.dimensions(d));

    // 4. New partial sums: keep the value where every new unreduced digit
    // is 0, zero elsewhere.
    Axes fresh;
    for (int a : t.unreduced)
      if (!s.unreduced.count(a)) fresh.push_back(a);
    if (!fresh.empty()) {
      Instruction* keep_here = nullptr;
      for (int a : fresh) {
        Instruction* c = b_.Compare(Digit(a), b_.ScalarS32(0), ComparisonDirection::kEq);
        keep_here = keep_here == nullptr ? c : b_.Binary(Opcode::kAnd, keep_here, c);
      }
      const std::vector<int64_t>& local = x_->shape().dimensions();
      Instruction* zeros = b_.BroadcastScalar(b_.Zero(et), local);
      x_ = b_.Select(b_.BroadcastScalar(keep_here, local), x_, zeros);
    }
    MS_CHECK(x_->shape().dimensions() == dst_.TileShape(shape.dimensions()) ||
             !dst_.IsTiled());
    return PartitionedValue{x_, shape, dst_};
  }

  SpmdBuilder& b_;
  const PartitionedValue& v_;
  const Sharding& dst_;
  const int64_t n_;
  const int64_t rank_;
  Layout s_, t_;
  std::vector<int64_t> real_of_;  // virtual id -> real id; empty: identity
  std::optional<DeviceAxes> axes_;
  Instruction* x_ = nullptr;
};

}  // namespace

std::optional<PartitionedValue> TryAxisReshard(SpmdBuilder& b, const PartitionedValue& v,
                                               const Sharding& dst) {
  // MESHSPLIT_RESHARD_NO_PLAN=1 switches the planner off, to measure what
  // it saves against the older paths.
  static const bool off = [] {
    const char* e = std::getenv("MESHSPLIT_RESHARD_NO_PLAN");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  if (off || !v.shape.IsArray()) return std::nullopt;
  AxisPlanner planner(b, v, dst);
  if (!planner.Prepare()) return std::nullopt;
  auto out = planner.Run();
  if (out) RecordReshardPath(ReshardPath::kAxisPlan, v, dst);
  return out;
}

bool AxisReshardApplies(SpmdBuilder& b, const Shape& shape, const Sharding& src,
                        const Sharding& dst) {
  if (!shape.IsArray()) return false;
  PartitionedValue v{nullptr, shape, src};
  return AxisPlanner(b, v, dst).Prepare();
}

}  // namespace meshsplit::spmd
