// Unit tests of Reshard: `ROOT c = copy(p)` moves p from one sharding to
// another; the partitioned module runs on N virtual devices with inputs laid
// out by hand (manual subgroups hold a different value per group, unreduced
// groups hold pieces that sum to the value), and every device's result is
// checked against the layout the target sharding prescribes. The tests also
// check which collectives were emitted and that no gather-then-slice
// fallback was taken.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "partitioner/partitioner.h"
#include "partitioner/reshard.h"
#include "runtime/executor.h"
#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit {
namespace {

Sharding S(const std::string& text) {
  auto s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? *s : Sharding();
}

// Where one device sits in a sharding: its data tile, its manual group
// (named by the smallest device in it, so that two shardings with the same
// groups agree) and its unreduced group.
struct Place {
  std::vector<int64_t> offset, limit, local;
  int64_t manual_group = -1;
  std::vector<int64_t> unreduced_key;  // devices with equal keys sum up
  int64_t unreduced_member = 0, unreduced_size = 1;
};

Place PlaceOf(const Sharding& s, const std::vector<int64_t>& dims, int64_t device, int64_t n) {
  Place p;
  p.offset = s.TileOffsetForDevice(dims, device);
  p.limit = s.TileLimitForDevice(dims, device);
  p.local = s.IsTiled() ? s.TileShape(dims) : dims;
  if (s.kind() == Sharding::Kind::kUnreduced) {
    p.unreduced_key = {0};
    p.unreduced_member = device;
    p.unreduced_size = n;
    return p;
  }
  if (!s.IsTiled()) {
    p.unreduced_key = {device};
    return p;
  }
  const TileAssignment& ta = s.tile_assignment();
  std::vector<int64_t> idx = *ta.IndexOfDevice(device);
  const int64_t m = s.SubgroupDim(SubgroupType::kManual);
  const int64_t u = s.SubgroupDim(SubgroupType::kUnreduced);
  if (m >= 0) {
    p.manual_group = n;
    for (int64_t d = 0; d < n; ++d)
      if ((*ta.IndexOfDevice(d))[m] == idx[m]) p.manual_group = std::min(p.manual_group, d);
  }
  p.unreduced_key = idx;
  if (u >= 0) {
    p.unreduced_member = idx[u];
    p.unreduced_size = ta.dim(u);
    p.unreduced_key[u] = 0;
  } else {
    p.unreduced_key = {device};
  }
  return p;
}

// The global value: element at `index` of manual group g.
int64_t Value(const std::vector<int64_t>& dims, const std::vector<int64_t>& index, int64_t g) {
  int64_t linear = 0;
  for (size_t i = 0; i < dims.size(); ++i) linear = linear * dims[i] + index[i];
  return linear + 1 + 1000 * std::max<int64_t>(g, 0);
}

// Calls f(local index, global index) for every valid element of a tile.
template <typename F>
void ForTile(const Place& p, F f) {
  const size_t rank = p.offset.size();
  std::vector<int64_t> extent(rank);
  int64_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    extent[i] = std::max<int64_t>(0, p.limit[i] - p.offset[i]);
    count *= extent[i];
  }
  for (int64_t k = 0; k < count; ++k) {
    std::vector<int64_t> li(rank), gi(rank);
    int64_t rest = k;
    for (size_t i = rank; i-- > 0;) {
      li[i] = rest % extent[i];
      rest /= extent[i];
      gi[i] = li[i] + p.offset[i];
    }
    int64_t lin = 0;
    for (size_t i = 0; i < rank; ++i) lin = lin * p.local[i] + li[i];
    f(lin, gi);
  }
}

struct Outcome {
  std::string partitioned;
  spmd::ReshardStats stats;
};

