// Kernels of the random-number ops: rng, rng-bit-generator and the
// PartitionInvariantRng / PartitionInvariantRngBitGenerator custom-calls
// they become under SPMD partitioning when tiled (ir/partitioned_rng.h). All are counter-based, so a value
// depends only on the seed, the op and the element's index, never on
// evaluation order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ir/partitioned_rng.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// rng is counter-based: element i (row-major index in the op's GLOBAL
// shape) of the op named X draws from SplitMix64(seed, hash(X), i). So the
// values do not depend on how many other rng ops ran before, and a
// partition that knows where its tile sits in the global shape draws
// exactly the unpartitioned values of that tile. (Every evaluation of X,
// e.g. each loop iteration, draws the same values.)
uint64_t RngWord(uint64_t key, int64_t i, uint64_t stream) {
  return SplitMix64(key ^ SplitMix64(static_cast<uint64_t>(i) * 2 + stream));
}

double RngUnit(uint64_t word) { return static_cast<double>(word >> 11) * 0x1.0p-53; }

// Fills `out` (a tile) with the values of the rng named `name` at the
// elements `offsets` + local index of a value of `global_dims`. Elements of
// the tile past the global shape (padding of an uneven tiling) get the
// lower bound: a valid value that no computation may depend on.
StatusOr<Literal> Draw(const Instruction& instr, const std::string& name, const std::string& dist,
                       const Literal& a_lit, const Literal& b_lit, const Shape& shape,
                       const std::vector<int64_t>& global_dims,
                       const std::vector<int64_t>& offsets, uint64_t seed) {
  const PrimitiveType t = shape.element_type();
  if (a_lit.element_count() != 1 || b_lit.element_count() != 1)
    return InstrError(instr, "rng bounds must be scalars");
  const double a = a_lit.GetDouble(0), b = b_lit.GetDouble(0);
  const bool normal = dist == "rng_normal";
  if (!normal && dist != "rng_uniform" && !dist.empty())
    return InstrError(instr, "unknown rng distribution '" + dist + "'");
  if (normal && !IsFloatingPoint(t)) return InstrError(instr, "rng_normal needs a floating-point type");
  if (!normal && !IsFloatingPoint(t) && !IsInteger(t) && t != PrimitiveType::PRED)
    return InstrError(instr, "rng does not support this element type");
  int64_t lo = 0, hi = 0;
  if (!normal && IsFloatingPoint(t) && !(a < b)) return InstrError(instr, "rng_uniform needs a < b");
  if (!normal && IsInteger(t)) {
    lo = a_lit.GetInt(0);
    hi = b_lit.GetInt(0);
    if (!(lo < hi)) return InstrError(instr, "rng_uniform needs a < b");
  }
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);

  Literal out(shape);
  const std::vector<int64_t>& dims = shape.dimensions();
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> gstride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) gstride[d] = gstride[d + 1] * global_dims[d + 1];
  const uint64_t key = SplitMix64(seed) ^ std::hash<std::string>()(name);
  std::vector<int64_t> idx(rank, 0);
  const int64_t n = out.element_count();
  for (int64_t j = 0; j < n; ++j) {
    int64_t g = 0;
    bool inside = true;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t gd = offsets[d] + idx[d];
      inside &= gd < global_dims[d];
      g += gd * gstride[d];
    }
    if (!inside) {
      if (t == PrimitiveType::PRED) out.data<uint8_t>()[j] = 0;
      else if (IsInteger(t)) out.SetInt(j, lo);
      else out.SetDouble(j, a);
    } else if (normal) {
      // Box-Muller on two independent words.
      double u1 = 1.0 - RngUnit(RngWord(key, g, 0)), u2 = RngUnit(RngWord(key, g, 1));
      out.SetDouble(j, a + b * std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2));
    } else if (IsFloatingPoint(t)) {
      out.SetDouble(j, a + (b - a) * RngUnit(RngWord(key, g, 0)));
      // Rounding to a narrow type can land on b; keep the interval open.
      if (out.GetDouble(j) >= b) out.SetDouble(j, a);
    } else if (IsInteger(t)) {
      out.SetInt(j, static_cast<int64_t>(static_cast<uint64_t>(lo) + RngWord(key, g, 0) % span));
    } else {
      out.data<uint8_t>()[j] = RngWord(key, g, 0) & 1;
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// The tile offsets of a partition-invariant rng: operands first ..
// first+rank-1, each a non-negative integer scalar.
StatusOr<std::vector<int64_t>> TileOffsets(KernelArgs& k, int first, int64_t rank) {
  std::vector<int64_t> offsets(rank);
  for (int64_t d = 0; d < rank; ++d) {
    const Literal& o = k.op(first + static_cast<int>(d));
    if (o.element_count() != 1 || !IsInteger(o.element_type()) || o.GetInt(0) < 0)
      return InstrError(k.instr, "offset operand " + std::to_string(first + d) +
                                     " must be a non-negative integer scalar");
    offsets[d] = o.GetInt(0);
  }
  return offsets;
}

}  // namespace

