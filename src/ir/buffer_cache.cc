// The large-block cache behind literal storage (see buffer_cache.h).
#include "ir/buffer_cache.h"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace meshsplit {
namespace {

// Below this, malloc recycles freed blocks itself (its heap keeps them).
constexpr size_t kLargeBytes = size_t{1} << 20;
// The most the cache holds; a block freed beyond it goes back to the system.
constexpr size_t kBudgetBytes = size_t{1} << 30;

// Rounds a large request up to a size class: a multiple of 4 KiB keeping
// only its three leading bits, so a block wastes at most 1/8 of its size and
// requests of nearly equal size share blocks.
size_t SizeClass(size_t bytes) {
  size_t pages = (bytes + 4095) / 4096;
  int top = 63 - __builtin_clzll(pages);
  if (top >= 3) {
    size_t unit = size_t{1} << (top - 2);
    pages = (pages + unit - 1) / unit * unit;
  }
  return pages * 4096;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // by size class
  size_t cached = 0;
  int64_t hits = 0, misses = 0;
};

// Never destroyed: literals in static storage may be freed after any
// destructor of this file would have run.
Cache& GetCache() {
  static Cache* cache = new Cache;
  return *cache;
}

void* MapBlock(size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  // Fewer, larger page faults on first touch where transparent huge pages
  // are enabled on request (a hint: ignored elsewhere).
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

}  // namespace

void* AllocateBuffer(size_t bytes) {
  if (bytes < kLargeBytes) {
    void* p = std::malloc(bytes > 0 ? bytes : 1);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  const size_t size = SizeClass(bytes);
  Cache& c = GetCache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.cached -= size;
      ++c.hits;
      return p;
    }
    ++c.misses;
  }
  return MapBlock(size);
}

void FreeBuffer(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes < kLargeBytes) {
    std::free(p);
    return;
  }
  const size_t size = SizeClass(bytes);
  Cache& c = GetCache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.cached + size <= kBudgetBytes) {
      c.free_blocks[size].push_back(p);
      c.cached += size;
      return;
    }
  }
  munmap(p, size);
}

BufferCacheStats GetBufferCacheStats() {
  Cache& c = GetCache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {static_cast<int64_t>(c.cached), c.hits, c.misses};
}

void ReleaseBufferCache() {
  Cache& c = GetCache();
  std::unordered_map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    blocks.swap(c.free_blocks);
    c.cached = 0;
  }
  for (auto& [size, list] : blocks)
    for (void* p : list) munmap(p, size);
}

}  // namespace meshsplit
