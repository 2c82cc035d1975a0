// PSharding: the working form of a sharding inside sharding propagation. It
// mirrors XLA's HloSharding (replicated, maximal, manual, unknown, tiled with
// trailing subgroup dims, flattened tuples, shard_as/shard_like groups) with an
// explicit device array, so the tile-assignment algebra propagation needs
// (reshape, transpose, slice, regroup) is simple. Propagation converts the
// IR's Sharding to and from this form through the shared XLA text syntax.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace meshsplit::propagation {

enum class SubgroupType { kManual, kReplicated };

// The device ids of a tile array, shared copy-on-write: propagation copies
// shardings for every inference, and reshapes (and transposes that keep the
// row-major order) reuse the same list, so those steps cost O(rank) instead of
// O(devices). Writers detach first. `iota()` is true when the list is known to
// be 0..n-1 (set by the producers that build it so; cleared by any write).
class DeviceList {
 public:
  DeviceList() = default;
  DeviceList(std::vector<int64_t> v)  // NOLINT: implicit, like the vector it was
      : v_(std::make_shared<std::vector<int64_t>>(std::move(v))) {}
  DeviceList(std::initializer_list<int64_t> v)
      : v_(std::make_shared<std::vector<int64_t>>(v)) {}
  static DeviceList Iota(int64_t n);

  size_t size() const { return v_ ? v_->size() : 0; }
  bool empty() const { return size() == 0; }
  int64_t operator[](size_t i) const { return (*v_)[i]; }
  const std::vector<int64_t>& vec() const { return v_ ? *v_ : Empty(); }
  std::vector<int64_t>::const_iterator begin() const { return vec().begin(); }
  std::vector<int64_t>::const_iterator end() const { return vec().end(); }
  // Identity of the shared storage (equal ids => equal contents).
  const void* id() const { return v_.get(); }
  bool iota() const { return iota_; }

  // Writers: copy the list first if it is shared.
  std::vector<int64_t>& mut() {
    iota_ = false;
    if (!v_) {
      v_ = std::make_shared<std::vector<int64_t>>();
    } else if (v_.use_count() > 1) {
      v_ = std::make_shared<std::vector<int64_t>>(*v_);
    }
    return *v_;
  }
  void resize(size_t n) { mut().resize(n); }
  void push_back(int64_t d) { mut().push_back(d); }
  void set(size_t i, int64_t d) { mut()[i] = d; }

  bool operator==(const DeviceList& o) const {
    if (v_ == o.v_) return true;
    if (iota_ && o.iota_) return size() == o.size();
    return vec() == o.vec();
  }
  bool operator!=(const DeviceList& o) const { return !(*this == o); }

 private:
  static const std::vector<int64_t>& Empty() {
    static const std::vector<int64_t> e;
    return e;
  }
  std::shared_ptr<std::vector<int64_t>> v_;
  bool iota_ = false;
};

// A tile assignment: an N-d array of device ids, row-major.
struct TileArray {
  std::vector<int64_t> dims;
  DeviceList devices;

  int64_t num_elements() const;
  int64_t dim(int i) const { return dims[i]; }
  int num_dimensions() const { return static_cast<int>(dims.size()); }
  // REQUIRES: product(new_dims) == num_elements().
  TileArray Reshape(std::vector<int64_t> new_dims) const;
  // Result dim i is source dim perm[i].
  TileArray Transpose(const std::vector<int64_t>& perm) const;
  // Sub-array [starts, limits).
  TileArray Slice(const std::vector<int64_t>& starts,
                  const std::vector<int64_t>& limits) const;
  int64_t At(const std::vector<int64_t>& index) const;
  bool operator==(const TileArray& o) const {
    return dims == o.dims && devices == o.devices;
  }
};

class PSharding {
 public:
  enum class Kind { kReplicated, kMaximal, kManual, kUnknown, kTiled, kTuple };