// Partitions copy(p) from `from` to `to` on n devices, runs it and checks
// every device. Returns the partitioned text and the reshard stats.
Outcome CheckReshard(const std::string& from, const std::string& to, std::vector<int64_t> dims,
                     int64_t n) {
  Outcome out;
  std::string shape = "s32[";
  for (size_t i = 0; i < dims.size(); ++i) shape += (i ? "," : "") + std::to_string(dims[i]);
  shape += "]";
  std::string text = "HloModule t, num_partitions=" + std::to_string(n) + "\nENTRY e {\n  p = " +
                     shape + " parameter(0), sharding=" + from + "\n  ROOT c = " + shape +
                     " copy(p), sharding=" + to + "\n}\n";
  auto module = ParseModuleText(text);
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  if (!module.ok()) return out;
  spmd::ResetReshardStats();
  PartitionOptions options;
  auto part = PartitionModule(**module, options);
  out.stats = spmd::GetReshardStats();
  EXPECT_TRUE(part.ok()) << part.status().ToString();
  if (!part.ok()) return out;
  out.partitioned = PrintModule(**part);
  const Sharding src = S(from), dst = S(to);
  std::vector<std::vector<Literal>> args(n);
  for (int64_t d = 0; d < n; ++d) {
    Place p = PlaceOf(src, dims, d, n);
    Literal lit(Shape(PrimitiveType::S32, p.local));
    for (int64_t i = 0; i < lit.element_count(); ++i) lit.SetInt(i, 0x5A5A);  // padding
    ForTile(p, [&](int64_t lin, const std::vector<int64_t>& gi) {
      int64_t v = Value(dims, gi, p.manual_group);
      // Pieces of a partial sum: member 0 carries the rest.
      if (p.unreduced_size > 1)
        v = p.unreduced_member == 0 ? v + 7 * (p.unreduced_size - 1) : -7;
      lit.SetInt(lin, v);
    });
    args[d].push_back(std::move(lit));
  }
  auto results = RunOnDevices(**part, std::move(args), n);
  EXPECT_TRUE(results.ok()) << results.status().ToString() << "\n" << out.partitioned;
  if (!results.ok()) return out;
  // Sum the pieces of every unreduced group, then compare tiles.
  std::map<std::vector<int64_t>, std::vector<int64_t>> sums;
  for (int64_t d = 0; d < n; ++d) {
    Place p = PlaceOf(dst, dims, d, n);
    std::vector<int64_t>& acc = sums[p.unreduced_key];
    const Literal& got = (*results)[d];
    if (acc.empty()) acc.assign(got.element_count(), 0);
    for (int64_t i = 0; i < got.element_count(); ++i) acc[i] += got.GetInt(i);
  }
  int64_t errors = 0;
  for (int64_t d = 0; d < n && errors < 5; ++d) {
    Place p = PlaceOf(dst, dims, d, n);
    // A value that enters manual subgroups is the same in every group.
    if (!src.HasManualSubgroup()) p.manual_group = -1;
    const std::vector<int64_t>& acc = sums[p.unreduced_key];
    ForTile(p, [&](int64_t lin, const std::vector<int64_t>& gi) {
      int64_t want = Value(dims, gi, p.manual_group);
      if (acc[lin] != want && errors++ < 5)
        ADD_FAILURE() << from << " -> " << to << ": device " << d << " element " << lin
                      << " is " << acc[lin] << ", want " << want << "\n"
                      << out.partitioned;
    });
  }
  return out;
}

int64_t Count(const std::string& text, const std::string& op) {
  int64_t c = 0;
  for (size_t pos = text.find(" " + op + "("); pos != std::string::npos;
       pos = text.find(" " + op + "(", pos + 1))
    ++c;
  return c;
}

// --- partial sums ------------------------------------------------------------

TEST(ReshardUnreduced, ReplicatedToUnreducedAndBack) {
  Outcome o = CheckReshard("{replicated}", "{unreduced}", {5, 3}, 4);
  EXPECT_EQ(Count(o.partitioned, "all-reduce"), 0);
  o = CheckReshard("{unreduced}", "{replicated}", {5, 3}, 4);
  EXPECT_EQ(Count(o.partitioned, "all-reduce"), 1);
}

