// Stage shardings (stage_sharding.h), built device by device: each device's
// tile index under `base` plus its stage coordinate gives its place in the
// new tile assignment. O(devices) per sharding, once per region border.
#include "pipeline/stage_sharding.h"

#include <map>

namespace meshsplit {

int64_t StageShardings::StageOf(int64_t device) const {
  return (*mesh_.devices().IndexOfDevice(device))[stage_axis_];
}

std::vector<std::pair<int64_t, int64_t>> StageShardings::ShiftPairs(int64_t by) const {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  const TileAssignment& devices = mesh_.devices();
  for (int64_t d = 0; d < devices.num_devices(); ++d) {
    std::vector<int64_t> index = *devices.IndexOfDevice(d);
    index[stage_axis_] += by;
    if (index[stage_axis_] < 0 || index[stage_axis_] >= stages()) continue;
    pairs.emplace_back(d, devices.DeviceAt(index));
  }
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

  std::vector<int64_t> devices(n, -1);
  std::map<std::vector<int64_t>, int64_t> seen;  // (data index, stage) -> replicas so far
  for (int64_t dev = 0; dev < n; ++dev) {
    std::vector<int64_t> data(rank, 0);
    if (!replicated) {
      std::vector<int64_t> at = *base->tile_assignment().IndexOfDevice(dev);
      data.assign(at.begin(), at.begin() + rank);
    }
    int64_t stage = StageOf(dev);
    std::vector<int64_t> key = data;
    if (where != Where::kFull) key.push_back(stage);
    int64_t replica = seen[key]++;
    if (replica >= replicas)
      return Status::Error("sharding " + base->ToString() +
                           " does not replicate over the stage axis (it uses it already)");
    std::vector<int64_t> index(leading, 0);
    index.insert(index.end(), data.begin(), data.end());
    if (where == Where::kStageTiled) index[0] = stage * (leading > 0 ? 1 : tiles[0]) + index[0];
    if (where == Where::kManual) index.push_back(stage);
    if (replicas > 1) index.push_back(replica);
    int64_t flat = 0;
    for (size_t k = 0; k < dims.size(); ++k) flat = flat * dims[k] + index[k];
    devices[flat] = dev;
  }
  TileAssignment assignment = TileAssignment::FromDevices(dims, devices);
  if (where == Where::kManual) {
    std::vector<SubgroupType> types = {SubgroupType::kManual};
    if (replicas > 1) types.push_back(SubgroupType::kReplicated);
    return Sharding::Subgroup(std::move(assignment), std::move(types));
  }
  if (replicas > 1) return Sharding::Subgroup(std::move(assignment), {SubgroupType::kReplicated});
  return Sharding::Tile(std::move(assignment));
}

}  // namespace meshsplit
