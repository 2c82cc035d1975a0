// The block-scaled dot custom-call (`custom_call_target="__op$block_scaled_dot"`,
// operands lhs, rhs, lhs_scale, rhs_scale): each operand is dequantized by
// its scale tensor, broadcast over blocks, and the two are multiplied with
// the last dim contracting and, for rank 3, dim 0 as the batch dim — the
// expansion XLA's block-scaling rewriter uses (MXFP8: f8e4m3fn values,
// f8e8m0fnu scales, blocks of 32 along the contracting dim). XLA blocks only
// the last dim; here every dim has a block size, operand size / scale size,
// which is 1 where the sizes agree, so the scale may also be coarser along
// another dim.
#include <string>

#include "ir/shape_inference.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

// x converted to `t` times its scale, broadcast over blocks, in `t`.
StatusOr<Literal> Dequantize(const Instruction& instr, const Literal& x, const Literal& scale,
                             PrimitiveType t, const char* what) {
  const Shape& xs = x.shape();
  const Shape& ss = scale.shape();
  if (!xs.IsArray() || !ss.IsArray() || xs.rank() != ss.rank())
    return InstrError(instr, std::string(what) + " scale " + ss.ToString(false) +
                                 " must have the rank of its operand " + xs.ToString(false));
  const int rank = xs.rank();
  std::vector<int64_t> block(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t n = xs.dimensions(d), m = ss.dimensions(d);
    if (m <= 0 ? n != 0 : n % m != 0)
      return InstrError(instr, std::string(what) + " scale " + ss.ToString(false) +
                                   " does not divide its operand " + xs.ToString(false) +
                                   " into blocks along dim " + std::to_string(d));
    block[d] = m > 0 ? n / m : 1;
  }
  // Staged floats (bf16, f16, f8) multiply in f32 and round to `t`, as XLA's
  // multiply in that type does.
  const PrimitiveType ct = t == PrimitiveType::F64 ? PrimitiveType::F64 : PrimitiveType::F32;
  Literal xv = ConvertLiteral(ConvertLiteral(x, t), ct);
  Literal sv = ConvertLiteral(ConvertLiteral(scale, t), ct);
  const std::vector<int64_t> sstrides = RowMajorStrides(ss.dimensions());
  std::vector<int64_t> idx(rank, 0);
  const int64_t n = xv.element_count();
  auto run = [&]<typename T>() {
    T* p = xv.data<T>();
    const T* s = sv.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t si = 0;
      for (int d = 0; d < rank; ++d) si += (idx[d] / block[d]) * sstrides[d];
      p[i] = p[i] * s[si];
      NextIndex(idx, xs.dimensions());
    }
  };
  if (ct == PrimitiveType::F64) run.operator()<double>();
  else run.operator()<float>();
  if (ct == t) return xv;
  return ConvertLiteral(xv, t);
}

}  // namespace

StatusOr<Literal> EvalBlockScaledDot(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (k.ops.size() != 4)
    return InstrError(instr, "block-scaled dot takes lhs, rhs, lhs_scale and rhs_scale");
  const Shape& out = k.shape();
  if (!out.IsArray())
    return InstrError(instr, "block-scaled dot needs a floating-point array result");
  // The shapes are checked before dequantizing, which touches every element.
  std::vector<const Shape*> shapes;
  for (int i = 0; i < 4; ++i) shapes.push_back(&k.op(i).shape());
  StatusOr<Shape> inferred = InferBlockScaledDotShape(shapes, out.element_type());
  if (!inferred.ok()) return InstrError(instr, inferred.status().message());
  if (!inferred->Compatible(out))
    return InstrError(instr, "block-scaled dot result must be " + inferred->ToString(false) +
                                 ", not " + out.ToString(false));
  const int rank = k.op(0).shape().rank();
  const PrimitiveType t = out.element_type();
  MS_ASSIGN_OR_RETURN(Literal lhs, Dequantize(instr, k.op(0), k.op(2), t, "lhs"));
  MS_ASSIGN_OR_RETURN(Literal rhs, Dequantize(instr, k.op(1), k.op(3), t, "rhs"));
  // The dot itself: the dot kernel on a stand-in dot instruction.
  Instruction dot(Opcode::kDot, instr.name(), out);
  dot.set_loc(instr.loc());
  DotDimensionNumbers dn;
  dn.lhs_contracting_dimensions = {rank - 1};
  dn.rhs_contracting_dimensions = {rank - 1};
  if (rank == 3) {
    dn.lhs_batch_dimensions = {0};
    dn.rhs_batch_dimensions = {0};
  }
  dot.mutable_attrs().dot_dnums = dn;
  KernelArgs dk{dot, {&lhs, &rhs}, {true, true}, k.interp};
  return EvalDot(dk);
}

}  // namespace meshsplit::interp
