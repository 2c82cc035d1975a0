// Sharding: XLA's HloSharding — how a value is laid out over devices (see
// ../shared/DESIGN.md). The IR stores one per instruction, the text parser and
// printer read and write it, propagation and the partitioner query it. Values
// are kept canonical (subgroups normalised, iota tile assignments), so
// structural equality is semantic equality.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sharding/tile_assignment.h"
#include "support/status.h"

namespace meshsplit {

// The role of a trailing ("subgroup") dim of a tile assignment, in canonical
// order: manual before unreduced before replicated.
enum class SubgroupType { kManual = 0, kUnreduced = 1, kReplicated = 2 };
const char* SubgroupTypeName(SubgroupType t);

// `shard_as N` / `shard_like N`: values in one group get the same sharding.
struct ShardGroup {
  int64_t id = 0;
  bool shard_as = true;  // false: shard_like
  bool operator==(const ShardGroup& o) const {
    return id == o.id && shard_as == o.shard_as;
  }
};

// The devices of one collective per group: row g of `devices` (dims
// [num_groups, group_size]) lists the devices of group g. Its iota form maps
// directly onto ReplicaGroups' iota form (group_dims = devices.dims()).
struct DeviceGroups {
  TileAssignment devices;
  int64_t num_groups() const { return devices.dim(0); }
  int64_t group_size() const { return devices.dim(1); }
  // Explicit groups, O(devices); for tests, the runtime and explicit text.
  std::vector<std::vector<int64_t>> Expand() const;
  // The iota fields of XLA's replica_groups `[G,S]<=[R..]T(P..)` (perm empty
  // when it is the identity), or nullopt when the groups are explicit. Maps
  // one-to-one onto ir/attributes.h ReplicaGroups' iota form.
  struct IotaForm {
    std::vector<int64_t> group_dims, reshape_dims, transpose_perm;
  };
  std::optional<IotaForm> AsIota() const;
  // replica_groups text: "[2,4]<=[8]" or "{{0,1},{2,3}}".
  std::string ToString() const;
};

class Sharding {
 public:
  enum class Kind {
    kReplicated,
    kManual,
    kUnreduced,
    kUnknown,
    kMaximal,
    kTiled,
    kTuple,
  };

  Sharding() = default;  // replicated
  static Sharding Replicate() { return Sharding(); }
  static Sharding Manual();
  static Sharding Unreduced();
  static Sharding Unknown();
  static Sharding Maximal(int64_t device);
  // Every dim of `tiles` is a data dim.
  static Sharding Tile(TileAssignment tiles);
  // The last dim of `tiles` is a replicated subgroup.
  static Sharding PartialTile(TileAssignment tiles);
  // The last types.size() dims of `tiles` are subgroups of those types.
  // Normalises (drops size-1 subgroups, merges equal types, orders them,
  // sorts replicated groups, collapses degenerate cases).
  static Sharding Subgroup(TileAssignment tiles,
                           std::vector<SubgroupType> types);
  static Sharding Tuple(std::vector<Sharding> elements);
  // A tuple with `leaf_count` copies of `element` (a non-tuple sharding on a
  // tuple-shaped value means the same sharding for every leaf).
  static Sharding SingleTuple(int64_t leaf_count, const Sharding& element);

  // Parses the text of a sharding attribute including its outer braces, e.g.
  // "{devices=[2,1]0,1}" or "{{replicated}, {maximal device=0}}".
  // Errors carry a column offset relative to `text` in their message only;
  // the caller attaches the location.
  static StatusOr<Sharding> Parse(std::string_view text);
  // Same, but on error stores the 0-based offset of the culprit in `text`
  // and leaves the column out of the message (the caller points at it).
  static StatusOr<Sharding> Parse(std::string_view text, size_t* error_offset);

  // Canonical text, with outer braces.
  std::string ToString(bool include_metadata = true) const;

  // Semantic equality: the same devices hold the same elements, same shard
  // group. Metadata is ignored.
  bool operator==(const Sharding& other) const;
  bool operator!=(const Sharding& other) const { return !(*this == other); }
  // Consistent with operator== (metadata ignored).
  size_t Hash() const;

  // --- kind queries (tuples: true when every element is) -------------------
  Kind kind() const { return kind_; }
  bool IsReplicated() const;
  bool IsManual() const;
  bool IsUnreduced() const;
  bool IsUnknown() const { return kind_ == Kind::kUnknown; }
  bool IsMaximal() const { return kind_ == Kind::kMaximal; }
  // Replicated or maximal: every device holding the value holds all of it.
  bool IsTileMaximal() const;
  bool IsTiled() const { return kind_ == Kind::kTiled; }
  bool IsTuple() const { return kind_ == Kind::kTuple; }
  // Tiled with a replicated subgroup dim.
  bool HasPartialReplication() const;
  // Tiled with exactly one subgroup, replicated (`last_tile_dim_replicate`).
  bool ReplicateOnLastTileDim() const;
  // Tiled with a manual subgroup dim.
  bool HasManualSubgroup() const;

