// TileAssignment: iota detection, device/index queries, reshape, transpose
// and group sorting, checked against explicit arrays.
#include "sharding/tile_assignment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

namespace meshsplit {
namespace {

// Reference transpose of a row-major array.
std::vector<int64_t> TransposeRef(const std::vector<int64_t>& a,
                                  const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& perm) {
  std::vector<int64_t> nd(dims.size()), strides(dims.size(), 1), out;
  for (size_t i = 0; i < perm.size(); ++i) nd[i] = dims[perm[i]];
  for (int i = (int)dims.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t n = 0; n < a.size(); ++n) {
    int64_t s = 0;
    for (size_t i = 0; i < idx.size(); ++i) s += idx[i] * strides[perm[i]];
    out.push_back(a[s]);
    for (int i = (int)idx.size() - 1; i >= 0; --i) {
      if (++idx[i] < nd[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(TileAssignment, IotaDevices) {
  TileAssignment t = TileAssignment::Iota({2, 4}, {2, 2, 2}, {2, 1, 0});
  EXPECT_EQ(t.Devices(), (std::vector<int64_t>{0, 4, 2, 6, 1, 5, 3, 7}));
  EXPECT_EQ(t.ToString(), "[2,4]<=[2,2,2]T(2,1,0)");
  EXPECT_EQ(t.DeviceAt({1, 2}), 3);
  EXPECT_EQ(*t.IndexOfDevice(6), (std::vector<int64_t>{0, 3}));
  EXPECT_FALSE(t.IndexOfDevice(8).has_value());
  EXPECT_FALSE(t.IndexOfDevice(-1).has_value());
  EXPECT_EQ(TileAssignment::Iota({4, 2}).ToString(), "[4,2]<=[8]");
}

TEST(TileAssignment, DetectsIotaAndCanonicalises) {
  EXPECT_TRUE(TileAssignment::FromDevices({2, 2}, {0, 2, 1, 3}).is_iota());
  EXPECT_FALSE(TileAssignment::FromDevices({2, 2}, {0, 3, 1, 2}).is_iota());
  EXPECT_FALSE(TileAssignment::FromDevices({2, 2}, {0, 1, 4, 5}).is_iota());
  EXPECT_FALSE(TileAssignment::FromDevices({2}, {1, 0}).is_iota());
  EXPECT_EQ(TileAssignment::FromDevices({1}, {0}), TileAssignment::Iota({1}));
  // Same array from different iota parameters compares equal.
  EXPECT_EQ(TileAssignment::Iota({8}, {2, 2, 2}, {0, 1, 2}),
            TileAssignment::Iota({8}));
  EXPECT_EQ(TileAssignment::Iota({8}, {2, 1, 4}, {1, 0, 2}),
            TileAssignment::Iota({8}));
  EXPECT_EQ(TileAssignment::Iota({4, 2}, {2, 2, 2}, {0, 2, 1}),
            TileAssignment::FromDevices({4, 2}, {0, 2, 1, 3, 4, 6, 5, 7}));
}

// Every transposed iota of a few shapes: detection of its explicit array
// gives back an equal iota, and queries agree with the array.
TEST(TileAssignment, RandomIotaRoundTrip) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> r;
    int rank = 1 + rng() % 4;
    for (int i = 0; i < rank; ++i) r.push_back(1 + rng() % 4);
    std::vector<int64_t> p = Iota(rank);
    std::shuffle(p.begin(), p.end(), rng);
    int64_t n = 1;
    for (int64_t x : r) n *= x;
    // Pick array dims: a random factorisation of n.
    std::vector<int64_t> dims;
    int64_t rest = n;
    while (rest > 1) {
      std::vector<int64_t> divs;
      for (int64_t d = 1; d <= rest; ++d)
        if (rest % d == 0) divs.push_back(d);
      int64_t d = divs[rng() % divs.size()];
      dims.push_back(d);
      rest /= d;
    }
    if (dims.empty()) dims.push_back(1);
    std::vector<int64_t> ref = TransposeRef(Iota(n), r, p);
    TileAssignment t = TileAssignment::Iota(dims, r, p);
    ASSERT_EQ(t.Devices(), ref);
    TileAssignment e = TileAssignment::FromDevices(dims, ref);
    ASSERT_TRUE(e.is_iota()) << t.ToString();
    ASSERT_EQ(e, t) << e.ToString() << " vs " << t.ToString();
    ASSERT_EQ(e.ToString(), t.ToString());
    for (int64_t dev = 0; dev < n; ++dev) {
      auto idx = t.IndexOfDevice(dev);
      ASSERT_TRUE(idx.has_value());
      ASSERT_EQ(t.DeviceAt(*idx), dev);
    }
    // Index arithmetic agrees with IndexOfDevice.
    for (size_t d = 0; d < dims.size(); ++d) {
      auto terms = t.IndexTermsForDim(d);
      if (!terms) continue;
      for (int64_t dev = 0; dev < n; ++dev) {
        int64_t idx = 0;
        for (const auto& term : *terms)
          idx += (dev / term.divisor) % term.modulus * term.multiplier;
        ASSERT_EQ(idx, (*t.IndexOfDevice(dev))[d]) << t.ToString() << " dim " << d;
      }
    }
    // Transpose agrees with the reference.
    std::vector<int64_t> q = Iota(dims.size());
    std::shuffle(q.begin(), q.end(), rng);
    TileAssignment tt = t.Transpose(q);
    ASSERT_EQ(tt.Devices(), TransposeRef(ref, dims, q)) << t.ToString();
    std::vector<int64_t> td(dims.size());
    for (size_t i = 0; i < q.size(); ++i) td[i] = dims[q[i]];
    ASSERT_EQ(tt, TileAssignment::FromDevices(td, TransposeRef(ref, dims, q)));
    // Sorting the last dim.
    std::vector<int64_t> sorted = ref;
    for (size_t i = 0; i < sorted.size(); i += dims.back())
      std::sort(sorted.begin() + i, sorted.begin() + i + dims.back());
    ASSERT_EQ(t.SortLastDim().Devices(), sorted) << t.ToString();
    ASSERT_EQ(t.SortLastDim(), TileAssignment::FromDevices(dims, sorted));
  }
}

TEST(TileAssignment, IndexTerms) {
  // [2,4]<=[2,2,2]T(2,1,0): device bits (b2 b1 b0); dim 0 index = b0,
  // dim 1 index = b1*2 + b2.
  TileAssignment t = TileAssignment::Iota({2, 4}, {2, 2, 2}, {2, 1, 0});
  auto d0 = *t.IndexTermsForDim(0);
  ASSERT_EQ(d0.size(), 1u);
  EXPECT_EQ(d0[0].divisor, 1);
  EXPECT_EQ(d0[0].modulus, 2);
  auto d1 = *t.IndexTermsForDim(1);
  ASSERT_EQ(d1.size(), 2u);
  EXPECT_EQ(d1[0].divisor, 2);
  EXPECT_EQ(d1[0].multiplier, 2);
  EXPECT_EQ(d1[1].divisor, 4);
  EXPECT_EQ(d1[1].multiplier, 1);
  EXPECT_FALSE(TileAssignment::FromDevices({2}, {1, 0}).IndexTermsForDim(0));
  EXPECT_TRUE(TileAssignment::Iota({4, 1}).IndexTermsForDim(1)->empty());
}

TEST(TileAssignment, ExplicitOps) {
  TileAssignment t = TileAssignment::FromDevices({2, 3}, {5, 0, 3, 1, 2, 4});
  EXPECT_FALSE(t.is_iota());
  EXPECT_EQ(t.ToString(), "[2,3]5,0,3,1,2,4");
  EXPECT_EQ(t.Transpose({1, 0}).Devices(),
            (std::vector<int64_t>{5, 1, 0, 2, 3, 4}));
  EXPECT_EQ(t.SortLastDim().Devices(),
            (std::vector<int64_t>{0, 3, 5, 1, 2, 4}));
  EXPECT_EQ(*t.IndexOfDevice(2), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(t.MaxDevice(), 5);
  EXPECT_EQ(t.Reshape({6}).ToString(), "[6]5,0,3,1,2,4");
  // Sorting can turn an explicit array into an iota.
  EXPECT_TRUE(TileAssignment::FromDevices({2, 2}, {1, 0, 3, 2})
                  .SortLastDim()
                  .is_iota());
}

// 8192 devices in iota form: queries cost O(rank). Ten thousand lookups
// would take ~10^8 steps if anything scanned the devices.
TEST(TileAssignment, LargeIotaQueriesAreSymbolic) {
  TileAssignment t =
      TileAssignment::Iota({16, 8, 64}, {8, 16, 64}, {1, 0, 2});
  auto start = std::chrono::steady_clock::now();
  int64_t checksum = 0;
  for (int64_t dev = 0; dev < 8192; dev += 1) {
    auto idx = t.IndexOfDevice(dev);
    checksum += t.DeviceAt(*idx) == dev;
  }
  TileAssignment tt = t.Transpose({2, 0, 1});
  EXPECT_TRUE(tt.is_iota());
  EXPECT_TRUE(tt.SortLastDim().is_iota());
  EXPECT_EQ(checksum, 8192);
  EXPECT_EQ(t.MaxDevice(), 8191);
  EXPECT_FALSE(t.HasDuplicates());
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  EXPECT_LT(ms, 50.0) << "iota queries look O(devices)";
}

// 2^26 devices: one O(devices) step per query would take seconds.
TEST(TileAssignment, HugeIotaQueriesAreSymbolic) {
  TileAssignment t = TileAssignment::Iota({1 << 13, 1 << 13}, {1 << 13, 1 << 13},
                                          {1, 0});
  auto start = std::chrono::steady_clock::now();
  int64_t ok = 0;
  for (int64_t dev = 0; dev < (int64_t{1} << 26); dev += 65537)
    ok += t.DeviceAt(*t.IndexOfDevice(dev)) == dev;
  TileAssignment moved = t.Transpose({1, 0}).Reshape({1 << 20, 1 << 6});
  EXPECT_TRUE(moved.is_iota());
  EXPECT_EQ(moved.ToString(), "[1048576,64]<=[67108864]");
  EXPECT_EQ(ok, ((int64_t{1} << 26) + 65536) / 65537);
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  EXPECT_LT(ms, 50.0);
}

}  // namespace
}  // namespace meshsplit