TEST(ReshardUnreduced, UnreducedToTiledIsOneReduceScatter) {
  Outcome o = CheckReshard("{unreduced}", "{devices=[4,1]<=[4]}", {7, 3}, 4);
  EXPECT_EQ(Count(o.partitioned, "reduce-scatter"), 1);
  EXPECT_EQ(Count(o.partitioned, "all-reduce"), 0);
  // Subgroup: sums over pairs land in the dim the target tiles.
  o = CheckReshard("{devices=[2,1,2]<=[4] last_tile_dims={unreduced}}", "{devices=[2,2]<=[4]}",
                   {6, 5}, 4);
  EXPECT_EQ(Count(o.partitioned, "reduce-scatter"), 1);
  EXPECT_EQ(o.stats.fallbacks(), 0);
}

TEST(ReshardUnreduced, PartialReductionKeepsSharedGroups) {
  // Unreduced over 4 devices -> unreduced over the minor pair, tiled over
  // the major pair: one reduce-scatter over the major axis only.
  Outcome o = CheckReshard("{unreduced}", "{devices=[2,1,2]<=[4] last_tile_dims={unreduced}}",
                           {5, 2}, 4);
  EXPECT_EQ(Count(o.partitioned, "reduce-scatter"), 1);
  EXPECT_EQ(Count(o.partitioned, "all-reduce"), 0);
  EXPECT_EQ(o.stats.fallbacks(), 0);
}

TEST(ReshardUnreduced, TiledIntoPartialSumsAndBetweenGroups) {
  CheckReshard("{devices=[2,2]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dims={unreduced}}", {5, 3},
               4);
  CheckReshard("{devices=[2,1,2]<=[4] last_tile_dims={unreduced}}",
               "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dims={unreduced}}", {4, 3}, 4);
  Outcome o = CheckReshard("{devices=[1,2,4]<=[8] last_tile_dims={unreduced}}",
                           "{devices=[2,2,2]<=[8] last_tile_dims={unreduced}}", {3, 5}, 8);
  EXPECT_EQ(o.stats.fallbacks(), 0);
  // Unreduced and replicated subgroups together.
  CheckReshard("{devices=[2,1,2,2]<=[8] last_tile_dims={unreduced, replicated}}",
               "{devices=[2,4]<=[8]}", {3, 6}, 8);
}

// --- manual subgroups --------------------------------------------------------

TEST(ReshardManual, WithinManualSubgroups) {
  // The data tiling moves between dims inside each manual pair.
  Outcome o = CheckReshard("{devices=[2,1,2]<=[4] last_tile_dims={manual}}",
                           "{devices=[1,2,2]<=[4] last_tile_dims={manual}}", {4, 6}, 4);
  EXPECT_EQ(Count(o.partitioned, "all-to-all"), 1);
  // Tiled -> replicated within the groups: one all-gather.
  o = CheckReshard("{devices=[1,2,2]<=[4] last_tile_dims={manual}}",
                   "{devices=[1,1,2,2]<=[4] last_tile_dims={replicated, manual}}", {6, 3}, 4);
  EXPECT_EQ(Count(o.partitioned, "all-gather"), 1);
  EXPECT_EQ(o.stats.fallbacks(), 0);
  // Uneven, 8 devices, manual groups on the major axis.
  CheckReshard("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}",
               "{devices=[2,2,2]<=[2,2,2]T(1,2,0) last_tile_dims={manual}}", {5, 7}, 8);
}

TEST(ReshardManual, EnteringFromReplicatedSlicesPerGroup) {
  Outcome o =
      CheckReshard("{replicated}", "{devices=[2,1,2]<=[4] last_tile_dims={manual}}", {5, 2}, 4);
  EXPECT_EQ(Count(o.partitioned, "all-gather"), 0);
}

Status PartitionError(const std::string& from, const std::string& to, int64_t n) {
  std::string text = "HloModule t, num_partitions=" + std::to_string(n) +
                     "\nENTRY e {\n  p = f32[4,4] parameter(0), sharding=" + from +
                     "\n  ROOT c = f32[4,4] copy(p), sharding=" + to + "\n}\n";
  auto module = ParseModuleText(text);
  EXPECT_TRUE(module.ok());
  auto part = PartitionModule(**module, {});
  return part.ok() ? Status::Ok() : part.status();
}

