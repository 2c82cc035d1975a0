// DeviceAxes and AxisLayout: the axes of every dim are checked device by
// device against the explicit array, and layouts round-trip to shardings.
#include "sharding/device_axes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace meshsplit {
namespace {

// This device's index along every dim of `ta`, from its explicit array.
std::vector<int64_t> IndexOf(const TileAssignment& ta, int64_t device) {
  const std::vector<int64_t> ids = ta.Devices();
  const int64_t flat = std::find(ids.begin(), ids.end(), device) - ids.begin();
  std::vector<int64_t> index(ta.num_dimensions());
  int64_t rest = flat;
  for (int64_t d = ta.num_dimensions() - 1; d >= 0; --d) {
    index[d] = rest % ta.dim(d);
    rest /= ta.dim(d);
  }
  return index;
}

// Checks that dim d of `ta` indexes the devices row-major over the digits of
// `axes_of[d]`.
void ExpectAxesIndexDevices(const TileAssignment& ta, const DeviceAxes& axes,
                            const std::vector<AxisList>& axes_of) {
  ASSERT_EQ(static_cast<int64_t>(axes_of.size()), ta.num_dimensions());
  for (int64_t d = 0; d < ta.num_dimensions(); ++d) EXPECT_EQ(axes.Product(axes_of[d]), ta.dim(d));
  for (int64_t id = 0; id < ta.num_devices(); ++id) {
    const std::vector<int64_t> index = IndexOf(ta, id);
    for (int64_t d = 0; d < ta.num_dimensions(); ++d) {
      int64_t from_digits = 0;
      for (int a : axes_of[d])
        from_digits = from_digits * axes.size(a) + (id / axes.stride(a)) % axes.size(a);
      ASSERT_EQ(from_digits, index[d]) << "device " << id << " dim " << d;
    }
  }
}

TEST(DeviceAxesTest, CommonRefinementOfTwoArrays) {
  // [4,2] over 8 devices and the same ids read as [2,4] transposed.
  const TileAssignment a = TileAssignment::Iota({4, 2});
  const TileAssignment b = TileAssignment::Iota({2, 4}, {4, 2}, {1, 0});
  auto axes = DeviceAxes::Common(8, {&a, &b});
  ASSERT_TRUE(axes);
  // Runs: a has [2,8) and [1,2); b has [1,2) and [2,8): axes 4 (stride 2), 2 (stride 1).
  ASSERT_EQ(axes->num_axes(), 2);
  EXPECT_EQ(axes->sizes(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(axes->stride(0), 2);
  EXPECT_EQ(axes->stride(1), 1);
  auto of_b = axes->AxesOfDims(b);
  ASSERT_TRUE(of_b);
  EXPECT_EQ(*of_b, (std::vector<AxisList>{{1}, {0}}));
  ExpectAxesIndexDevices(b, *axes, *of_b);
}

TEST(DeviceAxesTest, RunsThatCutEachOtherHaveNoCommonAxes) {
  // 6 devices as [2,3] and as [3,2]: bounds 1,2,3,6 do not divide.
  const TileAssignment a = TileAssignment::Iota({2, 3});
  const TileAssignment b = TileAssignment::Iota({3, 2});
  EXPECT_FALSE(DeviceAxes::Common(6, {&a, &b}));
  EXPECT_TRUE(DeviceAxes::Common(6, {&a}));
}

TEST(DeviceAxesTest, ExplicitArraysHaveNoAxes) {
  const TileAssignment a = TileAssignment::FromDevices({2, 2}, {0, 3, 1, 2});
  ASSERT_FALSE(a.is_iota());
  EXPECT_FALSE(DeviceAxes::Common(4, {&a}));
  const TileAssignment iota = TileAssignment::Iota({4});
  auto axes = DeviceAxes::Common(4, {&iota});
  ASSERT_TRUE(axes);
  EXPECT_FALSE(axes->AxesOfDims(a));
}

TEST(DeviceAxesTest, ArrayFinerThanTheAxesIsRejected) {
  const TileAssignment whole = TileAssignment::Iota({4});
  const TileAssignment split = TileAssignment::Iota({2, 2});
  auto axes = DeviceAxes::Common(4, {&whole});
  ASSERT_TRUE(axes);
  EXPECT_EQ(axes->num_axes(), 1);
  EXPECT_FALSE(axes->AxesOfDims(split));
}

// Random transposed iotas, merged or re-split into other dims: whenever the
// axes exist they index the devices exactly as the explicit array does.
TEST(DeviceAxesTest, RandomIotasAgreeWithTheirDevices) {
  std::mt19937 rng(12);
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int64_t> reshape;
    const int parts = 1 + rng() % 4;
    for (int i = 0; i < parts; ++i) reshape.push_back(1 + rng() % 4);
    std::vector<int64_t> perm(parts);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(reshape[p]);
    TileAssignment ta = TileAssignment::Iota(dims, reshape, perm);
    // Merge a random pair of neighbours, or split a dim of size 4 or 6.
    std::vector<int64_t> other = ta.dims();
    if (other.size() > 1 && rng() % 2 == 0) {
      const size_t i = rng() % (other.size() - 1);
      other[i] *= other[i + 1];
      other.erase(other.begin() + i + 1);
    } else {
      for (size_t i = 0; i < other.size(); ++i)
        if (other[i] == 4 || other[i] == 6) {
          const int64_t half = other[i] / 2;
          other[i] = 2;
          other.insert(other.begin() + i + 1, half);
          break;
        }
    }
    const TileAssignment b = ta.Reshape(other);
    auto axes = DeviceAxes::Common(ta.num_devices(), {&ta, &b});
    if (!axes) continue;
    for (const TileAssignment* t : std::vector<const TileAssignment*>{&ta, &b}) {
      auto of = axes->AxesOfDims(*t);
      ASSERT_TRUE(of) << t->ToString();
      ExpectAxesIndexDevices(*t, *axes, *of);
    }
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

TEST(AxisLayoutTest, RoundTripsTiledShardings) {
  // Data dims [2,2], then a replicated subgroup of 2, over a transposed iota.
  const TileAssignment ta = TileAssignment::Iota({2, 2, 2}, {2, 2, 2}, {2, 0, 1});
  const Sharding s = Sharding::Subgroup(ta, {SubgroupType::kReplicated});
  auto axes = DeviceAxes::Common(8, {&ta});
  ASSERT_TRUE(axes);
  auto l = ToAxisLayout(s, 2, *axes);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->dims, (std::vector<AxisList>{{2}, {0}}));
  EXPECT_EQ(l->replicated, (AxisList{1}));
  EXPECT_TRUE(l->unreduced.empty());
  EXPECT_TRUE(l->manual.empty());
  EXPECT_EQ(FromAxisLayout(*l, *axes), s);
  // Wrong data rank, or a device count other than the axes': no layout.
  EXPECT_FALSE(ToAxisLayout(s, 3, *axes));
  const Sharding four = Sharding::Tile(TileAssignment::Iota({4}));
  EXPECT_FALSE(ToAxisLayout(four, 1, *axes));
}

TEST(AxisLayoutTest, ReplicatedAndUnreducedUseEveryAxis) {
  const TileAssignment ta = TileAssignment::Iota({2, 4});
  auto axes = DeviceAxes::Common(8, {&ta});
  ASSERT_TRUE(axes);
  auto r = ToAxisLayout(Sharding::Replicate(), 3, *axes);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->dims.size(), 3u);
  EXPECT_EQ(r->replicated, (AxisList{0, 1}));
  auto u = ToAxisLayout(Sharding::Unreduced(), 1, *axes);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->unreduced, (AxisList{0, 1}));
  EXPECT_FALSE(ToAxisLayout(Sharding::Maximal(0), 1, *axes));
}

TEST(AxisLayoutTest, SubgroupsOfEveryKind) {
  // Dim 0 tiled by 2, then manual 2, unreduced 2 (iota over 8).
  const TileAssignment ta = TileAssignment::Iota({2, 2, 2});
  const Sharding s =
      Sharding::Subgroup(ta, {SubgroupType::kManual, SubgroupType::kUnreduced});
  auto axes = DeviceAxes::Common(8, {&ta});
  ASSERT_TRUE(axes);
  auto l = ToAxisLayout(s, 1, *axes);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->dims, (std::vector<AxisList>{{0}}));
  EXPECT_EQ(l->manual, (AxisList{1}));
  EXPECT_EQ(l->unreduced, (AxisList{2}));
  EXPECT_EQ(FromAxisLayout(*l, *axes), s);
}

}  // namespace
}  // namespace meshsplit
