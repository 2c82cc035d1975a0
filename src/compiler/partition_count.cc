// The partition count from the shardings, and the check that they cover it
// (partition_count.h).
#include "compiler/partition_count.h"

#include <algorithm>
#include <string>

namespace meshsplit {
namespace {

// Devices one sharding names (0 for replicated / manual / unknown).
int64_t DevicesNamed(const Sharding& s) {
  if (s.IsTuple()) {
    int64_t n = 0;
    for (const Sharding& e : s.tuple_elements()) n = std::max(n, DevicesNamed(e));
    return n;
  }
  if (s.IsMaximal()) return s.device() + 1;
  // An explicit list may skip ids ({devices=[3]1,2,3} names device 3): the
  // count must hold the largest id too, or the module printed with it would
  // not load back (found by fuzz_propagate).
  if (s.IsTiled())
    return std::max(s.tile_assignment().num_devices(), s.tile_assignment().MaxDevice() + 1);
  return 0;
}

// The first tiled leaf of `s` whose tile assignment does not have `n`
// devices, or null.
const Sharding* MisfitLeaf(const Sharding& s, int64_t n) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements())
      if (const Sharding* bad = MisfitLeaf(e, n)) return bad;
    return nullptr;
  }
  return s.IsTiled() && s.tile_assignment().num_devices() != n ? &s : nullptr;
}

}  // namespace

int64_t PartitionsNamedByShardings(const Module& module) {
  int64_t n = 1;
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions())
      if (i->has_sharding()) n = std::max(n, DevicesNamed(*i->sharding()));
  return n;
}

void DerivePartitionCount(Module& module, int64_t requested) {
  if (requested > 0 || module.num_partitions() > 1) return;
  module.set_num_partitions(PartitionsNamedByShardings(module));
}

Status CheckShardingsCoverPartitions(const Module& module, int64_t n) {
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions()) {
      if (!i->has_sharding()) continue;
      const Sharding* bad = MisfitLeaf(*i->sharding(), n);
      if (bad == nullptr) continue;
      const int64_t have = bad->tile_assignment().num_devices();
      std::string what = "%" + i->name() + ": sharding " + bad->ToString(false) + " spans " +
                         std::to_string(have) + " devices but the module is partitioned for " +
                         std::to_string(n);
      if (have < n)
        what += "; to run a module sharded for " + std::to_string(have) +
                " devices on more, give a spec (--shard) whose mesh has " + std::to_string(n) +
                " devices and whose \"existing_axes\" name the axes the module's shardings "
                "were written for (docs/shard_spec.md): they are then replicated over the "
                "other axes";
      return Status::Error(what, i->loc());
    }
  return Status::Ok();
}

}  // namespace meshsplit