TEST(ReshardManual, WholeValuesInsideManualRegions) {
  // Ops run on whole values inside a manual region (fallbacks, reduce
  // inits) ask for {replicated}: the local manual data is taken as is, and
  // partially manual data is gathered within its manual subgroup only.
  Outcome o = CheckReshard("{devices=[1,2,2]<=[4] last_tile_dims={manual}}",
                           "{devices=[1,1,2,2]<=[4] last_tile_dims={replicated, manual}}", {3, 5},
                           4);
  EXPECT_EQ(Count(o.partitioned, "all-gather"), 1);
  EXPECT_TRUE(PartitionError("{manual}", "{replicated}", 2).ok());
}

TEST(ReshardManual, LeavingManualIsAnError) {
  Status s = PartitionError("{manual}", "{devices=[2,1]<=[2]}", 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("SPMDShardToFullShape"), std::string::npos) << s.message();
  s = PartitionError("{devices=[2,1,2]<=[4] last_tile_dims={manual}}", "{devices=[2,2]<=[4]}", 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("manual subgroups"), std::string::npos) << s.message();
  s = PartitionError("{devices=[2,2]<=[4]}", "{manual}", 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("SPMDFullToShardShape"), std::string::npos) << s.message();
}

TEST(ReshardManual, IncompatibleManualGroupsAreAnError) {
  // Manual pairs {0,1},{2,3} versus {0,2},{1,3}.
  Status s = PartitionError("{devices=[2,1,2]<=[4] last_tile_dims={manual}}",
                            "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dims={manual}}", 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("manual subgroups hold different devices"), std::string::npos)
      << s.message();
}

// --- direct paths instead of gather-then-slice --------------------------------

TEST(ReshardPaths, AllToAllOverAnAxisSubset) {
  // [4,1] -> [2,2]: the minor factor of dim 0 moves to dim 1; the
  // all-to-all runs over pairs only.
  Outcome o = CheckReshard("{devices=[4,1]<=[4]}", "{devices=[2,2]<=[4]}", {8, 6}, 4);
  EXPECT_EQ(Count(o.partitioned, "all-to-all"), 1);
  EXPECT_NE(o.partitioned.find("replica_groups=[2,2]<=[4]"), std::string::npos) << o.partitioned;
  EXPECT_EQ(Count(o.partitioned, "all-gather"), 0);
  EXPECT_EQ(o.stats.fallbacks(), 0);
  // [8,1] -> [2,4] with uneven dims: one all-to-all over groups of 4.
  o = CheckReshard("{devices=[8,1]<=[8]}", "{devices=[2,4]<=[8]}", {7, 5}, 8);
  EXPECT_EQ(Count(o.partitioned, "all-to-all"), 1);
  EXPECT_EQ(Count(o.partitioned, "all-gather"), 0);
  EXPECT_EQ(o.stats.fallbacks(), 0);
  // [4,2] -> [2,4]: dim 1's factor changes place, so it is gathered first;
  // still no gather of the whole value.
  o = CheckReshard("{devices=[4,2]<=[8]}", "{devices=[2,4]<=[8]}", {8, 8}, 8);
  EXPECT_EQ(Count(o.partitioned, "all-to-all"), 1);
  EXPECT_EQ(Count(o.partitioned, "all-gather"), 1);
  EXPECT_EQ(o.stats.fallbacks(), 0);
}

