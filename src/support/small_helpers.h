// Helpers the dimension and axis code everywhere needs: membership in a
// short unordered list (dimension numbers, mesh axes: a handful of entries,
// where a linear search beats any set) and integer division rounded up
// (tile sizes of uneven shards) or down (window offsets, which go negative).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace meshsplit {

template <typename T, typename U>
bool Contains(const std::vector<T>& v, const U& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// a / b rounded up, for a >= 0 and b > 0.
inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// a / b rounded toward minus infinity, for any a and b > 0.
inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace meshsplit
