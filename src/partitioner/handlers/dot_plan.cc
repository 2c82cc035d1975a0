// The mesh-axis planner of contractions (see dot_plan.h). The three
// shardings are read over their common device axes (sharding/device_axes.h,
// called atoms here); a plan gives each atom one role in the iteration space. That
// is XLA's recursive dot partitioning (group the devices by the batch dims,
// then by one side's free dims, then by the contracting dims, and partition
// the rest inside each group) written as a search over axis roles: a plan
// that puts axis x on a batch dim and axis y on a contracting dim runs the
// dot per x-group with a partial sum reduced only inside the y-groups. All
// of it is O(rank + axes), whatever the number of devices.
#include "partitioner/handlers/dot_plan.h"

#include <algorithm>

#include "sharding/device_axes.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {
namespace {

using Layout = AxisLayout;

double LocalElements(const Layout& l, const std::vector<int64_t>& dims, const DeviceAxes& mesh) {
  double e = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t tiles = 1;
    for (int a : l.dims[d]) tiles *= mesh.size(a);
    e *= static_cast<double>(CeilDiv(dims[d], tiles));
  }
  return e;
}

// Elements a partition sends or receives to go from `s` to `t`, following
// what Reshard does: reduce (reduce-scatter when the target tiles a free
// dim with exactly the summed axes), gather what the target does not keep
// as a major prefix (all-to-all when every gathered axis only moves to
// another dim), slice the rest (free).
double ReshardCost(Layout s, const Layout& t, const std::vector<int64_t>& dims,
                   const DeviceAxes& mesh) {
  double cost = 0;
  std::vector<int> reduce;
  for (int a : s.unreduced)
    if (!Contains(t.unreduced, a)) reduce.push_back(a);
  if (!reduce.empty()) {
    int scatter_dim = -1;
    for (size_t d = 0; d < dims.size() && scatter_dim < 0; ++d) {
      if (!s.dims[d].empty() || t.dims[d].size() != reduce.size()) continue;
      bool same = true;
      for (int a : reduce) same &= Contains(t.dims[d], a);
      if (same) scatter_dim = d;
    }
    cost += (scatter_dim >= 0 ? 1 : 2) * LocalElements(s, dims, mesh);
    if (scatter_dim >= 0) s.dims[scatter_dim] = t.dims[scatter_dim];
    else s.replicated.insert(s.replicated.end(), reduce.begin(), reduce.end());
    std::vector<int> kept;
    for (int a : s.unreduced)
      if (!Contains(reduce, a)) kept.push_back(a);
    s.unreduced = kept;
  }
  Layout mid = s;
  std::vector<int> gathered;
  for (size_t d = 0; d < dims.size(); ++d) {
    size_t p = 0;
    while (p < s.dims[d].size() && p < t.dims[d].size() && s.dims[d][p] == t.dims[d][p]) ++p;
    gathered.insert(gathered.end(), s.dims[d].begin() + p, s.dims[d].end());
    mid.dims[d].resize(p);
  }
  if (gathered.empty()) return cost;
  bool moved = true;
  for (int a : gathered) {
    bool found = false;
    for (const auto& td : t.dims) found |= Contains(td, a);
    moved &= found;
  }
  return cost + (moved ? LocalElements(s, dims, mesh) : LocalElements(mid, dims, mesh));
}

// The layout of a value whose dim d is iteration dim to_iter[d], under the
// iteration layout `it`. Atoms of contracting iteration dims the value does
// not have become unreduced when `sum_contracting`, others replicated.
Layout Project(const Layout& it, const std::vector<int64_t>& to_iter,
               const std::vector<bool>& contracting, bool sum_contracting) {
  Layout l;
  l.dims.resize(to_iter.size());
  std::vector<bool> kept(it.dims.size(), false);
  for (size_t d = 0; d < to_iter.size(); ++d) {
    if (to_iter[d] < 0) continue;
    l.dims[d] = it.dims[to_iter[d]];
    kept[to_iter[d]] = true;
  }
  for (size_t i = 0; i < it.dims.size(); ++i) {
    if (kept[i]) continue;
    std::vector<int>& dst = sum_contracting && contracting[i] ? l.unreduced : l.replicated;
    dst.insert(dst.end(), it.dims[i].begin(), it.dims[i].end());
  }
  l.replicated.insert(l.replicated.end(), it.replicated.begin(), it.replicated.end());
  l.manual = it.manual;
  return l;
}