StatusOr<Literal> EvalRng(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const std::vector<int64_t>& dims = instr.shape().dimensions();
  return Draw(instr, instr.name(), instr.attrs().rng_distribution, k.op(0), k.op(1), instr.shape(),
              dims, std::vector<int64_t>(dims.size(), 0), k.interp.ctx().rng_seed);
}

StatusOr<Literal> EvalPartitionInvariantRng(KernelArgs& k) {
  const Instruction& instr = k.instr;
  StatusOr<PartitionInvariantRng> record = ReadPartitionInvariantRng(instr);
  if (!record.ok()) return InstrError(instr, record.status().message());
  const Shape& shape = instr.shape();
  const int64_t rank = shape.IsArray() ? shape.rank() : -1;
  if (rank < 0 || static_cast<int64_t>(record->global_dims.size()) != rank ||
      static_cast<int64_t>(k.ops.size()) != 2 + rank)
    return InstrError(instr, std::string(kPartitionInvariantRngTarget) +
                                 " takes the two rng parameters and one offset per dim of its "
                                 "array result, with global dims of the same rank");
  StatusOr<std::vector<int64_t>> offsets = TileOffsets(k, /*first=*/2, rank);
  if (!offsets.ok()) return offsets.status();
  return Draw(instr, record->name, record->distribution, k.op(0), k.op(1), shape,
              record->global_dims, *offsets, k.interp.ctx().rng_seed);
}

