// Non-temporal copies for large kernel outputs (see streaming.h).
#include "runtime/streaming.h"

#include <emmintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace meshsplit::interp {

// Half the last-level cache, but at most 32 MiB: a virtual machine reports
// the whole socket's L3 (480 MiB on this development box), of which its few
// cores get a small share; a 64 MiB output written through the cache there
// ran at half the rate of streamed stores (regular stores read each line
// first).
int64_t StreamingBytes() {
  static const int64_t bytes = [] {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 <= 0) l3 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    const int64_t half = static_cast<int64_t>(l3 > 0 ? l3 : int64_t{32} << 20) / 2;
    return std::min<int64_t>(half, int64_t{32} << 20);
  }();
  return bytes;
}

void StreamCopy(uint8_t* dst, const uint8_t* src, int64_t bytes) {
  const int64_t head = std::min<int64_t>(bytes, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  if (head > 0) std::memcpy(dst, src, head);
  int64_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  if (i < bytes) std::memcpy(dst + i, src + i, bytes - i);
}

void StreamingFence() { _mm_sfence(); }

}  // namespace meshsplit::interp