// The search state: every atom's candidate roles (iteration dims, -1 =
// replicate) and how each source orders the atoms of an iteration dim.
class Planner {
 public:
  Planner(const ContractionSpace& space, const DeviceAxes& mesh, const Layout& lhs,
          const Layout& rhs, const Layout& out, const Shape& lhs_shape, const Shape& rhs_shape,
          const Shape& out_shape)
      : space_(space), mesh_(mesh), lhs_(lhs), rhs_(rhs), out_(out),
        lhs_dims_(lhs_shape.dimensions()), rhs_dims_(rhs_shape.dimensions()),
        out_dims_(out_shape.dimensions()) {
    const int n_atoms = mesh.num_axes();
    // Sources in the order their atom orders win: the operands first (a
    // weight already laid out right should stay put), then the result.
    sources_ = {{&lhs_, &space.lhs_to_iter}, {&rhs_, &space.rhs_to_iter},
                {&out_, &space.out_to_iter}};
    roles_.resize(n_atoms);
    for (int a = 0; a < n_atoms; ++a) {
      // Manual atoms keep their role: collectives never cross a manual
      // subgroup, so the contraction is planned inside each one.
      if (Contains(out.manual, a)) {
        roles_[a] = {kManualRole};
        continue;
      }
      // XLA's order of preference: the result's own layout, then the
      // operands'; replication last.
      for (int s : {2, 0, 1}) {
        const Layout& l = *sources_[s].first;
        const std::vector<int64_t>& to_iter = *sources_[s].second;
        for (size_t d = 0; d < l.dims.size(); ++d)
          if (Contains(l.dims[d], a) && to_iter[d] >= 0 &&
              std::find(roles_[a].begin(), roles_[a].end(), to_iter[d]) == roles_[a].end())
            roles_[a].push_back(to_iter[d]);
      }
      roles_[a].push_back(-1);
    }
  }

  // The cheapest iteration layout.
  Layout Solve() {
    std::vector<int> choice(roles_.size(), 0);
    double combos = 1;
    for (const auto& r : roles_) combos *= r.size();
    if (combos <= 4096) {
      Search(0, choice);
    } else {
      // Too many axes for an exhaustive search: coordinate descent from
      // the result's own layout, two sweeps.
      best_cost_ = Cost(Build(choice));
      best_ = Build(choice);
      for (int sweep = 0; sweep < 2; ++sweep) {
        for (size_t a = 0; a < roles_.size(); ++a) {
          int keep = choice[a];
          for (size_t r = 0; r < roles_[a].size(); ++r) {
            choice[a] = r;
            Layout l = Build(choice);
            double c = Cost(l);
            if (c < best_cost_) {
              best_cost_ = c;
              best_ = l;
              keep = r;
            }
          }
          choice[a] = keep;
        }
      }
    }
    return best_;
  }

 private:
  void Search(size_t a, std::vector<int>& choice) {
    if (a == roles_.size()) {
      Layout l = Build(choice);
      double c = Cost(l);
      if (!found_ || c < best_cost_) {
        found_ = true;
        best_cost_ = c;
        best_ = std::move(l);
      }
      return;
    }
    for (size_t r = 0; r < roles_[a].size(); ++r) {
      choice[a] = r;
      Search(a + 1, choice);
    }
  }

