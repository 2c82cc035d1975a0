// fft: partitioned along its batch dims (all but the trailing
// fft_length.size() dims, which the transform reaches across). The operand
// is resharded to the result's tiling of the batch dims with the transformed
// dims whole, each partition transforms its own lines, and the result is
// resharded to its sharding. A one-dimensional complex FFT / IFFT whose
// result tiles the transformed dim k ways (N = k * M) stays distributed
// instead, as XLA keeps it: a two-stage (Cooley-Tukey)
// transform with three all-to-alls and no gather (DistributedFft below).
#include <cmath>
#include <string>

#include "partitioner/context.h"
#include "partitioner/halo.h"

namespace meshsplit::spmd {
namespace {

// Number of transformed dims: the entries of fft_length, or -1 when the
// attribute is missing or malformed.
int FftDims(const Instruction& instr) {
  const std::string* len = instr.attrs().FindExtra("fft_length");
  if (len == nullptr) return -1;
  int n = 0;
  bool in_number = false;
  for (char c : *len) {
    if (c >= '0' && c <= '9') {
      if (!in_number) ++n;
      in_number = true;
    } else {
      in_number = false;
    }
  }
  return n;
}

// The local fft of `x` along its last dim, of length `n`, with `instr`'s
// fft_type.
Instruction* LocalFft(SpmdBuilder& b, const Instruction& instr, Instruction* x, int64_t n) {
  Instruction* f = b.Add(Opcode::kFft, x->shape(), {x});
  f->mutable_attrs().extra = instr.attrs().extra;
  for (auto& kv : f->mutable_attrs().extra)
    if (kv.first == "fft_length") kv.second = "{" + std::to_string(n) + "}";
  return f;
}

// `x` with its last two dims swapped.
Instruction* SwapLastTwo(SpmdBuilder& b, Instruction* x) {
  std::vector<int64_t> perm(x->shape().rank());
  for (size_t d = 0; d < perm.size(); ++d) perm[d] = d;
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return b.Transpose(x, perm);
}

// The sharding of a value of rank r + 1 that tiles dim r - 1 (`first`) or
// dim r (!`first`) the way `out` (rank r) tiles its last dim, and its other
// dims as `out` does.
Sharding SplitLastDim(const Sharding& out, bool first) {
  const TileAssignment& ta = out.tile_assignment();
  const int64_t r = out.TiledDataRank();
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < ta.num_dimensions(); ++d) {
    dims.push_back(ta.dim(d));
    if (d == r - 1) dims.push_back(1);
  }
  TileAssignment split = ta.Reshape(dims);
  if (!first) {
    std::vector<int64_t> perm(dims.size());
    for (size_t d = 0; d < perm.size(); ++d) perm[d] = d;
    std::swap(perm[r - 1], perm[r]);
    split = split.Transpose(perm);
  }
  return Sharding::Subgroup(split, out.subgroup_types());
}

// A one-dimensional FFT / IFFT over the last dim, N = k * M long, tiled k
// ways in `out` (partition p holds n in [p*M, (p+1)*M)). With n = n1*M + n2
// and the result index j = j1 + k*j2:
//   X[j1 + k*j2] = sum_n2 W_M^(n2*j2) * W_N^(n2*j1) * sum_n1 x[n1*M + n2] W_k^(n1*j1)
// (W_L = exp(-+2*pi*i/L)). As a [k, M] array: an all-to-all tiles n2, a
// local length-k transform over n1 and the twiddle W_N^(n2*j1), an
// all-to-all back tiles j1, a local length-M transform over n2; the result
// [j1, j2] is transposed to [j2, j1] and an all-to-all tiles j2, which is
// the contiguous tiling of j (when M is not a multiple of k, a halo
// exchange then shifts the longer runs into the result's tiles). IFFT's 1/N is the product of the two local
// transforms' 1/k and 1/M.
Status DistributedFft(SpmdContext& ctx, const Instruction& instr, const Sharding& out) {
  SpmdBuilder& b = ctx.b;
  SpmdBuilder::ScopedCause rule(b, instr, "fft: transformed dim stays tiled (two-stage FFT)");
  const Shape& shape = instr.shape();
  const int64_t r = shape.rank();
  const int64_t k = out.TileDim(r - 1), n = shape.dimensions(r - 1), m = n / k;
  const bool forward = *instr.attrs().FindExtra("fft_type") == "FFT";
  const PrimitiveType ct = shape.element_type();
  const PrimitiveType rt = ct == PrimitiveType::C64 ? PrimitiveType::F32 : PrimitiveType::F64;

  std::vector<int64_t> split_dims = shape.dimensions();  // [B..., k, M]
  split_dims.back() = k;
  split_dims.push_back(m);
  const Shape split(ct, split_dims);
  const Sharding tile_n1 = SplitLastDim(out, /*first=*/true);
  const Sharding tile_n2 = SplitLastDim(out, /*first=*/false);

  Instruction* x = ctx.OperandAs(instr, 0, out).hlo;
  std::vector<int64_t> local = x->shape().dimensions();
  local.back() = 1;
  local.push_back(m);
  x = b.Reshape(x, local);
  x = Reshard(b, {x, split, tile_n1}, tile_n2).hlo;  // [b..., k, M/k]

  // Stage 1: length-k transforms over n1, then the twiddles.
  x = SwapLastTwo(b, LocalFft(b, instr, SwapLastTwo(b, x), k));
  const std::vector<int64_t> tw_dims = {k, x->shape().dimensions(r)};  // local n2 tile
  Instruction* j1 = b.Iota(PrimitiveType::S32, tw_dims, 0);
  Instruction* n2 = b.Binary(Opcode::kAdd, b.Iota(PrimitiveType::S32, tw_dims, 1),
                             b.BroadcastScalar(TileOffset(b, tile_n2, split_dims, r), tw_dims));
  // j1 * n2 < k * M = N: no reduction modulo N needed before the angle.
  Instruction* angle = b.Binary(
      Opcode::kMultiply, b.Convert(b.Binary(Opcode::kMultiply, j1, n2), PrimitiveType::F64),
      b.BroadcastScalar(b.ScalarConstant(PrimitiveType::F64,
                                         (forward ? -2.0 : 2.0) * M_PI / static_cast<double>(n)),
                        tw_dims));
  Instruction* re = b.Convert(b.Add(Opcode::kCos, angle->shape(), {angle}), rt);
  Instruction* im = b.Convert(b.Add(Opcode::kSin, angle->shape(), {angle}), rt);
  Instruction* tw = b.Add(Opcode::kComplex, Shape(ct, tw_dims), {re, im});
  std::vector<int64_t> last_two = {r - 1, r};
  tw = b.Broadcast(tw, x->shape().dimensions(), last_two);
  x = b.Binary(Opcode::kMultiply, x, tw);

  // Stage 2: length-M transforms over n2.
  x = Reshard(b, {x, split, tile_n2}, tile_n1).hlo;  // [b..., 1, M]
  x = LocalFft(b, instr, x, m);
  // [j1, j2] -> [j2, j1]; tiling j2 makes j = j2*k + j1 contiguous.
  std::vector<int64_t> swapped_dims = split_dims;
  std::swap(swapped_dims[r - 1], swapped_dims[r]);
  x = SwapLastTwo(b, x);
  x = Reshard(b, {x, Shape(ct, swapped_dims), tile_n2}, tile_n1).hlo;  // [b..., ceil(M/k), k]
  // Local rows of j2 and all j1: a contiguous run of j, ceil(M/k) * k long.
  const int64_t run = x->shape().dimensions(r - 1) * k;
  std::vector<int64_t> result = x->shape().dimensions();
  result.pop_back();
  result.back() = run;
  x = b.Reshape(x, result);
  if (run != m) {
    // M not a multiple of k: the runs are longer than the result's tiles;
    // shift each partition's tile into place by halo exchange.
    std::vector<int64_t> runs = shape.dimensions();
    runs.back() = k * run;
    x = ExchangeHaloWindow(b, {x, Shape(ct, runs), out}, r - 1, {0, m, m}, b.Zero(ct));
  }
  // The value takes the instruction's name (verify matches values by name).
  if (ctx.shared().named.insert(&instr).second) x->set_name(instr.name());
  ctx.Set(instr, Reshard(b, {x, shape, out}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace

Status HandleFft(SpmdContext& ctx, const Instruction& instr) {
  const Sharding out = NormalizeForPartitioning(ctx.ShardingOf(instr));
  const int nfft = FftDims(instr);
  const Shape& shape = instr.shape();
  if (nfft <= 0 || !shape.IsArray() || shape.rank() < nfft)
    return ctx.Fallback(instr, "fft without a usable fft_length");
  if (out.IsReplicated()) {
    PartitionedValue in = ctx.OperandAs(instr, 0, out);
    ctx.Set(instr, {ctx.Clone(instr, shape, {in.hlo}), shape, out});
    return Status::Ok();
  }
  if (!out.IsTiled() || out.HasManualSubgroup() || HasUnreduced(out))
    return ctx.Fallback(instr, "result sharding");
  const std::string* type = instr.attrs().FindExtra("fft_type");
  const int64_t last = shape.rank() - 1;
  if (nfft == 1 && type != nullptr && (*type == "FFT" || *type == "IFFT") &&
      (shape.element_type() == PrimitiveType::C64 || shape.element_type() == PrimitiveType::C128) &&
      instr.operand(0)->shape().dimensions() == shape.dimensions() && out.TileDim(last) > 1) {
    const int64_t k = out.TileDim(last);
    if (shape.dimensions(last) % k == 0) return DistributedFft(ctx, instr, out);
  }
  std::vector<int64_t> fft_dims;
  for (int64_t d = shape.rank() - nfft; d < shape.rank(); ++d) fft_dims.push_back(d);
  // The operand has the result's rank, and its batch dims are the result's.
  const Sharding local = PartiallyReplicateTiledShardingOnDims(out, fft_dims);
  PartitionedValue in = ctx.OperandAs(instr, 0, local);
  Instruction* r = ctx.Clone(instr, LocalShape(shape, local), {in.hlo});
  SpmdBuilder::ScopedCause rule(ctx.b, instr, "fft dims whole, batch dims tiled like the result");
  ctx.Set(instr, Reshard(ctx.b, {r, shape, local}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
