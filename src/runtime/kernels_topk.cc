// XLA's "TopK" custom-call with a general comparator: per row of the last
// dim, the first k elements (and their indices) of a stable sort of the row
// by the comparator. The comparator takes (a, b) values, or (a, b, ia, ib)
// values and s32 indices (the form XLA's TopK rewriter leaves when it came
// from a sort of (values, iota)). It runs compiled (fast_scalar.h) when it
// is plain scalar arithmetic, else through the interpreter. The plain GT/LT
// and comparator-less forms take the faster path in kernels_control.cc.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "runtime/fast_scalar.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {

StatusOr<Literal> EvalTopKWithComparator(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const Computation* cmp = instr.to_apply();
  if (cmp == nullptr) return InstrError(instr, "TopK has no comparator");
  if (k.ops.size() != 1 || !instr.shape().IsTuple() || instr.shape().tuple_size() != 2)
    return InstrError(instr, "TopK takes one operand and returns (values, indices)");
  const Literal& in = k.op(0);
  const PrimitiveType t = in.element_type();
  const Shape& vs = instr.shape().tuple_shapes(0);
  const Shape& is = instr.shape().tuple_shapes(1);
  if (!in.shape().IsArray() || in.shape().rank() < 1 || vs.rank() != in.shape().rank() ||
      vs.element_type() != t || is.dimensions() != vs.dimensions() ||
      is.element_type() != PrimitiveType::S32)
    return InstrError(instr, "TopK result shapes do not match the operand");
  for (int64_t d = 0; d + 1 < vs.rank(); ++d)
    if (vs.dimensions(d) != in.shape().dimensions(d))
      return InstrError(instr, "TopK result shapes do not match the operand");
  const int params = cmp->parameter_count();
  if (params != 2 && params != 4)
    return InstrError(instr, "TopK comparator must take 2 (values) or 4 (values, indices) "
                             "parameters, it takes " + std::to_string(params));
  const int64_t n = in.shape().dimensions().back(), top = vs.dimensions().back();
  if (top > n) return InstrError(instr, "TopK takes more elements than the operand has");
  const int64_t rows = n == 0 ? 0 : in.element_count() / n;

  std::optional<ScalarProgram> program;
  if (ScalarProgramsEnabled()) {
    program = ScalarProgram::Compile(*cmp);
    bool fits = program && program->param_count() == params &&
                program->root_type() == PrimitiveType::PRED && program->param_type(0) == t &&
                program->param_type(1) == t;
    if (fits && params == 4)
      fits = program->param_type(2) == PrimitiveType::S32 &&
             program->param_type(3) == PrimitiveType::S32;
    if (!fits) program.reset();
  }
  const int64_t width = ByteWidth(t);
  Status error;
  // less(a, b) for positions a, b of row r; errors are kept in `error` and
  // make every later comparison false, so the sort ends quickly.
  auto less = [&](int64_t r, int64_t a, int64_t b) -> bool {
    if (!error.ok()) return false;
    int32_t ia = static_cast<int32_t>(a), ib = static_cast<int32_t>(b);
    if (program) {
      const void* args[4] = {in.raw() + (r * n + a) * width, in.raw() + (r * n + b) * width,
                             &ia, &ib};
      return (program->Run(args) & 0xff) != 0;
    }
    Literal x = ElementAsScalar(in, r * n + a), y = ElementAsScalar(in, r * n + b);
    Literal xi = Literal::ScalarS32(ia), yi = Literal::ScalarS32(ib);
    std::vector<const Literal*> args{&x, &y};
    if (params == 4) {
      args.push_back(&xi);
      args.push_back(&yi);
    }
    StatusOr<Literal> res = k.interp.Call(*cmp, args);
    if (!res.ok()) {
      error = res.status();
      return false;
    }
    if (!res->shape().IsArray() || res->element_type() != PrimitiveType::PRED ||
        res->element_count() != 1) {
      error = InstrError(instr, "TopK comparator must return pred[]");
      return false;
    }
    return res->data<uint8_t>()[0] != 0;
  };

  Shape vshape = vs, ishape = is;
  vshape.clear_layout();
  ishape.clear_layout();
  Literal values(vshape), indices(ishape);
  std::vector<int64_t> order(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    // Ties (neither a < b nor b < a) keep index order, which makes the
    // partial sort agree with the first k of a stable sort.
    std::partial_sort(order.begin(), order.begin() + top, order.end(),
                      [&](int64_t a, int64_t b) {
                        if (less(r, a, b)) return true;
                        if (less(r, b, a)) return false;
                        return a < b;
                      });
    MS_RETURN_IF_ERROR(error);
    for (int64_t j = 0; j < top; ++j) {
      std::memcpy(values.raw() + (r * top + j) * width, in.raw() + (r * n + order[j]) * width,
                  width);
      indices.data<int32_t>()[r * top + j] = static_cast<int32_t>(order[j]);
    }
  }
  std::vector<Literal> outs;
  outs.push_back(std::move(values));
  outs.push_back(std::move(indices));
  return Literal::MakeTuple(std::move(outs));
}

}  // namespace meshsplit::interp
