// Per-device placement of values under any sharding, including the kinds the
// plain split / assemble of executor.h refuses: {manual} and manual
// subgroups (each manual group sees its own, independent logical value) and
// {unreduced} / unreduced subgroups (the logical value is the sum of the
// members' partial values). Used by verification to make entry inputs for
// both the reference run and the partitioned run, and to turn per-device
// results back into one logical value per manual group.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "ir/computation.h"
#include "ir/literal.h"
#include "sharding/sharding.h"
#include "support/status.h"

namespace meshsplit {

// Where one device stands in the sharding of an array value.
struct DevicePlace {
  bool holds = true;                   // false: not in the assignment / other device's maximal
  std::vector<int64_t> offset, limit;  // its data tile in the global value
  int64_t tile = 0;                    // linear index of that tile
  int64_t manual_group = 0;            // which independent logical value it sees
  int64_t unreduced_index = 0;         // its position in its unreduced group
  int64_t unreduced_size = 1;
};

// Placement of every device 0..n-1. Errors for unknown / tuple shardings or
// a sharding that does not fit (rank, device ids).
StatusOr<std::vector<DevicePlace>> PlaceDevices(const Sharding& sharding,
                                                const std::vector<int64_t>& dims, int64_t n);

// True when some leaf of `sharding` is manual or unreduced (fully or in a
// subgroup).
bool HasManualOrUnreduced(const Sharding& sharding);

// Fills `lit` with seeded random values: floats uniform in [-1, 1], signed
// integers in [-4, 4], unsigned in [0, 8], pred 50/50 (tuples recursively).
void FillRandomValues(Literal& lit, std::mt19937_64& rng);

// Entry arguments for a reference run of the original module on n devices
// (reference[d]: device d's whole logical values) and for the partitioned
// module (partitioned[d]: device d's local pieces), made consistently:
//  - a non-manual, non-unreduced value is one random global value; the
//    partitioned devices get its tiles (padding poisoned);
//  - each manual group gets its own random global value;
//  - an unreduced value gets a random partial piece per (tile, manual group,
//    unreduced position); its logical value, which the reference sees, is
//    the sum of the pieces.
struct DeviceInputs {
  std::vector<std::vector<Literal>> reference;
  std::vector<std::vector<Literal>> partitioned;
};
StatusOr<DeviceInputs> MakeDeviceInputs(const Computation& original_entry,
                                        const Computation& partitioned_entry, int64_t n,
                                        uint64_t seed);

// The same for one value of `global` shape whose per-device shape is
// `local` under `sharding` (tuple shardings apply leaf by leaf): appends one
// literal per device to `reference` and to `partitioned`.
Status MakeDeviceValues(const Shape& global, const Shape& local, const Sharding& sharding,
                        int64_t n, uint64_t seed, std::vector<Literal>& reference,
                        std::vector<Literal>& partitioned);

// Device `place`'s tile of `full` in a literal of `local_shape` (the rest
// zero, or poison when `poison`).
Literal ExtractTile(const Literal& full, const DevicePlace& place, const Shape& local_shape,
                    bool poison);

// `value` cut or extended (with poison) to `shape`, block by block from the
// origin; tuples leaf by leaf.
Literal FitToShape(const Literal& value, const Shape& shape);

// One logical value per manual group of an array leaf, assembled from the
// devices' local values: tiles from their first holder (other holders must
// agree bitwise), partial values of an unreduced group summed.
struct GroupValues {
  std::vector<Literal> values;             // per manual group
  std::vector<int64_t> first_device;       // per manual group
  std::vector<int64_t> group_of_device;    // per device, -1 if it holds nothing
};
StatusOr<GroupValues> AssembleGroups(const std::vector<const Literal*>& per_device,
                                     const Shape& global, const Sharding& sharding);

// The leaf shardings of a value of `shape` (a non-tuple sharding applies to
// every leaf), in leaf order.
std::vector<Sharding> LeafShardings(const Shape& shape, const Sharding& sharding);

}  // namespace meshsplit
