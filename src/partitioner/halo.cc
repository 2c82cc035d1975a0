// Halo exchange (see halo.h). Each window is assembled from whole or sliced
// tiles: one collective-permute per tile distance k (shard i receives from
// shard i + k), the pieces concatenated in order, the window cut out with a
// slice whose start is affine in the shard index, and positions outside the
// global value replaced by the pad value.
#include "partitioner/halo.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "support/check.h"
#include "support/small_helpers.h"

namespace meshsplit::spmd {
namespace {

Instruction* PadDim(SpmdBuilder& b, Instruction* x, int64_t dim, int64_t low, int64_t high,
                    Instruction* pad) {
  if (low == 0 && high == 0) return x;
  std::vector<int64_t> dims = x->shape().dimensions();
  dims[dim] += low + high;
  Instruction* p = b.Add(Opcode::kPad, Shape(x->shape().element_type(), dims), {x, pad});
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d)
    p->mutable_attrs().padding.push_back({d == dim ? low : 0, d == dim ? high : 0, 0});
  return p;
}

Instruction* SliceDim(SpmdBuilder& b, Instruction* x, int64_t dim, int64_t start,
                      int64_t limit) {
  std::vector<int64_t> starts(x->shape().rank(), 0);
  std::vector<int64_t> limits = x->shape().dimensions();
  starts[dim] = start;
  limits[dim] = limit;
  return b.Slice(x, starts, limits);
}

// x[.., c0 + c1 * index : + size, ..] along `dim` (static when c1 == 0).
Instruction* AffineSlice(SpmdBuilder& b, Instruction* x, int64_t dim, int64_t c0, int64_t c1,
                         Instruction* index, int64_t size) {
  if (c1 == 0 || index == nullptr) return SliceDim(b, x, dim, c0, c0 + size);
  Instruction* start = b.Binary(Opcode::kMultiply, index, b.ScalarS32(c1));
  if (c0 != 0) start = b.Binary(Opcode::kAdd, start, b.ScalarS32(c0));
  std::vector<Instruction*> starts;
  Instruction* zero = b.ScalarS32(0);
  for (int64_t d = 0; d < x->shape().rank(); ++d) starts.push_back(d == dim ? start : zero);
  std::vector<int64_t> sizes = x->shape().dimensions();
  sizes[dim] = size;
  return b.DynamicSlice(x, starts, sizes);
}

// Replaces positions p = first + step * index + j (j along `dim`) outside
// [0, n) by `pad`.
Instruction* MaskOutside(SpmdBuilder& b, Instruction* x, int64_t dim, int64_t first,
                         int64_t step, Instruction* index, int64_t n, Instruction* pad) {
  const std::vector<int64_t>& dims = x->shape().dimensions();
  Instruction* pos = b.Iota(PrimitiveType::S32, dims, dim);
  Instruction* start = b.ScalarS32(first);
  if (step != 0 && index != nullptr)
    start = b.Binary(Opcode::kAdd, b.Binary(Opcode::kMultiply, index, b.ScalarS32(step)),
                     start);
  pos = b.Binary(Opcode::kAdd, pos, b.BroadcastScalar(start, dims));
  Instruction* ge0 = b.Compare(pos, b.BroadcastScalar(b.ScalarS32(0), dims),
                               ComparisonDirection::kGe);
  Instruction* ltn = b.Compare(pos, b.BroadcastScalar(b.ScalarS32(n), dims),
                               ComparisonDirection::kLt);
  Instruction* valid = b.Binary(Opcode::kAnd, ge0, ltn);
  return b.Select(valid, x, b.BroadcastScalar(pad, dims));
}

}  // namespace

