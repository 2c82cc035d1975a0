// all-reduce and reduce-scatter on the threads backend: every device count
// 1,2,3,4,8, group layouts (all, reversed, iota, scrambled, uneven sizes),
// every reduction kind for f32/s32/bf16, small and sliced sizes, in place and
// not. Results are compared bit for bit with a left fold in group order.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "collectives/collectives.h"
#include "collectives/threads_backend.h"
#include "collectives_test_util.h"

namespace meshsplit {
namespace {

using testing::ExpandGroups;
using testing::GroupConfigs;
using testing::RefCombine;

constexpr int kDeviceCounts[] = {1, 2, 3, 4, 8};

std::vector<ReductionKind> KindsFor(PrimitiveType type) {
  if (type == PrimitiveType::S32)
    return {ReductionKind::kAdd, ReductionKind::kMul, ReductionKind::kMin,
            ReductionKind::kMax, ReductionKind::kAnd, ReductionKind::kOr,
            ReductionKind::kXor};
  return {ReductionKind::kAdd, ReductionKind::kMul, ReductionKind::kMin,
          ReductionKind::kMax};
}

// Values whose sums depend on the order of addition (mixed magnitudes), a
// NaN now and then for min/max, wrapping integers.
uint32_t MakeValue(PrimitiveType type, ReductionKind kind, int device,
                   int64_t i) {
  // splitmix64: cheap, well mixed, deterministic per (device, i).
  uint64_t state = static_cast<uint64_t>(device) * 0x9E3779B97F4A7C15ull +
                   static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull + 1;
  auto rng = [&state]() -> uint32_t {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<uint32_t>((z ^ (z >> 31)) >> 16);
  };
  if (type == PrimitiveType::S32) {
    uint32_t v = rng();
    if (kind == ReductionKind::kMul) v |= 1;
    return v;
  }
  float f;
  if (kind == ReductionKind::kMul) {
    f = std::ldexp(1.0f + (rng() % 1024) / 1024.0f, static_cast<int>(rng() % 3) - 1);
  } else {
    f = std::ldexp(1.0f + (rng() % 100000) / 100000.0f,
                   static_cast<int>(rng() % 25) - 12);
  }
  if (rng() % 2) f = -f;
  if ((kind == ReductionKind::kMin || kind == ReductionKind::kMax) &&
      device == 1 && i % 13 == 5)
    f = std::numeric_limits<float>::quiet_NaN();
  if (type == PrimitiveType::BF16) return F32ToBf16(f);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint32_t Get(const std::vector<uint8_t>& buf, int64_t i, int64_t w) {
  uint32_t v = 0;
  std::memcpy(&v, buf.data() + i * w, w);
  return v;
}
void Set(std::vector<uint8_t>& buf, int64_t i, int64_t w, uint32_t v) {
  std::memcpy(buf.data() + i * w, &v, w);
}

std::string Trace(int n, const testing::GroupConfig& cfg, PrimitiveType type,
                  ReductionKind kind, int64_t count, bool in_place) {
  return "n=" + std::to_string(n) + " groups=" + cfg.name + " type=" +
         std::string(PrimitiveTypeName(type)) + " kind=" +
         std::string(ReductionKindName(kind)) + " count=" +
         std::to_string(count) + (in_place ? " in-place" : "");
}

// Runs one all-reduce and checks every device's output. Returns how many
// elements would differ if the group order were reversed (to show the data
// can tell orders apart).
int64_t CheckAllReduce(int n, const testing::GroupConfig& cfg,
                       PrimitiveType type, ReductionKind kind, int64_t count,
                       bool in_place) {
  SCOPED_TRACE(Trace(n, cfg, type, kind, count, in_place));
  const int64_t w = ByteWidth(type);
  std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count * w));
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(count * w, 0xAB));
  for (int d = 0; d < n; ++d)
    for (int64_t i = 0; i < count; ++i) Set(in[d], i, w, MakeValue(type, kind, d, i));
  if (in_place) out = in;
  Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
    const void* src = in_place ? out[d].data() : in[d].data();
    return c.AllReduce(src, out[d].data(), type, count, kind, cfg.groups);
  });
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return 0;
  int64_t order_sensitive = 0;
  for (const auto& group : ExpandGroups(cfg.groups, n)) {
    for (int64_t i = 0; i < count; ++i) {
      uint32_t acc = Get(in[group[0]], i, w);
      for (size_t k = 1; k < group.size(); ++k)
        acc = RefCombine(type, kind, acc, Get(in[group[k]], i, w));
      uint32_t rev = Get(in[group.back()], i, w);
      for (int k = static_cast<int>(group.size()) - 2; k >= 0; --k)
        rev = RefCombine(type, kind, rev, Get(in[group[k]], i, w));
      if (rev != acc) ++order_sensitive;
      for (int64_t m : group) {
        uint32_t got = Get(out[m], i, w);
        if (got != acc) {
          ADD_FAILURE() << "device " << m << " element " << i << ": got 0x"
                        << std::hex << got << " want 0x" << acc;
          return order_sensitive;
        }
      }
    }
  }
  return order_sensitive;
}