TEST(ReshardPaths, PartialReplicationUsesOnlyTheNeededAxes) {
  Outcome o = CheckReshard("{devices=[2,2,2]<=[8] last_tile_dim_replicate}",
                           "{devices=[1,4,2]<=[8] last_tile_dim_replicate}", {6, 9}, 8);
  EXPECT_EQ(o.stats.fallbacks(), 0);
  // Dim 0 keeps its major factor and gathers the minor one; dim 1 takes
  // the formerly replicated factor by a local slice.
  o = CheckReshard("{devices=[4,1,2]<=[8] last_tile_dim_replicate}",
                   "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}", {8, 6}, 8);
  EXPECT_EQ(o.stats.fallbacks(), 0);
  EXPECT_EQ(Count(o.partitioned, "all-gather"), 1);
  EXPECT_EQ(Count(o.partitioned, "all-to-all"), 0);
  EXPECT_NE(o.partitioned.find("replica_groups=[4,2]<=[2,2,2]T(0,2,1)"), std::string::npos)
      << o.partitioned;
  // Uneven (5 rows: 4 tiles of 2 vs 2 tiles of 3): the two tilings of dim
  // 0 do not line up, so dim 0 is gathered over all four of its tiles.
  o = CheckReshard("{devices=[4,1,2]<=[8] last_tile_dim_replicate}",
                   "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}", {5, 6}, 8);
  EXPECT_EQ(o.stats.fallbacks(), 0);
  EXPECT_NE(o.partitioned.find("replica_groups=[2,4]<=[4,2]T(1,0)"), std::string::npos)
      << o.partitioned;
}

TEST(ReshardPaths, UnrelatedDevicePermutationsUsePermuteAndPlan) {
  Outcome o = CheckReshard("{devices=[1,7]1,0,5,6,3,2,4}", "{devices=[7,1]<=[7]}", {9, 4}, 7);
  EXPECT_EQ(o.stats.fallbacks(), 0);
  EXPECT_EQ(Count(o.partitioned, "collective-permute"), 1);
  EXPECT_EQ(Count(o.partitioned, "all-to-all"), 1);
  o = CheckReshard("{devices=[2,1,1,3]<=[3,2]T(1,0) last_tile_dim_replicate}",
                   "{devices=[1,2,3]<=[2,3]T(1,0)}", {4, 5, 3}, 6);
  EXPECT_EQ(o.stats.fallbacks(), 0);
}

TEST(ReshardPaths, IncommensurableFactorsStayCorrect) {
  // [7,2] and [1,2,7] group the 14 devices along factors that do not nest
  // (id strides 1/2 versus 1/7): still correct, counted as a fallback or a
  // permute-based plan, never an error.
  Outcome o = CheckReshard("{devices=[7,2]<=[14]}",
                           "{devices=[1,2,7]<=[14] last_tile_dim_replicate}", {9, 4}, 14);
  EXPECT_GE(o.stats.calls, 1);
}

// EstimateReshard runs Reshard's own ladder into a scratch computation and
// prices what it would emit with the cost model's wire formula.
TEST(EstimateReshard, PricesWhatReshardWouldEmit) {
  const Shape shape(PrimitiveType::F32, {8, 6});
  const Sharding rows = S("{devices=[4,1]<=[4]}");
  EXPECT_EQ(spmd::EstimateReshard(shape, rows, rows, 4), 0);
  // A slice moves nothing: a small positive price (1e-3 of the local tile).
  EXPECT_DOUBLE_EQ(spmd::EstimateReshard(shape, Sharding::Replicate(), rows, 4), 1e-3 * 12);
  // An all-gather over 4 receives 3/4 of the whole value.
  EXPECT_DOUBLE_EQ(spmd::EstimateReshard(shape, rows, Sharding::Replicate(), 4), 0.75 * 48);
  // Partial sums on every device: one all-reduce, 2(n-1)/n of the value.
  EXPECT_DOUBLE_EQ(spmd::EstimateReshard(shape, S("{unreduced}"), Sharding::Replicate(), 4),
                   1.5 * 48);
  // Rows to columns over the same devices: one all-to-all of the local 2x8
  // tile, of which 3/4 leaves the device.
  EXPECT_DOUBLE_EQ(spmd::EstimateReshard(Shape(PrimitiveType::F32, {8, 8}), rows,
                                         S("{devices=[1,4]<=[4]}"), 4),
                   0.75 * 16);
  // An estimate leaves the path statistics alone.
  spmd::ResetReshardStats();
  spmd::EstimateReshard(shape, rows, Sharding::Replicate(), 4);
  EXPECT_EQ(spmd::GetReshardStats().calls, 0);
}

}  // namespace
}  // namespace meshsplit