Instruction* ExchangeHaloWindow(SpmdBuilder& b, const PartitionedValue& value, int64_t dim,
                                const HaloWindow& w, Instruction* pad) {
  MS_CHECK(w.size >= 0);
  const int64_t n = value.shape.dimensions(dim);
  const Sharding& s = value.sharding;
  const int64_t m = s.IsTiled() ? s.TileDim(dim) : 1;
  Instruction* x = value.hlo;
  if (m == 1) {
    // Whole along `dim`: pad so the window lies inside, then slice.
    const int64_t low = std::max<int64_t>(0, -w.first);
    const int64_t high = std::max<int64_t>(0, w.first + w.size - n);
    x = PadDim(b, x, dim, low, high, pad);
    return SliceDim(b, x, dim, w.first + low, w.first + low + w.size);
  }
  const int64_t tile = CeilDiv(n, m);
  const int64_t real_tiles = CeilDiv(n, tile);  // tiles holding any data
  // Tile distances each shard's window reaches, and the parts of the first
  // and last tiles any window needs.
  int64_t kmin = std::numeric_limits<int64_t>::max();
  int64_t kmax = std::numeric_limits<int64_t>::min();
  bool out_of_range = false;
  std::vector<int64_t> k_first(m), k_last(m);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t start = w.first + w.step * i, end = start + w.size;
    k_first[i] = FloorDiv(start, tile) - i;
    k_last[i] = FloorDiv(std::max(end, start + 1) - 1, tile) - i;
    kmin = std::min(kmin, k_first[i]);
    kmax = std::max(kmax, k_last[i]);
    out_of_range |= start < 0 || end > n;
  }
  Instruction* index = b.TileIndices(s.tile_assignment())[dim];
  const DeviceGroups groups = s.GroupsAlongDims({dim});
  int64_t lo_first = tile, hi_last = 0;
  for (int64_t i = 0; i < m; ++i) {
    const int64_t start = w.first + w.step * i, end = start + w.size;
    if (k_first[i] == kmin) lo_first = std::min(lo_first, start - (i + kmin) * tile);
    if (k_last[i] == kmax) hi_last = std::max(hi_last, end - (i + kmax) * tile);
  }
  const int64_t buffer_size = (kmax - kmin) * tile + hi_last - lo_first;
  if (buffer_size >= m * tile) {
    // The windows span every tile: all-gather is no more data and one
    // collective. The gathered buffer starts at global 0.
    // Window starts are relative to global 0; pad both ends so that every
    // window lies inside the gathered buffer.
    Instruction* buffer = b.AllGather(x, dim, groups);
    int64_t low = 0, high = 0;
    for (int64_t i = 0; i < m; ++i) {
      const int64_t start = w.first + w.step * i;
      low = std::max(low, -start);
      high = std::max(high, start + w.size - m * tile);
    }
    buffer = PadDim(b, buffer, dim, low, high, pad);
    Instruction* r = AffineSlice(b, buffer, dim, w.first + low, w.step, index, w.size);
    if (out_of_range) r = MaskOutside(b, r, dim, w.first, w.step, index, n, pad);
    return r;
  }
  const std::vector<std::vector<int64_t>> rows = groups.Expand();
  std::vector<Instruction*> pieces;
  for (int64_t k = kmin; k <= kmax; ++k) {
    const int64_t lo = k == kmin ? lo_first : 0;
    const int64_t hi = k == kmax ? hi_last : tile;
    Instruction* piece = SliceDim(b, x, dim, lo, hi);
    if (k != 0) {
      std::vector<std::pair<int64_t, int64_t>> pairs;
      for (const std::vector<int64_t>& row : rows)
        for (int64_t i = 0; i < m; ++i) {
          const int64_t t = i + k;
          if (t < 0 || t >= real_tiles || k < k_first[i] || k > k_last[i]) continue;
          pairs.push_back({row[t], row[i]});
        }
      if (pairs.empty()) {
        // No shard needs real data at this distance: the positions are all
        // outside the value and get masked.
        piece = b.BroadcastScalar(pad, piece->shape().dimensions());
        out_of_range = true;
      } else {
        piece = b.CollectivePermute(piece, std::move(pairs));
      }
    }
    pieces.push_back(piece);
  }
  Instruction* buffer = nullptr;
  if (pieces.size() == 1) {
    buffer = pieces[0];
  } else {
    std::vector<int64_t> dims = pieces[0]->shape().dimensions();
    dims[dim] = 0;
    for (Instruction* p : pieces) dims[dim] += p->shape().dimensions(dim);
    buffer = b.Add(Opcode::kConcatenate, Shape(x->shape().element_type(), dims), pieces);
    buffer->mutable_attrs().dimensions = {dim};
  }
  // Buffer element 0 is global (i + kmin) * tile + lo_first on shard i.
  Instruction* r = AffineSlice(b, buffer, dim, w.first - kmin * tile - lo_first,
                               w.step - tile, index, w.size);
  // The padding of an uneven last tile, tiles past the data and shards with
  // no permute source all sit outside [0, n).
  if (out_of_range)
    r = MaskOutside(b, r, dim, w.first, w.step, index, n, pad);
  return r;
}

std::optional<WindowedDimPlan> PlanWindowedDim(const WindowDimension& w, int64_t out_tile) {
  if (w.window_reversal || w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 ||
      w.size < 1 || out_tile < 1)
    return std::nullopt;
  const int64_t bd = w.base_dilation;
  const int64_t extent = (w.size - 1) * w.window_dilation + 1;
  const int64_t span = (out_tile - 1) * w.stride + extent;  // dilated positions read
  // The first input element of a tile's range must move by a whole number
  // of elements per tile, so that the local padding is the same everywhere.
  if ((out_tile * w.stride) % bd != 0) return std::nullopt;
  const int64_t first = -FloorDiv(w.padding_low, bd);  // ceil(-padding_low / bd)
  const int64_t last = FloorDiv(span - 1 - w.padding_low, bd);
  const int64_t size = last - first + 1;
  if (size <= 0) return std::nullopt;
  WindowedDimPlan p;
  p.input = HaloWindow{first, out_tile * w.stride / bd, size};
  p.local = w;
  p.local.padding_low = first * bd + w.padding_low;
  p.local.padding_high = span - p.local.padding_low - ((size - 1) * bd + 1);
  return p;
}

Instruction* ExchangeHalo(SpmdBuilder& b, const PartitionedValue& value, int64_t dim,
                          int64_t left, int64_t right, Instruction* pad) {
  const Sharding& s = value.sharding;
  const int64_t m = s.IsTiled() ? s.TileDim(dim) : 1;
  const int64_t tile = CeilDiv(value.shape.dimensions(dim), m);
  return ExchangeHaloWindow(b, value, dim, HaloWindow{-left, tile, tile + left + right}, pad);
}

}  // namespace meshsplit::spmd
