// Stage shardings (stage_sharding.h), built device by device: each device's
// tile under `base` plus its stage coordinate gives its place in the new
// tile assignment. O(devices) per sharding with no allocation per device
// (compile time must stay flat in the device count).
#include "pipeline/stage_sharding.h"


namespace meshsplit {

StageShardings::StageShardings(Mesh mesh, int64_t stage_axis)
    : mesh_(std::move(mesh)), stage_axis_(stage_axis) {
  // Row-major positions over the mesh axes: the stage coordinate of the
  // device at flat position q is (q / inner) % stages.
  const TileAssignment& devices = mesh_.devices();
  inner_ = 1;
  for (int64_t a = stage_axis_ + 1; a < mesh_.num_axes(); ++a) inner_ *= mesh_.axes()[a].size;
  flat_of_.assign(devices.num_devices(), 0);
  const std::vector<int64_t> ids = devices.Devices();
  for (int64_t q = 0; q < devices.num_devices(); ++q) flat_of_[ids[q]] = q;
}

int64_t StageShardings::StageOf(int64_t device) const {
  return (flat_of_[device] / inner_) % stages();
}

std::vector<std::pair<int64_t, int64_t>> StageShardings::ShiftPairs(int64_t by, bool ring) const {
  auto cached = shifts_.find({by, ring});
  if (cached != shifts_.end()) return cached->second;
  // Row-major positions: moving `by` stages moves the flat position by
  // by * inner_ (the other coordinates stay).
  std::vector<std::pair<int64_t, int64_t>> pairs;
  const TileAssignment& devices = mesh_.devices();
  const int64_t S = stages();
  for (int64_t d = 0; d < devices.num_devices(); ++d) {
    const int64_t q = flat_of_[d], stage = StageOf(d);
    int64_t to = stage + by;
    if (ring) to = ((to % S) + S) % S;
    if (to < 0 || to >= S) continue;
    pairs.emplace_back(d, devices.DeviceAtFlat(q + (to - stage) * inner_));
  }
  shifts_.emplace(std::make_pair(by, ring), pairs);
  return pairs;
}

StatusOr<Sharding> StageShardings::Manual(const Sharding* base, int64_t rank,
                                          int64_t leading) const {
  return Place(base, rank, leading, Where::kManual);
}
StatusOr<Sharding> StageShardings::StageTiled(const Sharding* base, int64_t rank,
                                              int64_t leading) const {
  return Place(base, rank, leading, Where::kStageTiled);
}
StatusOr<Sharding> StageShardings::Full(const Sharding* base, int64_t rank) const {
  return Place(base, rank, 0, Where::kFull);
}

StatusOr<Sharding> StageShardings::Place(const Sharding* base, int64_t rank, int64_t leading,
                                         Where where) const {
  const auto key = std::make_tuple(base != nullptr ? base->ToString() : std::string(), rank,
                                   leading, static_cast<int>(where));
  auto found = placed_.find(key);
  if (found != placed_.end()) return found->second;
  StatusOr<Sharding> placed = PlaceUncached(base, rank, leading, where);
  placed_.emplace(key, placed);
  return placed;
}

StatusOr<std::vector<int64_t>> StageShardings::ArrangeDevices(const Sharding* base, bool replicated,
                                                        int64_t tiled, int64_t replicas,
                                                        Where where) const {
  const int64_t n = num_devices(), s = stages();
  // Row-major over the new dims, the data dims keep their order, so a
  // device's place is (stage-major for kStageTiled, stage-minor for kManual)
  // its data tile's flat index, then its replica number among the devices
  // that share both.
  std::vector<int64_t> devices(n, -1);
  const bool per_stage = where != Where::kFull;
  std::vector<int64_t> seen(tiled * (per_stage ? s : 1), 0);
  const int64_t base_replicas = n / tiled;  // trailing subgroup positions in `base`
  for (int64_t p = 0; p < n; ++p) {
    const int64_t dev = replicated ? p : base->tile_assignment().DeviceAtFlat(p);
    const int64_t data = replicated ? 0 : p / base_replicas;
    const int64_t stage = StageOf(dev);
    const int64_t group = per_stage ? data * s + stage : data;
    const int64_t replica = seen[group]++;
    if (replica >= replicas)
      return Status::Error("sharding " + base->ToString() +
                           " does not replicate over the stage axis (it uses it already)");
    int64_t flat = 0;
    switch (where) {
      case Where::kManual: flat = (data * s + stage) * replicas + replica; break;
      case Where::kStageTiled: flat = (stage * tiled + data) * replicas + replica; break;
      case Where::kFull: flat = data * replicas + replica; break;
    }
    devices[flat] = dev;
  }
  return devices;
}

StatusOr<Sharding> StageShardings::PlaceUncached(const Sharding* base, int64_t rank,
                                                 int64_t leading, Where where) const {
  const int64_t n = num_devices(), s = stages();
  bool replicated = base == nullptr || base->IsReplicated();
  if (!replicated) {
    if (!base->IsTiled())
      return Status::Error("a value crossing into the pipeline stages has sharding " +
                           base->ToString() + " (only tiled or replicated values are staged)");
    for (SubgroupType t : base->subgroup_types())
      if (t != SubgroupType::kReplicated)
        return Status::Error("a value crossing into the pipeline stages is already " +
                             std::string(SubgroupTypeName(t)) + " (" + base->ToString() + ")");
    if (base->tile_assignment().num_devices() != n)
      return Status::Error("sharding " + base->ToString() + " is for " +
                           std::to_string(base->tile_assignment().num_devices()) +
                           " devices, the mesh has " + std::to_string(n));
  }
  // Data-dim tile counts of `base`, and each device's data-dim index.
  std::vector<int64_t> tiles(rank, 1);
  if (!replicated)
    for (int64_t d = 0; d < rank; ++d) tiles[d] = base->TileDim(d);
  int64_t tiled = 1;
  for (int64_t t : tiles) tiled *= t;
  if (n % (tiled * s) != 0)
    return Status::Error("sharding " + base->ToString() + " uses the stage axis already");
  const int64_t rest = n / (tiled * s);  // replicas left within one stage
  if (where == Where::kManual && tiled == 1 && rest == 1) return Sharding::Manual();

  std::vector<int64_t> dims(leading, 1);
  dims.insert(dims.end(), tiles.begin(), tiles.end());
  if (where == Where::kStageTiled) dims[0] *= s;
  if (where == Where::kManual) dims.push_back(s);
  int64_t replicas = where == Where::kFull ? rest * s : rest;
  if (replicas > 1) dims.push_back(replicas);

  // The devices in row-major order depend on the base, its rank and
  // `where`, not on the leading dims: found once (a walk over every
  // device), then read into each caller's dims.
  const auto key = std::make_tuple(base != nullptr ? base->ToString() : std::string(), rank,
                                   static_cast<int>(where));
  auto known = arranged_.find(key);
  if (known == arranged_.end()) {
    StatusOr<std::vector<int64_t>> arranged =
        ArrangeDevices(base, replicated, tiled, replicas, where);
    known = arranged_.emplace(key, std::move(arranged)).first;
  }
  if (!known->second.ok()) return known->second.status();
  TileAssignment assignment = TileAssignment::FromDevices(dims, *known->second);
  if (where == Where::kManual) {
    std::vector<SubgroupType> types = {SubgroupType::kManual};
    if (replicas > 1) types.push_back(SubgroupType::kReplicated);
    return Sharding::Subgroup(std::move(assignment), std::move(types));
  }
  if (replicas > 1) return Sharding::Subgroup(std::move(assignment), {SubgroupType::kReplicated});
  return Sharding::Tile(std::move(assignment));
}

}  // namespace meshsplit
