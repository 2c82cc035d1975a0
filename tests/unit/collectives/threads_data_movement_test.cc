// all-gather, all-to-all (array and tuple forms) and collective-permute on
// the threads backend, for 1,2,3,4,8 devices and several group layouts. Each
// element encodes (device, index), so a misplaced block is caught exactly.
#include <gtest/gtest.h>

#include <cstring>

#include "collectives/collectives.h"
#include "collectives/threads_backend.h"
#include "collectives_test_util.h"

namespace meshsplit {
namespace {

using testing::ExpandGroups;
using testing::Flatten;
using testing::GroupConfigs;
using testing::NumElements;
using testing::Unflatten;

constexpr int kDeviceCounts[] = {1, 2, 3, 4, 8};

// Encodes (device, flat index) in 32 bits; for 2-byte types only the low 16
// bits survive, which still tells devices and nearby indices apart.
uint32_t Tag(int device, int64_t i) {
  return static_cast<uint32_t>(device) * 40503u + static_cast<uint32_t>(i) * 7u + 1;
}

uint32_t Get(const std::vector<uint8_t>& buf, int64_t i, int64_t w) {
  uint32_t v = 0;
  std::memcpy(&v, buf.data() + i * w, w);
  return v;
}

uint32_t Truncate(uint32_t v, int64_t w) {
  return w >= 4 ? v : v & ((1u << (8 * w)) - 1);
}

std::vector<std::vector<uint8_t>> TaggedInputs(int n, int64_t elems, int64_t w) {
  std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(elems * w));
  for (int d = 0; d < n; ++d)
    for (int64_t i = 0; i < elems; ++i) {
      uint32_t v = Tag(d, i);
      std::memcpy(in[d].data() + i * w, &v, w);
    }
  return in;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

void CheckAllGather(int n, const testing::GroupConfig& cfg, PrimitiveType type,
                    const std::vector<int64_t>& dims, int64_t dimension,
                    bool in_place) {
  SCOPED_TRACE("n=" + std::to_string(n) + " groups=" + cfg.name + " dims=" +
               DimsText(dims) + " dimension=" + std::to_string(dimension) +
               (in_place ? " in-place" : ""));
  const CommGroups groups = ExpandGroups(cfg.groups, n);
  const int64_t g = static_cast<int64_t>(groups[0].size());
  const int64_t w = ByteWidth(type);
  const int64_t elems = NumElements(dims);
  std::vector<int64_t> out_dims = dims;
  out_dims[dimension] *= g;
  auto in = TaggedInputs(n, elems, w);
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(elems * g * w, 0xEE));
  if (in_place)  // the input occupies the front of the output buffer
    for (int d = 0; d < n; ++d) std::memcpy(out[d].data(), in[d].data(), elems * w);
  Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
    const void* src = in_place ? out[d].data() : in[d].data();
    return c.AllGather(src, out[d].data(), type, dims, dimension, cfg.groups);
  });
  ASSERT_TRUE(s.ok()) << s.message();
  for (const auto& group : groups) {
    for (int64_t m : group) {
      for (int64_t j = 0; j < elems * g; ++j) {
        std::vector<int64_t> idx = Unflatten(j, out_dims);
        int64_t k = idx[dimension] / dims[dimension];
        idx[dimension] %= dims[dimension];
        uint32_t want = Truncate(Tag(group[k], Flatten(idx, dims)), w);
        uint32_t got = Get(out[m], j, w);
        if (got != want) {
          ADD_FAILURE() << "device " << m << " element " << j << ": got " << got
                        << " want " << want;
          return;
        }
      }
    }
  }
}

TEST(ThreadsAllGatherTest, EveryDimensionAndGroupLayout) {
  for (int n : kDeviceCounts) {
    for (const auto& cfg : GroupConfigs(n)) {
      if (!cfg.equal_sizes) continue;
      for (PrimitiveType type : {PrimitiveType::S32, PrimitiveType::BF16}) {
        for (int64_t dim = 0; dim < 3; ++dim) {
          CheckAllGather(n, cfg, type, {2, 3, 4}, dim, false);
          CheckAllGather(n, cfg, type, {2, 3, 4}, dim, true);
        }
        CheckAllGather(n, cfg, type, {7}, 0, false);
        CheckAllGather(n, cfg, type, {0, 3}, 1, false);  // empty array
        CheckAllGather(n, cfg, type, {5000}, 0, false);
      }
    }
  }
}

