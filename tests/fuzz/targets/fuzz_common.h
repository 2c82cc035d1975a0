// Shared by the libFuzzer targets (tests/fuzz/targets, docs/fuzzing.md):
// the input as a string, and the size limits past which an input is not
// worth a run (a 65536-device mesh or a 2^40-element array is a legitimate
// refusal elsewhere, but here it only makes one execution take seconds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/partition_count.h"
#include "ir/module.h"
#include "support/status.h"

namespace meshsplit::fuzz {

inline std::string AsString(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

inline constexpr int64_t kMaxDevices = 64;
inline constexpr int64_t kMaxElements = int64_t{1} << 22;
inline constexpr int64_t kMaxInstructions = 4000;

// True when every count the compile passes scale with is small.
inline bool WithinLimits(const Module& m) {
  if (m.num_partitions() > kMaxDevices || m.replica_count() > kMaxDevices) return false;
  if (PartitionsNamedByShardings(m) > kMaxDevices) return false;
  int64_t instructions = 0;
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions()) {
      if (++instructions > kMaxInstructions) return false;
      if (i->shape().ByteSize() > kMaxElements * 16) return false;
    }
  return true;
}

// A property of the code under test failed: abort so libFuzzer records the
// input.
[[noreturn]] inline void Fail(const std::string& what, const Status& status) {
  std::fprintf(stderr, "fuzz property failed: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  std::abort();
}

}  // namespace meshsplit::fuzz