TEST(ThreadsAllReduceTest, EveryKindTypeAndGroupLayout) {
  for (int n : kDeviceCounts) {
    for (const auto& cfg : GroupConfigs(n)) {
      for (PrimitiveType type :
           {PrimitiveType::F32, PrimitiveType::S32, PrimitiveType::BF16}) {
        for (ReductionKind kind : KindsFor(type)) {
          CheckAllReduce(n, cfg, type, kind, /*count=*/1, false);
          CheckAllReduce(n, cfg, type, kind, /*count=*/37, false);
          CheckAllReduce(n, cfg, type, kind, /*count=*/37, true);
        }
      }
    }
  }
}

// Sizes above the sliced-algorithm threshold (32 KiB), including counts that
// do not divide evenly into slices.
TEST(ThreadsAllReduceTest, LargeSlicedAllReduce) {
  for (int n : kDeviceCounts) {
    for (const auto& cfg : GroupConfigs(n)) {
      for (PrimitiveType type :
           {PrimitiveType::F32, PrimitiveType::S32, PrimitiveType::BF16}) {
        for (bool in_place : {false, true}) {
          CheckAllReduce(n, cfg, type, ReductionKind::kAdd, 20011, in_place);
        }
      }
      CheckAllReduce(n, cfg, PrimitiveType::F32, ReductionKind::kMax, 9000, false);
    }
  }
}

// The data really distinguishes orders: with 4 contributions a reversed fold
// differs in over a tenth of the elements, and the backend matches the
// forward one.
TEST(ThreadsAllReduceTest, FixedOrderIsObservable) {
  testing::GroupConfig reversed{"reversed", {{3, 2, 1, 0}}, true};
  testing::GroupConfig forward{"all", {}, true};
  for (int64_t count : {int64_t{64}, int64_t{20000}}) {
    for (PrimitiveType type : {PrimitiveType::F32, PrimitiveType::BF16}) {
      EXPECT_GT(CheckAllReduce(4, reversed, type, ReductionKind::kAdd, count, false),
                count / 10);
      EXPECT_GT(CheckAllReduce(4, forward, type, ReductionKind::kAdd, count, false),
                count / 10);
    }
  }
  // Repeating the same all-reduce gives identical bits every time, whatever
  // the thread timing.
  const int64_t count = 5000;
  std::vector<float> first;
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<std::vector<float>> in(8, std::vector<float>(count)), out = in;
    for (int d = 0; d < 8; ++d)
      for (int64_t i = 0; i < count; ++i) {
        uint32_t u = MakeValue(PrimitiveType::F32, ReductionKind::kAdd, d, i);
        std::memcpy(&in[d][i], &u, 4);
      }
    Status s = testing::RunWithDeadline(8, [&](int d, Communicator& c) {
      return c.AllReduce(in[d].data(), out[d].data(), PrimitiveType::F32, count,
                         ReductionKind::kAdd, {});
    });
    ASSERT_TRUE(s.ok()) << s.message();
    if (rep == 0) first = out[0];
    for (int d = 0; d < 8; ++d)
      ASSERT_EQ(std::memcmp(out[d].data(), first.data(), count * 4), 0)
          << "rep " << rep << " device " << d;
  }
}

// Output overlapping the input at an offset (neither apart nor in place),
// on both the small and the sliced path.
TEST(ThreadsAllReduceTest, PartialOverlap) {
  for (int n : {2, 3}) {
    for (int64_t count : {int64_t{100}, int64_t{20000}}) {
      const int64_t shift = 5;
      std::vector<std::vector<int32_t>> buf(n, std::vector<int32_t>(count + shift));
      for (int d = 0; d < n; ++d)
        for (int64_t i = 0; i < count; ++i) buf[d][i] = (d + 1) * 1000 + static_cast<int32_t>(i);
      Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
        return c.AllReduce(buf[d].data(), buf[d].data() + shift, PrimitiveType::S32, count,
                           ReductionKind::kAdd, {});
      });
      ASSERT_TRUE(s.ok()) << s.message();
      for (int d = 0; d < n; ++d)
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(buf[d][i + shift], n * (n + 1) / 2 * 1000 + n * static_cast<int32_t>(i))
              << "n=" << n << " count=" << count << " device " << d << " i=" << i;
    }
  }
}