// Output of the member at position p: for each sender position k, block p of
// sender k's input (cut along split) lands at block k along concat.
void CheckAllToAll(int n, const testing::GroupConfig& cfg, PrimitiveType type,
                   std::vector<int64_t> dims, int64_t split, int64_t concat,
                   bool in_place) {
  const CommGroups groups = ExpandGroups(cfg.groups, n);
  const int64_t g = static_cast<int64_t>(groups[0].size());
  dims[split] *= g;
  SCOPED_TRACE("n=" + std::to_string(n) + " groups=" + cfg.name + " dims=" +
               DimsText(dims) + " split=" + std::to_string(split) +
               " concat=" + std::to_string(concat) + (in_place ? " in-place" : ""));
  const int64_t w = ByteWidth(type);
  const int64_t elems = NumElements(dims);
  std::vector<int64_t> block = dims;
  block[split] /= g;
  std::vector<int64_t> out_dims = block;
  out_dims[concat] *= g;
  auto in = TaggedInputs(n, elems, w);
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(elems * w, 0xEE));
  if (in_place) out = in;
  Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
    const void* src = in_place ? out[d].data() : in[d].data();
    return c.AllToAll(src, out[d].data(), type, dims, split, concat, cfg.groups);
  });
  ASSERT_TRUE(s.ok()) << s.message();
  for (const auto& group : groups) {
    for (int64_t p = 0; p < g; ++p) {
      for (int64_t j = 0; j < elems; ++j) {
        std::vector<int64_t> idx = Unflatten(j, out_dims);
        int64_t k = idx[concat] / block[concat];
        idx[concat] %= block[concat];
        idx[split] += p * block[split];
        uint32_t want = Truncate(Tag(group[k], Flatten(idx, dims)), w);
        uint32_t got = Get(out[group[p]], j, w);
        if (got != want) {
          ADD_FAILURE() << "device " << group[p] << " element " << j
                        << ": got " << got << " want " << want;
          return;
        }
      }
    }
  }
}

TEST(ThreadsAllToAllTest, EverySplitConcatPair) {
  for (int n : kDeviceCounts) {
    for (const auto& cfg : GroupConfigs(n)) {
      if (!cfg.equal_sizes) continue;
      for (int64_t split = 0; split < 3; ++split)
        for (int64_t concat = 0; concat < 3; ++concat) {
          CheckAllToAll(n, cfg, PrimitiveType::S32, {2, 3, 2}, split, concat, false);
          CheckAllToAll(n, cfg, PrimitiveType::BF16, {3, 1, 2}, split, concat,
                        split == concat);
        }
      CheckAllToAll(n, cfg, PrimitiveType::S32, {1000}, 0, 0, false);
    }
  }
}

TEST(ThreadsAllToAllTest, TupleForm) {
  for (int n : kDeviceCounts) {
    for (const auto& cfg : GroupConfigs(n)) {
      if (!cfg.equal_sizes) continue;
      SCOPED_TRACE("n=" + std::to_string(n) + " groups=" + cfg.name);
      const CommGroups groups = ExpandGroups(cfg.groups, n);
      const int64_t g = static_cast<int64_t>(groups[0].size());
      const int64_t count = 5;
      // in[d][k]: the operand device d sends to position k.
      std::vector<std::vector<std::vector<int32_t>>> in(n), out(n);
      for (int d = 0; d < n; ++d) {
        in[d].assign(g, std::vector<int32_t>(count));
        out[d].assign(g, std::vector<int32_t>(count, -1));
        for (int64_t k = 0; k < g; ++k)
          for (int64_t i = 0; i < count; ++i) in[d][k][i] = d * 10000 + k * 100 + i;
      }
      Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
        std::vector<const void*> ins;
        std::vector<void*> outs;
        for (int64_t k = 0; k < g; ++k) {
          ins.push_back(in[d][k].data());
          outs.push_back(out[d][k].data());
        }
        return c.AllToAllTuple(ins, outs, PrimitiveType::S32, count, cfg.groups);
      });
      ASSERT_TRUE(s.ok()) << s.message();
      for (const auto& group : groups)
        for (int64_t r = 0; r < g; ++r)
          for (int64_t k = 0; k < g; ++k)
            EXPECT_EQ(out[group[r]][k], in[group[k]][r]) << "r=" << r << " k=" << k;
    }
  }
}

