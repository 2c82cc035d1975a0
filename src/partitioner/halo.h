// Halo exchange: gives each partition a window of a value tiled along one
// dim that reaches into its neighbours' tiles (windowed ops — convolution,
// reduce-window, select-and-scatter, pad/slice with offsets). The window of
// shard i starts at an affine function of i, so strided, padded and dilated
// windows are covered; the data comes from the tiles it overlaps by
// collective-permute (any number of tiles away), or by all-gather when the
// windows span most of the tiles. Positions outside the global value read a
// given pad value, so tile padding never leaks in.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/attributes.h"
#include "ir/instruction.h"
#include "partitioner/reshard.h"
#include "partitioner/spmd_builder.h"

namespace meshsplit::spmd {

// The window along one dim held by shard i (its tile index along that dim):
// global elements [first + step * i, first + step * i + size). `step` is
// usually the tile size (so first < 0 means a left halo of -first elements)
// or a multiple of it (strided outputs).
struct HaloWindow {
  int64_t first = 0;
  int64_t step = 0;
  int64_t size = 0;
};

// For `value` laid out by `value.sharding` (tiled or not along data dim
// `dim`; uneven tiles are padded at the end with arbitrary content), returns
// this partition's window `w` along `dim` of the global value: an
// instruction whose dim `dim` has w.size elements, element j being global
// element first + step * i + j, or `pad` (a scalar of the value's element
// type) where that position is outside [0, global size). Every other dim of
// `value.hlo` is passed through untouched, so it may already have been
// windowed along another dim (apply this once per dim). When `dim` is not
// tiled, i is 0 on every partition and no communication happens.
// REQUIRES: w.size >= 0, value is an array.
Instruction* ExchangeHaloWindow(SpmdBuilder& b, const PartitionedValue& value, int64_t dim,
                                const HaloWindow& w, Instruction* pad);

// The common special case: this partition's tile along `dim` extended by
// `left` elements before it and `right` after it (either may be negative to
// drop elements), out-of-range positions reading `pad`. The result has
// tile_size + left + right elements along `dim`.
Instruction* ExchangeHalo(SpmdBuilder& b, const PartitionedValue& value, int64_t dim,
                          int64_t left, int64_t right, Instruction* pad);

// A windowed op (convolution lhs, reduce-window operand) whose output dim is
// tiled in tiles of `out_tile`: output tile i reads the (dilated, padded)
// input at [i*out_tile*stride - padding_low, + (out_tile-1)*stride + window
// extent). `input` is the window of real input elements that covers, and
// `local` the window attributes that give exactly out_tile outputs from it
// (same size/stride/dilations, padding adjusted; padding_high may be
// negative). nullopt when the local padding would differ between shards
// (base dilation not dividing out_tile*stride), for reversed windows, or
// when a tile reads no input element at all.
struct WindowedDimPlan {
  HaloWindow input;
  WindowDimension local;
};
std::optional<WindowedDimPlan> PlanWindowedDim(const WindowDimension& w, int64_t out_tile);

}  // namespace meshsplit::spmd