  // Atoms on one iteration dim are ordered as the first source that tiles
  // that dim with them does (major to minor), then by decreasing stride.
  Layout Build(const std::vector<int>& choice) const {
    Layout it;
    it.dims.resize(space_.n_iter);
    for (size_t a = 0; a < roles_.size(); ++a) {
      int64_t role = roles_[a][choice[a]];
      if (role == kManualRole) it.manual.push_back(a);
      else if (role < 0) it.replicated.push_back(a);
      else it.dims[role].push_back(a);
    }
    for (int64_t i = 0; i < space_.n_iter; ++i) {
      auto key = [&](int a) {
        for (size_t s = 0; s < sources_.size(); ++s) {
          const Layout& l = *sources_[s].first;
          const std::vector<int64_t>& to_iter = *sources_[s].second;
          for (size_t d = 0; d < l.dims.size(); ++d) {
            if (to_iter[d] != i) continue;
            auto pos = std::find(l.dims[d].begin(), l.dims[d].end(), a);
            if (pos != l.dims[d].end())
              return std::make_pair<int64_t, int64_t>(s, pos - l.dims[d].begin());
          }
        }
        return std::make_pair<int64_t, int64_t>(sources_.size(), a);
      };
      std::stable_sort(it.dims[i].begin(), it.dims[i].end(),
                       [&](int x, int y) { return key(x) < key(y); });
    }
    return it;
  }

  double Cost(const Layout& it) const {
    double c = ReshardCost(lhs_, Project(it, space_.lhs_to_iter, space_.contracting, false),
                           lhs_dims_, mesh_);
    c += ReshardCost(rhs_, Project(it, space_.rhs_to_iter, space_.contracting, false),
                     rhs_dims_, mesh_);
    c += ReshardCost(Project(it, space_.out_to_iter, space_.contracting, true), out_, out_dims_,
                     mesh_);
    // Among equally cheap plans, the one with the least local work.
    double work = 1;
    for (int64_t i = 0; i < space_.n_iter; ++i) {
      int64_t tiles = 1;
      for (int a : it.dims[i]) tiles *= mesh_.size(a);
      work *= static_cast<double>(CeilDiv(space_.iter_sizes[i], tiles));
    }
    return c + 1e-4 * work;
  }

  // The role of an atom of the manual subgroup (iteration dims are >= 0,
  // replication is -1).
  static constexpr int64_t kManualRole = -2;

  const ContractionSpace& space_;
  const DeviceAxes& mesh_;
  Layout lhs_, rhs_, out_;
  std::vector<int64_t> lhs_dims_, rhs_dims_, out_dims_;
  std::vector<std::pair<const Layout*, const std::vector<int64_t>*>> sources_;
  std::vector<std::vector<int64_t>> roles_;
  bool found_ = false;
  double best_cost_ = 0;
  Layout best_;
};

}  // namespace

ContractionSpace MakeContractionSpace(const Instruction& instr,
                                      const std::vector<int64_t>& lhs_to_iter,
                                      const std::vector<int64_t>& rhs_to_iter,
                                      const std::vector<int64_t>& out_to_iter, int64_t n_iter) {
  ContractionSpace s;
  s.lhs_to_iter = lhs_to_iter;
  s.rhs_to_iter = rhs_to_iter;
  s.out_to_iter = out_to_iter;
  s.n_iter = n_iter;
  s.iter_sizes.assign(n_iter, 1);
  s.contracting.assign(n_iter, true);
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  for (size_t d = 0; d < lhs_to_iter.size(); ++d)
    if (lhs_to_iter[d] >= 0) s.iter_sizes[lhs_to_iter[d]] = ls.dimensions(d);
  for (size_t d = 0; d < rhs_to_iter.size(); ++d)
    if (rhs_to_iter[d] >= 0) s.iter_sizes[rhs_to_iter[d]] = rs.dimensions(d);
  for (size_t d = 0; d < out_to_iter.size(); ++d)
    if (out_to_iter[d] >= 0) {
      s.contracting[out_to_iter[d]] = false;
      s.iter_sizes[out_to_iter[d]] = instr.shape().dimensions(d);
    }
  return s;
}