TEST(ThreadsAllToAllTest, TupleFormInPlace) {
  const int n = 3;
  std::vector<std::vector<std::vector<int32_t>>> buf(n);
  for (int d = 0; d < n; ++d) {
    buf[d].assign(n, std::vector<int32_t>(4));
    for (int k = 0; k < n; ++k)
      for (int i = 0; i < 4; ++i) buf[d][k][i] = d * 100 + k * 10 + i;
  }
  auto orig = buf;
  Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
    std::vector<const void*> ins;
    std::vector<void*> outs;
    for (int k = 0; k < n; ++k) {
      ins.push_back(buf[d][k].data());
      outs.push_back(buf[d][k].data());
    }
    return c.AllToAllTuple(ins, outs, PrimitiveType::S32, 4, {});
  });
  ASSERT_TRUE(s.ok()) << s.message();
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < n; ++k) EXPECT_EQ(buf[r][k], orig[k][r]);
}

void CheckPermute(int n, const SourceTargetPairs& pairs, bool in_place,
                  const std::string& name) {
  SCOPED_TRACE("n=" + std::to_string(n) + " pairs=" + name +
               (in_place ? " in-place" : ""));
  const int64_t count = 9;
  auto in = TaggedInputs(n, count, 4);
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(count * 4, 0x77));
  if (in_place) out = in;
  Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
    const void* src = in_place ? out[d].data() : in[d].data();
    return c.CollectivePermute(src, out[d].data(), PrimitiveType::F32, count, pairs);
  });
  ASSERT_TRUE(s.ok()) << s.message();
  for (int t = 0; t < n; ++t) {
    int source = -1;
    for (const auto& [a, b] : pairs)
      if (b == t) source = static_cast<int>(a);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t want = source >= 0 ? Tag(source, i) : 0u;
      EXPECT_EQ(Get(out[t], i, 4), want) << "device " << t << " element " << i;
    }
  }
}

TEST(ThreadsCollectivePermuteTest, RingsPartialAndEmpty) {
  for (int n : kDeviceCounts) {
    SourceTargetPairs ring, back, partial, self;
    for (int d = 0; d < n; ++d) {
      ring.push_back({d, (d + 1) % n});
      back.push_back({d, (d + n - 1) % n});
      self.push_back({d, d});
    }
    // Only even devices send, to the next id: odd-less targets get zeros.
    for (int d = 0; d + 1 < n; d += 2) partial.push_back({d, d + 1});
    for (bool in_place : {false, true}) {
      CheckPermute(n, ring, in_place, "ring");
      CheckPermute(n, back, in_place, "back");
      CheckPermute(n, partial, in_place, "partial");
      CheckPermute(n, self, in_place, "self");
      CheckPermute(n, {}, in_place, "empty");
    }
  }
}

TEST(ThreadsBarrierTest, ManyRoundsOversubscribed) {
  // 8 devices on (typically) 2 cores, a few thousand rendezvous: checks the
  // barrier's generation logic and that waiters yield rather than starve.
  for (int n : {3, 8}) {
    const int rounds = 300;
    std::vector<int64_t> sums(n, 0);
    Status s = testing::RunWithDeadline(n, [&](int d, Communicator& c) {
      for (int r = 0; r < rounds; ++r) {
        int64_t v = d + r, out = 0;
        MS_RETURN_IF_ERROR(c.AllReduce(&v, &out, PrimitiveType::S64, 1,
                                       ReductionKind::kAdd, {}));
        if (out != int64_t{n} * (n - 1) / 2 + int64_t{n} * r)
          return Status::Error("wrong sum in round " + std::to_string(r));
        sums[d] += out;
        MS_RETURN_IF_ERROR(c.Barrier());
      }
      return Status::Ok();
    });
    ASSERT_TRUE(s.ok()) << s.message();
    for (int d = 1; d < n; ++d) EXPECT_EQ(sums[d], sums[0]);
  }
}

}  // namespace
}  // namespace meshsplit
