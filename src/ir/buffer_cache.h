// Storage for literal bytes. Large blocks are kept in a process-wide cache
// when freed and handed out again, because a fresh large block comes from
// mmap and the first write to each of its pages is a page fault plus a
// kernel zero-fill: for a 64 MiB output that costs several times the kernel
// that writes it. Small blocks go straight to malloc, which recycles them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace meshsplit {

// Returns at least `bytes` bytes, 16-byte aligned (large blocks page
// aligned); contents are undefined. Throws std::bad_alloc when out of memory.
void* AllocateBuffer(size_t bytes);
// Returns a block from AllocateBuffer(bytes) (the same `bytes`).
void FreeBuffer(void* p, size_t bytes);

struct BufferCacheStats {
  int64_t cached_bytes = 0;  // held in the cache now
  int64_t hits = 0;          // large allocations served from the cache
  int64_t misses = 0;        // large allocations that went to the system
};
BufferCacheStats GetBufferCacheStats();
// Returns every cached block to the system.
void ReleaseBufferCache();

}  // namespace meshsplit