ContractionSpace ContractionSpaceOf(const std::vector<Factor>& factors, const Instruction& instr) {
  std::vector<int64_t> lhs_to_iter(instr.operand(0)->shape().rank(), -1);
  std::vector<int64_t> rhs_to_iter(instr.operand(1)->shape().rank(), -1);
  std::vector<int64_t> out_to_iter(instr.shape().rank(), -1);
  for (size_t i = 0; i < factors.size(); ++i) {
    const Factor& f = factors[i];
    if (!f.operand_dims.empty() && f.operand_dims[0] >= 0) lhs_to_iter[f.operand_dims[0]] = i;
    if (f.operand_dims.size() > 1 && f.operand_dims[1] >= 0) rhs_to_iter[f.operand_dims[1]] = i;
    if (f.result_dim >= 0) out_to_iter[f.result_dim] = i;
  }
  return MakeContractionSpace(instr, lhs_to_iter, rhs_to_iter, out_to_iter,
                              static_cast<int64_t>(factors.size()));
}

std::vector<int64_t> ContractingDims(const ContractionSpace& space, int side) {
  const std::vector<int64_t>& to_iter = side == 0 ? space.lhs_to_iter : space.rhs_to_iter;
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < space.n_iter; ++i) {
    if (!space.contracting[i]) continue;
    for (size_t d = 0; d < to_iter.size(); ++d)
      if (to_iter[d] == i) dims.push_back(d);
  }
  return dims;
}

std::optional<Sharding> PlanByMeshAxes(const ContractionSpace& space, const Shape& lhs_shape,
                                       const Shape& rhs_shape, const Shape& out_shape,
                                       const Sharding& lhs, const Sharding& rhs,
                                       const Sharding& out, int64_t num_partitions) {
  if (num_partitions <= 1) return std::nullopt;
  // The common device axes of the tiled shardings.
  const Sharding* shardings[3] = {&lhs, &rhs, &out};
  std::vector<const TileAssignment*> arrays;
  for (const Sharding* s : shardings) {
    if (s->IsReplicated()) continue;
    if (!s->IsTiled() || s->tile_assignment().num_devices() != num_partitions) return std::nullopt;
    arrays.push_back(&s->tile_assignment());
  }
  if (arrays.empty()) return std::nullopt;
  std::optional<DeviceAxes> mesh = DeviceAxes::Common(num_partitions, arrays);
  if (!mesh) return std::nullopt;
  std::optional<Layout> layouts[3];
  const int64_t ranks[3] = {lhs_shape.rank(), rhs_shape.rank(), out_shape.rank()};
  for (int k = 0; k < 3; ++k) {
    layouts[k] = ToAxisLayout(*shardings[k], ranks[k], *mesh);
    if (!layouts[k]) return std::nullopt;
  }
  // Inside a partially manual region the three must share the manual
  // atoms; a replicated operand holds the same data in every manual
  // subgroup, so its copy in each is that subgroup's manual data.
  std::vector<int> manual = layouts[2]->manual;
  std::sort(manual.begin(), manual.end());
  for (int k = 0; k < 3; ++k) {
    Layout& l = *layouts[k];
    if (shardings[k]->IsReplicated()) {
      std::vector<int> repl;
      for (int a : l.replicated)
        if (!Contains(manual, a)) repl.push_back(a);
      l.replicated = repl;
      l.manual = layouts[2]->manual;
    }
    std::vector<int> m = l.manual;
    std::sort(m.begin(), m.end());
    if (m != manual) return std::nullopt;
  }
  // Partial sums in the operands are resolved by Reshard first; a result
  // that asks for partial sums keeps the legacy path.
  if (!layouts[0]->unreduced.empty() || !layouts[1]->unreduced.empty() ||
      !layouts[2]->unreduced.empty())
    return std::nullopt;
  Planner planner(space, *mesh, *layouts[0], *layouts[1], *layouts[2], lhs_shape, rhs_shape,
                  out_shape);
  Layout it = planner.Solve();
  return FromAxisLayout(it, *mesh);
}

}  // namespace meshsplit::spmd