// reduce-scatter: the input of shape dims is reduced over the group and the
// member at position p keeps block p along `dimension`.
void CheckReduceScatter(int n, const testing::GroupConfig& cfg,
                        PrimitiveType type, ReductionKind kind,
                        std::vector<int64_t> dims, int64_t dimension,
                        bool in_place) {
  const CommGroups groups = ExpandGroups(cfg.groups, n);
  const int64_t g = static_cast<int64_t>(groups[0].size());
  dims[dimension] *= g;
  SCOPED_TRACE(Trace(n, cfg, type, kind, testing::NumElements(dims), in_place) +
               " dimension=" + std::to_string(dimension));
  const int64_t w = ByteWidth(type);
  const int64_t elems = testing::NumElements(dims);
  std::vector<int64_t> out_dims = dims;
  out_dims[dimension] /= g;
  const int64_t out_elems = elems / g;
  std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(elems * w));
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(elems * w, 0xCD));
  for (int d = 0; d < n; ++d)
    for (int64_t i = 0; i < elems; ++i) Set(in[d], i, w, MakeValue(type, kind, d, i));
  if (in_place) out = in;
  Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
    const void* src = in_place ? out[d].data() : in[d].data();
    return c.ReduceScatter(src, out[d].data(), type, dims, dimension, kind,
                           cfg.groups);
  });
  ASSERT_TRUE(s.ok()) << s.message();
  for (const auto& group : groups) {
    for (int64_t p = 0; p < g; ++p) {
      for (int64_t j = 0; j < out_elems; ++j) {
        std::vector<int64_t> idx = testing::Unflatten(j, out_dims);
        idx[dimension] += p * out_dims[dimension];
        int64_t src = testing::Flatten(idx, dims);
        uint32_t acc = Get(in[group[0]], src, w);
        for (size_t k = 1; k < group.size(); ++k)
          acc = RefCombine(type, kind, acc, Get(in[group[k]], src, w));
        uint32_t got = Get(out[group[p]], j, w);
        if (got != acc) {
          ADD_FAILURE() << "device " << group[p] << " element " << j
                        << ": got 0x" << std::hex << got << " want 0x" << acc;
          return;
        }
      }
    }
  }
}

TEST(ThreadsReduceScatterTest, EveryDimensionKindAndType) {
  for (int n : kDeviceCounts) {
    for (const auto& cfg : GroupConfigs(n)) {
      if (!cfg.equal_sizes) continue;
      for (PrimitiveType type :
           {PrimitiveType::F32, PrimitiveType::S32, PrimitiveType::BF16}) {
        for (ReductionKind kind : KindsFor(type))
          CheckReduceScatter(n, cfg, type, kind, {3, 2, 5}, 1, false);
        for (int64_t dim : {0, 2})
          CheckReduceScatter(n, cfg, type, ReductionKind::kAdd, {3, 2, 5}, dim,
                             false);
        CheckReduceScatter(n, cfg, type, ReductionKind::kAdd, {2, 4, 3}, 0, true);
        CheckReduceScatter(n, cfg, type, ReductionKind::kAdd, {4000}, 0, false);
      }
    }
  }
}

}  // namespace
}  // namespace meshsplit

namespace meshsplit {
namespace {

// Big meshes get small device stacks, so 1536 devices start even where the
// default 8 MiB stacks (12 GiB of address space) would not, and still sum.
TEST(ThreadsBigMeshTest, DeviceStacksShrinkAndAllDevicesRun) {
  EXPECT_EQ(DeviceThreadStackBytes(8), int64_t{8} << 20);
  EXPECT_EQ(DeviceThreadStackBytes(1536), int64_t{1} << 20);
  EXPECT_LE(DeviceThreadStackBytes(200) * 199, int64_t{1} << 30);
  const int n = 1536;
  std::vector<int32_t> out(n, -1);
  Status s = RunOnThreads(n, [&](int d, Communicator& c) {
    int32_t one = 1;
    return c.AllReduce(&one, &out[d], PrimitiveType::S32, 1, ReductionKind::kAdd, {});
  });
  ASSERT_TRUE(s.ok()) << s.message();
  for (int d = 0; d < n; ++d) EXPECT_EQ(out[d], n) << "device " << d;
}

}  // namespace
}  // namespace meshsplit
