// Writing large kernel outputs at memory speed. An output larger than the
// last-level cache is evicted before anyone reads it, so writing it with
// ordinary stores costs a read of every destination line first (the cache
// fills the line it is about to overwrite): 1.5x the traffic of the copy
// itself. Non-temporal stores skip that read. Kernels whose output is at
// least StreamingBytes() write it through these helpers.
#pragma once

#include <cstdint>

namespace meshsplit::interp {

// Output size from which kernels stream: half the last-level cache (L3,
// else L2, as sysconf reports it; 16 MiB when it reports neither), at most
// 32 MiB (a virtual machine reports its host's whole L3), so an output that
// the next kernel could still find in cache is written the ordinary way.
int64_t StreamingBytes();

// Copies `bytes` from `src` to `dst` (not overlapping) with non-temporal
// stores for the 16-byte-aligned middle of `dst`; the unaligned ends go
// through memcpy. Call StreamingFence() before the data is handed on.
void StreamCopy(uint8_t* dst, const uint8_t* src, int64_t bytes);

// Orders the non-temporal stores before every later store, so the output is
// complete for whoever (another device thread included) reads it next.
void StreamingFence();

// Runs `compute(begin, end, out)` over [0, n) in chunks whose results land in
// an L1-resident scratch buffer, then streams each chunk to `dst`. `compute`
// writes elements begin..end-1 of the result to out[0..end-begin). Reading an
// input that `dst` aliases is safe: each chunk is read before it is written.
template <typename T, typename F>
void StreamChunks(T* dst, int64_t n, F compute) {
  constexpr int64_t kChunk = 4096 / sizeof(T) > 0 ? 4096 / sizeof(T) : 1;
  alignas(64) T scratch[kChunk];
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t m = n - s < kChunk ? n - s : kChunk;
    compute(s, s + m, scratch);
    StreamCopy(reinterpret_cast<uint8_t*>(dst + s), reinterpret_cast<const uint8_t*>(scratch),
               m * static_cast<int64_t>(sizeof(T)));
  }
  StreamingFence();
}

}  // namespace meshsplit::interp
