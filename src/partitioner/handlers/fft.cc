// fft: partitioned along its batch dims (all but the trailing
// fft_length.size() dims, which the transform reaches across). The operand
// is resharded to the result's tiling of the batch dims with the transformed
// dims whole, each partition transforms its own lines, and the result is
// resharded to its sharding. XLA additionally keeps the first transformed
// dim tiled and exchanges data inside a distributed FFT; here that dim is
// gathered instead (one all-gather / all-to-all through Reshard).
#include <string>

#include "partitioner/context.h"

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
  std::vector<int64_t> fft_dims;
  for (int64_t d = shape.rank() - nfft; d < shape.rank(); ++d) fft_dims.push_back(d);
  // The operand has the result's rank, and its batch dims are the result's.
  const Sharding local = ReplicateDims(out, fft_dims);
  PartitionedValue in = ctx.OperandAs(instr, 0, local);
  Instruction* r = ctx.Clone(instr, LocalShape(shape, local), {in.hlo});
  SpmdBuilder::ScopedCause rule(ctx.b, instr, "fft dims whole, batch dims tiled like the result");
  ctx.Set(instr, Reshard(ctx.b, {r, shape, local}, ctx.ShardingOf(instr)));
  return Status::Ok();
}

}  // namespace meshsplit::spmd
