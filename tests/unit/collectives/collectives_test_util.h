// Helpers shared by the collectives unit tests: device-group configurations
// (all devices, reversed, iota forms, shuffled explicit groups), row-major
// index arithmetic, a reference fold with XLA's element semantics (written
// independently of reduction.cc), and a watchdog that turns a hang into a
// test failure.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/threads_backend.h"
#include "ir/attributes.h"
#include "support/float16.h"

namespace meshsplit::testing {

struct GroupConfig {
  std::string name;
  CommGroups groups;
  bool equal_sizes = true;
};

inline CommGroups Iota(std::vector<int64_t> group_dims,
                         std::vector<int64_t> reshape_dims,
                         std::vector<int64_t> perm = {}) {
  ReplicaGroups rg;
  rg.is_iota = true;
  rg.group_dims = std::move(group_dims);
  rg.reshape_dims = std::move(reshape_dims);
  rg.transpose_perm = std::move(perm);
  return rg.Expand();
}

// Group layouts for n devices. Explicit orders are deliberately not sorted,
// so that "group order" and "id order" differ.
inline std::vector<GroupConfig> GroupConfigs(int n) {
  std::vector<GroupConfig> out;
  out.push_back({"all", {}, true});
  CommGroups reversed(1);
  for (int d = n - 1; d >= 0; --d) reversed[0].push_back(d);
  out.push_back({"reversed", reversed, true});
  out.push_back({"iota_singletons", Iota({n, 1}, {n}), true});
  if (n % 2 == 0 && n > 2) {
    out.push_back({"iota_pairs", Iota({n / 2, 2}, {n}), true});
    out.push_back({"iota_transposed", Iota({2, n / 2}, {n / 2, 2}, {1, 0}), true});
    // Pairs in a scrambled order: {3,0},{1,2} for n=4, ...
    CommGroups scrambled;
    for (int g = 0; g < n / 2; ++g)
      scrambled.push_back({(2 * g + 3) % n, (2 * g) % n});
    // (2g+3)%n hits every odd id once and 2g every even id once.
    out.push_back({"scrambled_pairs", scrambled, true});
  }
  if (n == 3) out.push_back({"rotated", {{2, 0, 1}}, true});
  if (n >= 3) {
    // Unequal sizes (all-reduce only): {1} and the rest, reversed.
    CommGroups uneven = {{1}, {}};
    for (int d = n - 1; d >= 0; --d)
      if (d != 1) uneven[1].push_back(d);
    out.push_back({"uneven_sizes", uneven, false});
  }
  return out;
}

inline CommGroups ExpandGroups(const CommGroups& groups, int n) {
  if (!groups.empty()) return groups;
  CommGroups all(1);
  for (int d = 0; d < n; ++d) all[0].push_back(d);
  return all;
}

inline std::vector<int64_t> Unflatten(int64_t j, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
    idx[k] = dims[k] ? j % dims[k] : 0;
    j = dims[k] ? j / dims[k] : 0;
  }
  return idx;
}

inline int64_t Flatten(const std::vector<int64_t>& idx,
                       const std::vector<int64_t>& dims) {
  int64_t j = 0;
  for (size_t k = 0; k < dims.size(); ++k) j = j * dims[k] + idx[k];
  return j;
}

inline int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Reference element semantics (collectives.h, "Fixed reduction order").
inline float RefFloatOp(ReductionKind kind, float a, float b) {
  switch (kind) {
    case ReductionKind::kAdd:
      return a + b;
    case ReductionKind::kMul:
      return a * b;
    case ReductionKind::kMin:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return b < a ? b : a;
    case ReductionKind::kMax:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return b > a ? b : a;
    default:
      ADD_FAILURE() << "bitwise kind on float";
      return 0;
  }
}

inline int32_t RefS32Op(ReductionKind kind, int32_t a, int32_t b) {
  uint32_t ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
  switch (kind) {
    case ReductionKind::kAdd:
      return static_cast<int32_t>(ua + ub);
    case ReductionKind::kMul:
      return static_cast<int32_t>(ua * ub);
    case ReductionKind::kMin:
      return std::min(a, b);
    case ReductionKind::kMax:
      return std::max(a, b);
    case ReductionKind::kAnd:
      return a & b;
    case ReductionKind::kOr:
      return a | b;
    case ReductionKind::kXor:
      return a ^ b;
  }
  return 0;
}

// One element as raw bits, for the three element types the device tests
// sweep (f32, s32, bf16).
inline uint32_t RefCombine(PrimitiveType type, ReductionKind kind, uint32_t a,
                           uint32_t b) {
  if (type == PrimitiveType::F32) {
    float fa, fb;
    std::memcpy(&fa, &a, 4);
    std::memcpy(&fb, &b, 4);
    float r = RefFloatOp(kind, fa, fb);
    uint32_t u;
    std::memcpy(&u, &r, 4);
    return u;
  }
  if (type == PrimitiveType::S32)
    return static_cast<uint32_t>(
        RefS32Op(kind, static_cast<int32_t>(a), static_cast<int32_t>(b)));
  // bf16: compute in f32, round to bf16 after every step.
  float r = RefFloatOp(kind, Bf16ToF32(static_cast<uint16_t>(a)),
                       Bf16ToF32(static_cast<uint16_t>(b)));
  return F32ToBf16(r);
}

// Runs RunOnThreads and fails the whole test binary (instead of hanging
// ctest) if it does not return within `seconds`.
inline Status RunWithDeadline(
    int n, const std::function<Status(int, Communicator&)>& fn,
    double seconds = 20) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;
  std::thread runner([&] {
    Status s = RunOnThreads(n, fn);
    std::lock_guard<std::mutex> lock(mu);
    result = s;
    done = true;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::duration<double>(seconds),
                     [&] { return done; })) {
      std::fprintf(stderr, "collectives test: devices still blocked after %.0f s\n",
                   seconds);
      std::fflush(stderr);
      std::_Exit(3);
    }
  }
  runner.join();
  return result;
}

}  // namespace meshsplit::testing
