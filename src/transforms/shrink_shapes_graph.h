// Internal to shape shrinking (shrink_shapes.h): one node per dim of every
// array value of a module, joined into equality classes by union-find, with
// what each class must respect (frozen, a minimum size, tile counts).
// shrink_shapes_rules.cc fills it from each op; shrink_shapes.cc picks sizes.
#pragma once

#include <cstdint>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "ir/module.h"

namespace meshsplit::shrink_internal {

class DimGraph {
 public:
  // One node per dim of each array leaf of every instruction of `module`
  // (tuple shapes flattened depth-first; tokens have no dims).
  explicit DimGraph(const Module& module);

  int LeafCount(const Instruction* i) const { return static_cast<int>(values_.at(i).base.size()); }
  int LeafRank(const Instruction* i, int leaf) const { return values_.at(i).rank[leaf]; }
  // REQUIRES: leaf < LeafCount(i), dim < LeafRank(i, leaf).
  int Node(const Instruction* i, int leaf, int64_t dim) const {
    return values_.at(i).base[leaf] + static_cast<int>(dim);
  }
  // Node of dim `dim` of a non-tuple value, or -1 if there is none.
  int ArrayNode(const Instruction* i, int64_t dim) const;
  int64_t OriginalSize(int node) const { return size_[node]; }
  int NodeCount() const { return static_cast<int>(parent_.size()); }

  int Find(int n);
  // Joins two dims that must stay equal. Dims of different sizes cannot be
  // equal: the joined class is frozen (a rule got it wrong; staying put is
  // safe).
  void Union(int a, int b);
  void Freeze(int n) { frozen_[Find(n)] = true; }
  void RaiseMin(int n, int64_t min) {
    int r = Find(n);
    min_[r] = std::max(min_[r], min);
  }
  void AddTiles(int n, int64_t tiles);

  // Dim-wise union of two array leaves of equal rank; otherwise both are
  // frozen.
  void UnionLeaves(const Instruction* a, int leaf_a, const Instruction* b, int leaf_b);
  // Leaf-wise union of `count` leaves starting at the given ones.
  void UnionLeafRange(const Instruction* a, int first_a, const Instruction* b, int first_b,
                      int count);
  // Leaf-wise union of two whole values with the same leaf structure;
  // otherwise both are frozen.
  void UnionValues(const Instruction* a, const Instruction* b);
  void FreezeLeaf(const Instruction* i, int leaf);
  void FreezeValue(const Instruction* i);

  bool frozen(int root) const { return frozen_[root]; }
  int64_t min_size(int root) const { return min_[root]; }
  int64_t tiles_lcm(int root) const { return lcm_[root]; }

 private:
  struct Value {
    std::vector<int> base;  // first node of each leaf
    std::vector<int> rank;
  };
  int NewNode(int64_t size);
  void AddLeaves(const Shape& s, Value& v);

  std::unordered_map<const Instruction*, Value> values_;
  std::vector<int> parent_;
  std::vector<int64_t> size_, min_, lcm_;
  std::vector<bool> frozen_;
};

// The first leaf and the leaf count of tuple element `index` of `shape`.
std::pair<int, int> LeafRange(const Shape& shape, int64_t index);
int CountLeaves(const Shape& shape);

// Adds the constraints of every instruction of `module`.
void AddOpConstraints(const Module& module, DimGraph& graph);

}  // namespace meshsplit::shrink_internal