  // The one device holding the value: maximal, or a tuple whose elements
  // are all maximal on the same device. nullopt otherwise.
  std::optional<int64_t> UniqueDevice() const;

  // --- accessors -----------------------------------------------------------
  // REQUIRES: IsMaximal().
  int64_t device() const { return device_; }
  // REQUIRES: IsTiled(). Includes the subgroup dims.
  const TileAssignment& tile_assignment() const { return tiles_; }
  const std::vector<SubgroupType>& subgroup_types() const {
    return subgroup_types_;
  }
  const std::vector<Sharding>& tuple_elements() const { return elements_; }
  std::vector<Sharding>& mutable_tuple_elements() { return elements_; }
  const std::optional<ShardGroup>& shard_group() const { return shard_group_; }
  void set_shard_group(std::optional<ShardGroup> g) { shard_group_ = g; }
  // Verbatim text between "metadata={" and its closing brace; "" if none.
  const std::string& metadata() const { return metadata_; }
  void set_metadata(std::string m) { metadata_ = std::move(m); }
  // Copy without metadata (recursively), for printing in tests and hashing.
  Sharding WithoutMetadata() const;

  // --- tiling queries (O(rank) for iota tile assignments) ------------------
  // Number of data dims (tile assignment rank minus subgroup dims).
  // REQUIRES: IsTiled().
  int64_t TiledDataRank() const;
  // Tiles along data dim i; 1 for tile-maximal / manual shardings.
  int64_t TileDim(int64_t i) const;
  // Product of the data tile dims (1 if not tiled).
  int64_t NumTiles() const;
  // Size of the subgroup dim of `type`, or 1 without one.
  int64_t SubgroupSize(SubgroupType type) const;
  // Index (in the tile assignment) of the subgroup dim of `type`, or -1.
  int64_t SubgroupDim(SubgroupType type) const;
  // Devices named by the sharding: tile assignment size (tiled), 1
  // (maximal); 0 when the sharding does not say (replicated, manual, ...).
  int64_t NumDevicesInAssignment() const;
  bool UsesDevice(int64_t device) const;

  // Per-device shape of a value of global `dims`: ceil(dims[i] / tiles_i).
  // Tile-maximal and manual shardings return `dims`. REQUIRES: !IsTuple().
  std::vector<int64_t> TileShape(const std::vector<int64_t>& dims) const;
  // Tile index (data dims only) held by `device`. Tile-maximal: zeros of
  // data rank 0 (empty). nullopt if the device is not in the assignment.
  std::optional<std::vector<int64_t>> TileIndexForDevice(int64_t device) const;
  // Device at a tile index: either data rank (subgroup indices 0) or the
  // full tile assignment rank. REQUIRES: IsTiled().
  int64_t DeviceForTileIndex(const std::vector<int64_t>& index) const;
  // First element (per dim) of `device`'s tile; uneven dims make the last
  // tiles short or empty (offset clamps to dims[i]). Tile-maximal / manual:
  // zeros. REQUIRES: UsesDevice(device) for tiled shardings.
  std::vector<int64_t> TileOffsetForDevice(const std::vector<int64_t>& dims,
                                           int64_t device) const;
  // One past the last element (per dim) of `device`'s tile, clamped.
  std::vector<int64_t> TileLimitForDevice(const std::vector<int64_t>& dims,
                                          int64_t device) const;

  // Groups of devices that differ only in their index along the tile
  // assignment dims `tile_dims` (data or subgroup dims). A collective over
  // those mesh dims runs once per group. Stays iota when the tile assignment
  // allows. REQUIRES: IsTiled().
  DeviceGroups GroupsAlongDims(const std::vector<int64_t>& tile_dims) const;
  // The complement: groups along every tile dim except `tile_dims`.
  DeviceGroups GroupsAlongAllDimsExcept(
      const std::vector<int64_t>& tile_dims) const;

  // Checks the sharding against a non-tuple value of rank `rank` on
  // `num_devices` devices. Messages like "sharding has 3 tile dims but the
  // shape has rank 2".
  Status Validate(int64_t rank, int64_t num_devices) const;
  // Same for a tuple value whose leaves have `leaf_ranks`. A non-tuple
  // sharding applies to every leaf.
  Status ValidateTuple(const std::vector<int64_t>& leaf_ranks,
                       int64_t num_devices) const;

 private:
  Kind kind_ = Kind::kReplicated;
  int64_t device_ = 0;
  TileAssignment tiles_;
  std::vector<SubgroupType> subgroup_types_;
  std::vector<Sharding> elements_;
  std::optional<ShardGroup> shard_group_;
  std::string metadata_;
};

struct ShardingHash {
  size_t operator()(const Sharding& s) const { return s.Hash(); }
};

}  // namespace meshsplit
