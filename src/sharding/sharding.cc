// Sharding construction (with XLA's subgroup normalisation), equality and
// the tiling queries. Text parsing and printing live in sharding_text.cc.
#include "sharding/sharding.h"

#include <algorithm>
#include <numeric>

#include "support/check.h"
#include "support/small_helpers.h"

namespace meshsplit {

const char* SubgroupTypeName(SubgroupType t) {
  switch (t) {
    case SubgroupType::kManual:
      return "manual";
    case SubgroupType::kUnreduced:
      return "unreduced";
    case SubgroupType::kReplicated:
      return "replicated";
  }
  return "?";
}

std::vector<std::vector<int64_t>> DeviceGroups::Expand() const {
  std::vector<int64_t> ids = devices.Devices();
  std::vector<std::vector<int64_t>> out(num_groups());
  for (int64_t g = 0; g < num_groups(); ++g)
    out[g].assign(ids.begin() + g * group_size(),
                  ids.begin() + (g + 1) * group_size());
  return out;
}

std::optional<DeviceGroups::IotaForm> DeviceGroups::AsIota() const {
  if (!devices.is_iota()) return std::nullopt;
  IotaForm f;
  f.group_dims = devices.dims();
  f.reshape_dims = devices.reshape_dims();
  if (!devices.HasIdentityPerm()) f.transpose_perm = devices.transpose_perm();
  return f;
}

std::string DeviceGroups::ToString() const {
  if (devices.is_iota()) return devices.ToString();
  std::string s = "{";
  auto groups = Expand();
  for (size_t g = 0; g < groups.size(); ++g) {
    s += g ? ",{" : "{";
    for (size_t i = 0; i < groups[g].size(); ++i)
      s += (i ? "," : "") + std::to_string(groups[g][i]);
    s += "}";
  }
  return s + "}";
}

Sharding Sharding::Manual() {
  Sharding s;
  s.kind_ = Kind::kManual;
  return s;
}

Sharding Sharding::Unreduced() {
  Sharding s;
  s.kind_ = Kind::kUnreduced;
  return s;
}

Sharding Sharding::Unknown() {
  Sharding s;
  s.kind_ = Kind::kUnknown;
  return s;
}

Sharding Sharding::Maximal(int64_t device) {
  Sharding s;
  s.kind_ = Kind::kMaximal;
  s.device_ = device;
  return s;
}

Sharding Sharding::Tile(TileAssignment tiles) {
  Sharding s;
  s.kind_ = Kind::kTiled;
  s.tiles_ = std::move(tiles);
  return s;
}

Sharding Sharding::PartialTile(TileAssignment tiles) {
  return Subgroup(std::move(tiles), {SubgroupType::kReplicated});
}

Sharding Sharding::Subgroup(TileAssignment tiles,
                            std::vector<SubgroupType> types) {
  const int64_t rank = tiles.num_dimensions();
  const int64_t data_rank = rank - static_cast<int64_t>(types.size());
  MS_CHECK(data_rank >= 0);
  if (types.empty()) return Tile(std::move(tiles));
  // Gather the subgroup dims by type in canonical order; size-1 dims go last
  // so the reshape below drops them.
  std::vector<int64_t> perm(data_rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<int64_t> new_dims(tiles.dims().begin(),
                                tiles.dims().begin() + data_rank);
  std::vector<SubgroupType> new_types;
  for (SubgroupType t : {SubgroupType::kManual, SubgroupType::kUnreduced,
                         SubgroupType::kReplicated}) {
    int64_t size = 1;
    for (int64_t i = data_rank; i < rank; ++i) {
      if (types[i - data_rank] == t && tiles.dim(i) > 1) {
        perm.push_back(i);
        size *= tiles.dim(i);
      }
    }
    if (size > 1) {
      new_dims.push_back(size);
      new_types.push_back(t);
    }
  }
  for (int64_t i = data_rank; i < rank; ++i)
    if (tiles.dim(i) == 1) perm.push_back(i);
  bool identity = true;
  for (int64_t i = 0; i < rank; ++i) identity &= perm[i] == i;
  if (!identity) tiles = tiles.Transpose(perm);
  tiles = tiles.Reshape(new_dims);

  if (new_types.empty()) return Tile(std::move(tiles));
  int64_t data_tiles = 1;
  for (int64_t i = 0; i < data_rank; ++i) data_tiles *= tiles.dim(i);
  if (data_tiles == 1 && new_types.size() == 1) {
    switch (new_types[0]) {
      case SubgroupType::kManual:
        return Manual();
      case SubgroupType::kUnreduced:
        return Unreduced();
      case SubgroupType::kReplicated:
        return Replicate();
    }
  }
  // Devices inside one replicated group hold the same data, so their order
  // carries no meaning: sort them to get one representation.
  if (new_types.back() == SubgroupType::kReplicated)
    tiles = tiles.SortLastDim();
  Sharding s;
  s.kind_ = Kind::kTiled;
  s.tiles_ = std::move(tiles);
  s.subgroup_types_ = std::move(new_types);
  return s;
}

Sharding Sharding::Tuple(std::vector<Sharding> elements) {
  Sharding s;
  s.kind_ = Kind::kTuple;
  s.elements_ = std::move(elements);
  return s;
}

Sharding Sharding::SingleTuple(int64_t leaf_count, const Sharding& element) {
  MS_CHECK(!element.IsTuple());
  return Tuple(std::vector<Sharding>(leaf_count, element));
}

std::optional<int64_t> Sharding::UniqueDevice() const {
  if (kind_ == Kind::kMaximal) return device_;
  if (kind_ != Kind::kTuple || elements_.empty()) return std::nullopt;
  std::optional<int64_t> device;
  for (const Sharding& e : elements_) {
    std::optional<int64_t> d = e.UniqueDevice();
    if (!d || (device && *d != *device)) return std::nullopt;
    device = d;
  }
  return device;
}

bool Sharding::operator==(const Sharding& other) const {
  if (kind_ != other.kind_ || !(shard_group_ == other.shard_group_))
    return false;
  switch (kind_) {
    case Kind::kReplicated:
    case Kind::kManual:
    case Kind::kUnreduced:
    case Kind::kUnknown:
      return true;
    case Kind::kMaximal:
      return device_ == other.device_;
    case Kind::kTiled:
      return subgroup_types_ == other.subgroup_types_ &&
             tiles_ == other.tiles_;
    case Kind::kTuple:
      return elements_ == other.elements_;
  }
  return false;
}

size_t Sharding::Hash() const {
  size_t h = static_cast<size_t>(kind_) * 0x9e3779b97f4a7c15ull;
  auto mix = [&](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  if (shard_group_) mix(shard_group_->id * 2 + shard_group_->shard_as);
  switch (kind_) {
    case Kind::kMaximal:
      mix(device_);
      break;
    case Kind::kTiled:
      mix(tiles_.Hash());
      for (SubgroupType t : subgroup_types_) mix(static_cast<size_t>(t));
      break;
    case Kind::kTuple:
      for (const Sharding& e : elements_) mix(e.Hash());
      break;
    case Kind::kReplicated:
    case Kind::kManual:
    case Kind::kUnreduced:
    case Kind::kUnknown:
      break;
  }
  return h;
}

bool Sharding::IsReplicated() const {
  if (kind_ == Kind::kTuple)
    return std::all_of(elements_.begin(), elements_.end(),
                       [](const Sharding& s) { return s.IsReplicated(); });
  return kind_ == Kind::kReplicated;
}

bool Sharding::IsManual() const {
  if (kind_ == Kind::kTuple)
    return std::all_of(elements_.begin(), elements_.end(),
                       [](const Sharding& s) { return s.IsManual(); });
  return kind_ == Kind::kManual;
}

bool Sharding::IsUnreduced() const {
  if (kind_ == Kind::kTuple)
    return std::all_of(elements_.begin(), elements_.end(),
                       [](const Sharding& s) { return s.IsUnreduced(); });
  return kind_ == Kind::kUnreduced;
}

bool Sharding::IsTileMaximal() const {
  if (kind_ == Kind::kTuple)
    return std::all_of(elements_.begin(), elements_.end(),
                       [](const Sharding& s) { return s.IsTileMaximal(); });
  return kind_ == Kind::kReplicated || kind_ == Kind::kMaximal;
}

bool Sharding::HasPartialReplication() const {
  return SubgroupDim(SubgroupType::kReplicated) >= 0;
}

bool Sharding::ReplicateOnLastTileDim() const {
  return kind_ == Kind::kTiled && subgroup_types_.size() == 1 &&
         subgroup_types_[0] == SubgroupType::kReplicated;
}

bool Sharding::HasManualSubgroup() const {
  return SubgroupDim(SubgroupType::kManual) >= 0;
}

Sharding Sharding::WithoutMetadata() const {
  Sharding s = *this;
  s.metadata_.clear();
  for (Sharding& e : s.elements_) e = e.WithoutMetadata();
  return s;
}

int64_t Sharding::TiledDataRank() const {
  MS_CHECK(kind_ == Kind::kTiled);
  return tiles_.num_dimensions() -
         static_cast<int64_t>(subgroup_types_.size());
}

int64_t Sharding::TileDim(int64_t i) const {
  if (kind_ != Kind::kTiled) return 1;
  MS_CHECK(i >= 0 && i < TiledDataRank());
  return tiles_.dim(i);
}

int64_t Sharding::NumTiles() const {
  if (kind_ != Kind::kTiled) return 1;
  int64_t n = 1;
  for (int64_t i = 0; i < TiledDataRank(); ++i) n *= tiles_.dim(i);
  return n;
}

int64_t Sharding::SubgroupDim(SubgroupType type) const {
  if (kind_ != Kind::kTiled) return -1;
  for (size_t k = 0; k < subgroup_types_.size(); ++k)
    if (subgroup_types_[k] == type) return TiledDataRank() + k;
  return -1;
}

int64_t Sharding::SubgroupSize(SubgroupType type) const {
  int64_t d = SubgroupDim(type);
  return d < 0 ? 1 : tiles_.dim(d);
}

int64_t Sharding::NumDevicesInAssignment() const {
  if (kind_ == Kind::kTiled) return tiles_.num_devices();
  if (kind_ == Kind::kMaximal) return 1;
  return 0;
}

bool Sharding::UsesDevice(int64_t device) const {
  switch (kind_) {
    case Kind::kTiled:
      return tiles_.UsesDevice(device);
    case Kind::kMaximal:
      return device == device_;
    case Kind::kTuple:
      return std::any_of(elements_.begin(), elements_.end(),
                         [&](const Sharding& s) { return s.UsesDevice(device); });
    case Kind::kReplicated:
    case Kind::kManual:
    case Kind::kUnreduced:
    case Kind::kUnknown:
      return true;
  }
  return true;
}

std::vector<int64_t> Sharding::TileShape(
    const std::vector<int64_t>& dims) const {
  MS_CHECK(kind_ != Kind::kTuple);
  if (kind_ != Kind::kTiled) return dims;
  MS_CHECK(static_cast<int64_t>(dims.size()) == TiledDataRank());
  std::vector<int64_t> out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    out[i] = CeilDiv(dims[i], tiles_.dim(i));
  return out;
}

std::optional<std::vector<int64_t>> Sharding::TileIndexForDevice(
    int64_t device) const {
  MS_CHECK(kind_ != Kind::kTuple);
  if (kind_ == Kind::kMaximal) {
    if (device != device_) return std::nullopt;
    return std::vector<int64_t>{};
  }
  if (kind_ != Kind::kTiled) return std::vector<int64_t>{};
  auto index = tiles_.IndexOfDevice(device);
  if (!index) return std::nullopt;
  index->resize(TiledDataRank());
  return index;
}

int64_t Sharding::DeviceForTileIndex(const std::vector<int64_t>& index) const {
  MS_CHECK(kind_ == Kind::kTiled);
  if (static_cast<int64_t>(index.size()) == tiles_.num_dimensions())
    return tiles_.DeviceAt(index);
  MS_CHECK(static_cast<int64_t>(index.size()) == TiledDataRank());
  std::vector<int64_t> full = index;
  full.resize(tiles_.num_dimensions(), 0);
  return tiles_.DeviceAt(full);
}

std::vector<int64_t> Sharding::TileOffsetForDevice(
    const std::vector<int64_t>& dims, int64_t device) const {
  MS_CHECK(kind_ != Kind::kTuple);
  if (kind_ != Kind::kTiled) return std::vector<int64_t>(dims.size(), 0);
  MS_CHECK(static_cast<int64_t>(dims.size()) == TiledDataRank());
  auto index = TileIndexForDevice(device);
  MS_CHECK_MSG(index.has_value(), "device " << device << " not in sharding");
  std::vector<int64_t> out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    out[i] = std::min((*index)[i] * CeilDiv(dims[i], tiles_.dim(i)), dims[i]);
  return out;
}

std::vector<int64_t> Sharding::TileLimitForDevice(
    const std::vector<int64_t>& dims, int64_t device) const {
  MS_CHECK(kind_ != Kind::kTuple);
  if (kind_ != Kind::kTiled) return dims;
  MS_CHECK(static_cast<int64_t>(dims.size()) == TiledDataRank());
  auto index = TileIndexForDevice(device);
  MS_CHECK_MSG(index.has_value(), "device " << device << " not in sharding");
  std::vector<int64_t> out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    out[i] = std::min(((*index)[i] + 1) * CeilDiv(dims[i], tiles_.dim(i)),
                      dims[i]);
  return out;
}

DeviceGroups Sharding::GroupsAlongDims(
    const std::vector<int64_t>& tile_dims) const {
  MS_CHECK(kind_ == Kind::kTiled);
  const int64_t rank = tiles_.num_dimensions();
  std::vector<bool> grouped(rank, false);
  for (int64_t d : tile_dims) {
    MS_CHECK(d >= 0 && d < rank);
    grouped[d] = true;
  }
  // Other dims first (they number the groups), grouped dims last (they
  // number the members), each in increasing order.
  std::vector<int64_t> perm;
  int64_t num_groups = 1, group_size = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (!grouped[d]) {
      perm.push_back(d);
      num_groups *= tiles_.dim(d);
    }
  for (int64_t d = 0; d < rank; ++d)
    if (grouped[d]) {
      perm.push_back(d);
      group_size *= tiles_.dim(d);
    }
  return DeviceGroups{tiles_.Transpose(perm).Reshape({num_groups, group_size})};
}

DeviceGroups Sharding::GroupsAlongAllDimsExcept(
    const std::vector<int64_t>& tile_dims) const {
  MS_CHECK(kind_ == Kind::kTiled);
  std::vector<int64_t> others;
  for (int64_t d = 0; d < tiles_.num_dimensions(); ++d)
    if (std::find(tile_dims.begin(), tile_dims.end(), d) == tile_dims.end())
      others.push_back(d);
  return GroupsAlongDims(others);
}

Status Sharding::Validate(int64_t rank, int64_t num_devices) const {
  switch (kind_) {
    case Kind::kReplicated:
    case Kind::kManual:
    case Kind::kUnreduced:
    case Kind::kUnknown:
      return Status::Ok();
    case Kind::kTuple:
      return Status::Error("tuple sharding " + ToString(false) +
                           " on a non-tuple value");
    case Kind::kMaximal:
      if (device_ < 0 || device_ >= num_devices)
        return Status::Error("sharding places the value on device " +
                             std::to_string(device_) + " but there are only " +
                             std::to_string(num_devices) + " devices");
      return Status::Ok();
    case Kind::kTiled:
      break;
  }
  if (TiledDataRank() != rank)
    return Status::Error("sharding has " + std::to_string(TiledDataRank()) +
                         " tile dims but the shape has rank " +
                         std::to_string(rank));
  const int64_t max_device = tiles_.MaxDevice();
  if (tiles_.MinDevice() < 0)
    return Status::Error("sharding tile assignment has a negative device id");
  if (max_device >= num_devices)
    return Status::Error("sharding uses device " + std::to_string(max_device) +
                         " but there are only " + std::to_string(num_devices) +
                         " devices");
  if (tiles_.HasDuplicates())
    return Status::Error("device id repeated in sharding tile assignment " +
                         tiles_.ToString());
  return Status::Ok();
}

Status Sharding::ValidateTuple(const std::vector<int64_t>& leaf_ranks,
                               int64_t num_devices) const {
  if (kind_ != Kind::kTuple) {
    for (int64_t r : leaf_ranks) MS_RETURN_IF_ERROR(Validate(r, num_devices));
    return Status::Ok();
  }
  // An empty tuple may carry one element sharding (XLA allows it).
  if (leaf_ranks.empty() && elements_.size() <= 1) return Status::Ok();
  if (elements_.size() != leaf_ranks.size())
    return Status::Error("tuple sharding has " +
                         std::to_string(elements_.size()) +
                         " elements but the shape has " +
                         std::to_string(leaf_ranks.size()) + " leaves");
  for (size_t i = 0; i < elements_.size(); ++i) {
    Status s = elements_[i].Validate(leaf_ranks[i], num_devices);
    if (!s.ok())
      return Status::Error(s.message() + " (tuple element " +
                           std::to_string(i) + ")");
  }
  return Status::Ok();
}

}  // namespace meshsplit
