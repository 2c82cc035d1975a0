// The large-block cache behind literal storage: freed large blocks are
// handed out again, small ones are not cached, and literals built on it keep
// their contents through copies and moves.
#include "ir/buffer_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "ir/literal.h"

namespace meshsplit {
namespace {

TEST(BufferCache, FreedLargeBlockIsReused) {
  ReleaseBufferCache();
  const size_t bytes = (size_t{5} << 20) + 123;  // an odd size: rounded to a class
  void* p = AllocateBuffer(bytes);
  std::memset(p, 0x5A, bytes);  // every byte is usable
  FreeBuffer(p, bytes);
  BufferCacheStats before = GetBufferCacheStats();
  EXPECT_GE(before.cached_bytes, static_cast<int64_t>(bytes));
  // A request of nearly the same size falls in the same class.
  void* q = AllocateBuffer(bytes + 1000);
  EXPECT_EQ(q, p);
  BufferCacheStats after = GetBufferCacheStats();
  EXPECT_EQ(after.hits, before.hits + 1);
  EXPECT_LT(after.cached_bytes, before.cached_bytes);
  FreeBuffer(q, bytes + 1000);
  ReleaseBufferCache();
  EXPECT_EQ(GetBufferCacheStats().cached_bytes, 0);
}

TEST(BufferCache, SmallBlocksAreNotCached) {
  ReleaseBufferCache();
  void* p = AllocateBuffer(4096);
  FreeBuffer(p, 4096);
  EXPECT_EQ(GetBufferCacheStats().cached_bytes, 0);
  void* z = AllocateBuffer(0);  // a valid, freeable pointer
  EXPECT_NE(z, nullptr);
  FreeBuffer(z, 0);
}

TEST(BufferCache, DifferentClassesDoNotMix) {
  ReleaseBufferCache();
  const size_t small = size_t{2} << 20, large = size_t{8} << 20;
  void* p = AllocateBuffer(small);
  FreeBuffer(p, small);
  void* q = AllocateBuffer(large);  // must not get the 2 MiB block
  std::memset(q, 1, large);
  EXPECT_NE(q, p);
  FreeBuffer(q, large);
  ReleaseBufferCache();
}

TEST(BufferCache, LargeLiteralsKeepTheirValues) {
  const int64_t n = (int64_t{3} << 20) / 4;  // 3 MiB of f32
  Shape s(PrimitiveType::F32, {n});
  Literal a(s);  // zero-filled even when its block is a reused one
  for (int64_t i = 0; i < n; i += 4096) EXPECT_EQ(a.data<float>()[i], 0.0f);
  for (int64_t i = 0; i < n; ++i) a.data<float>()[i] = static_cast<float>(i);
  { Literal dead(s); }  // freed into the cache
  Literal b = a;        // copy into a (possibly reused) block
  Literal c = std::move(a);
  EXPECT_TRUE(b.BitwiseEqual(c));
  EXPECT_EQ(b.data<float>()[n - 1], static_cast<float>(n - 1));
  Literal d(s);
  for (int64_t i = 0; i < n; i += 4096) EXPECT_EQ(d.data<float>()[i], 0.0f);
}

}  // namespace
}  // namespace meshsplit