  PSharding() = default;  // replicated
  static PSharding Replicate() { return PSharding(); }
  static PSharding Manual();
  static PSharding Unknown();
  static PSharding Maximal(int64_t device);
  // Plain tiling: every tile-array dim is a data dim.
  static PSharding Tile(TileArray tiles);
  // Last tile-array dim replicates (XLA's last_tile_dim_replicate). Collapses
  // to Replicate / Tile in the degenerate cases and sorts each group.
  static PSharding PartialTile(TileArray tiles);
  // Trailing `types.size()` dims are subgroups. Normalises like XLA: drops
  // size-1 subgroup dims, merges equal types (manual before replicated).
  static PSharding Subgroup(TileArray tiles, std::vector<SubgroupType> types);
  // Tuple of flattened leaf shardings.
  static PSharding Tuple(std::vector<PSharding> leaves);

  // Parses XLA sharding text, e.g. "{devices=[2,1]0,1 last_tile_dim_replicate}".
  // Metadata is dropped except that the CSE-prevention marker is remembered.
  static StatusOr<PSharding> Parse(std::string_view text);
  // XLA text with explicit device lists.
  std::string ToString() const;

  Kind kind() const { return kind_; }
  bool IsTuple() const { return kind_ == Kind::kTuple; }
  // For tuples these hold when they hold for every leaf.
  bool IsReplicated() const;
  bool IsTileMaximal() const;
  bool IsManual() const;
  bool IsUnknown() const;
  bool IsTiled() const { return kind_ == Kind::kTiled; }
  bool IsManualLeaf() const { return kind_ == Kind::kManual; }
  bool IsTileMaximalLeaf() const {
    return kind_ == Kind::kReplicated || kind_ == Kind::kMaximal;
  }
  bool IsReplicatedLeaf() const { return kind_ == Kind::kReplicated; }
  bool HasUniqueDevice() const { return kind_ == Kind::kMaximal; }
  int64_t unique_device() const { return tiles_.devices[0]; }

  const TileArray& tile_assignment() const { return tiles_; }
  const std::vector<SubgroupType>& subgroup_types() const { return subgroup_; }
  // Tile count of data dim i; 1 for non-tiled shardings or i past the data.
  int64_t TileDim(int i) const;
  int TiledDataRank() const;
  bool ReplicateOnLastTileDim() const {
    return subgroup_.size() == 1 && subgroup_[0] == SubgroupType::kReplicated;
  }
  bool HasPartialReplication() const;
  bool IsManualSubgroup() const;
  int SubgroupReplicationDim() const;  // -1 if none
  int SubgroupManualDim() const;       // -1 if none
  // Product of the data-dim tile counts (1 if not tiled).
  int64_t NumTiles() const;

  const std::vector<PSharding>& tuple_elements() const { return elements_; }
  std::vector<PSharding>& mutable_tuple_elements() { return elements_; }

  // shard_as / shard_like groups (-1 = none).
  int64_t shard_group_id() const { return shard_group_id_; }
  bool shard_as() const { return shard_as_; }
  bool IsShardGroup() const { return shard_group_id_ >= 0; }
  void SetShardGroup(int64_t id, bool shard_as) {
    shard_group_id_ = id;
    shard_as_ = shard_as;
  }
  void ClearShardGroup() { shard_group_id_ = -1; }

  bool cse_prevention() const { return cse_prevention_; }
  void set_cse_prevention(bool v) { cse_prevention_ = v; }

  // Structural equality (same representation; shard groups compared too).
  bool operator==(const PSharding& o) const;
  bool operator!=(const PSharding& o) const { return !(*this == o); }

 private:
  Kind kind_ = Kind::kReplicated;
  TileArray tiles_;
  std::vector<SubgroupType> subgroup_;
  std::vector<PSharding> elements_;
  int64_t shard_group_id_ = -1;
  bool shard_as_ = false;
  bool cse_prevention_ = false;
};

// The README's normal form: iota expanded (always, here), subgroup dims
// normalised, degenerate cases collapsed. Two shardings place data alike iff
// their normal forms are structurally equal.
PSharding Normalize(const PSharding& s);
// Hash of a leaf's structure (kind, tile dims, subgroup types, device count,
// shard group, CSE marker) for caches that then compare with operator==; the
// device ids themselves are not read (O(rank)).
uint64_t StructureHash(const PSharding& s);
bool SemanticallyEqual(const PSharding& a, const PSharding& b);

}  // namespace meshsplit::propagation