namespace {

// rng-bit-generator is a counter-based generator too: word w of the bits'
// byte buffer is SplitMix64(key ^ SplitMix64(counter + w)), with key and
// counter read from the state. Deterministic for a given state, but not
// XLA's Philox/ThreeFry bit stream.
uint64_t BitsWord(uint64_t key, uint64_t counter, int64_t w) {
  return SplitMix64(key ^ SplitMix64(counter + static_cast<uint64_t>(w)));
}

// The (new state, bits) of a generator with `state` whose bits have
// `global_dims`, of which this tile (shape `tile`) starts at `offsets`.
// Elements past the global shape (padding) are zero.
StatusOr<Literal> DrawBits(const Instruction& instr, const Literal& state, const Shape& tile,
                           const std::vector<int64_t>& global_dims,
                           const std::vector<int64_t>& offsets) {
  if (state.element_type() != PrimitiveType::U64 || state.element_count() < 1)
    return InstrError(instr, "rng-bit-generator takes a u64 state and returns (state, bits)");
  const uint64_t key = state.data<uint64_t>()[0];
  const uint64_t counter = state.element_count() > 1 ? state.data<uint64_t>()[1] : 0;
  Literal bits(tile);
  const int64_t n = bits.element_count();
  const int64_t rank = static_cast<int64_t>(global_dims.size());
  const std::vector<int64_t>& dims = tile.dimensions();
  bool whole = true;
  for (int64_t d = 0; d < rank; ++d) whole &= offsets[d] == 0 && dims[d] == global_dims[d];
  int64_t global_count = 1;
  for (int64_t d : global_dims) global_count *= d;
  const int64_t size = n > 0 ? bits.size_bytes() / n : 0;
  // A tile needs whole-byte elements (the whole value is just bytes).
  if (!whole && n > 0 && (size * n != bits.size_bytes() || size == 0 || 8 % size != 0))
    return InstrError(instr, "a tile of rng-bit-generator bits needs whole-byte elements");
  const int64_t global_bytes = whole ? bits.size_bytes() : global_count * size;
  const int64_t words = (global_bytes + 7) / 8;
  if (whole) {
    for (int64_t w = 0; w < words; ++w) {
      uint64_t v = BitsWord(key, counter, w);
      std::memcpy(bits.raw() + w * 8, &v, std::min<int64_t>(8, global_bytes - w * 8));
    }
  } else {
    // Element by element: an element never straddles two words, since its
    // size divides 8.
    std::vector<int64_t> gstride(rank, 1), idx(rank, 0);
    for (int64_t d = rank - 2; d >= 0; --d) gstride[d] = gstride[d + 1] * global_dims[d + 1];
    for (int64_t j = 0; j < n; ++j) {
      int64_t g = 0;
      bool inside = true;
      for (int64_t d = 0; d < rank; ++d) {
        inside &= offsets[d] + idx[d] < global_dims[d];
        g += (offsets[d] + idx[d]) * gstride[d];
      }
      if (inside) {
        const uint64_t v = BitsWord(key, counter, g * size / 8);
        std::memcpy(bits.raw() + j * size, reinterpret_cast<const uint8_t*>(&v) + g * size % 8,
                    size);
      }
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < dims[d]) break;
        idx[d] = 0;
      }
    }
  }
  if (bits.element_type() == PrimitiveType::PRED)
    for (int64_t i = 0; i < n; ++i) bits.data<uint8_t>()[i] &= 1;
  Literal new_state = state;
  if (new_state.element_count() > 1) new_state.data<uint64_t>()[1] = counter + words;
  else new_state.data<uint64_t>()[0] = SplitMix64(key + words);
  std::vector<Literal> outs;
  outs.push_back(std::move(new_state));
  outs.push_back(std::move(bits));
  return Literal::MakeTuple(std::move(outs));
}

}  // namespace

StatusOr<Literal> EvalRngBitGenerator(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (!instr.shape().IsTuple() || instr.shape().tuple_size() != 2)
    return InstrError(instr, "rng-bit-generator takes a u64 state and returns (state, bits)");
  const Shape& bits = instr.shape().tuple_shapes(1);
  return DrawBits(instr, k.op(0), bits, bits.dimensions(),
                  std::vector<int64_t>(bits.dimensions().size(), 0));
}

StatusOr<Literal> EvalPartitionInvariantRngBitGenerator(KernelArgs& k) {
  const Instruction& instr = k.instr;
  StatusOr<PartitionInvariantRng> record = ReadPartitionInvariantRng(instr);
  if (!record.ok()) return InstrError(instr, record.status().message());
  const Shape& shape = instr.shape();
  if (!shape.IsTuple() || shape.tuple_size() != 2 || !shape.tuple_shapes(1).IsArray())
    return InstrError(instr, std::string(kPartitionInvariantRngBitGeneratorTarget) +
                                 " returns (state, bits)");
  const Shape& bits = shape.tuple_shapes(1);
  const int64_t rank = bits.rank();
  if (static_cast<int64_t>(record->global_dims.size()) != rank ||
      static_cast<int64_t>(k.ops.size()) != 1 + rank)
    return InstrError(instr, std::string(kPartitionInvariantRngBitGeneratorTarget) +
                                 " takes the state and one offset per dim of its bits, with "
                                 "global dims of the same rank");
  StatusOr<std::vector<int64_t>> offsets = TileOffsets(k, /*first=*/1, rank);
  if (!offsets.ok()) return offsets.status();
  return DrawBits(instr, k.op(0), bits, record->global_dims, *offsets);
}

}  // namespace meshsplit::interp
