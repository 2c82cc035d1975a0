// Complex (c64, c128) kernels: elementwise arithmetic, compare, real / imag /
// complex, converts to and from complex, and dot. c64 computes in
// std::complex<float> and c128 in std::complex<double>, as XLA's CPU backend
// does; data movement of complex values needs nothing here (it copies bytes).
#include <cmath>
#include <complex>
#include <cstring>

#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

bool IsComplexElementwise(Opcode op) {
  switch (op) {
    case Opcode::kAbs: case Opcode::kNegate: case Opcode::kExp: case Opcode::kExpm1:
    case Opcode::kLog: case Opcode::kLog1p: case Opcode::kSqrt: case Opcode::kRsqrt:
    case Opcode::kCbrt: case Opcode::kSin: case Opcode::kCos: case Opcode::kTan:
    case Opcode::kTanh: case Opcode::kSign: case Opcode::kAdd: case Opcode::kSubtract:
    case Opcode::kMultiply: case Opcode::kDivide: case Opcode::kPower: case Opcode::kCompare:
    case Opcode::kIsFinite:
      return true;
    default:
      return false;
  }
}

template <typename R>
std::complex<R> Unary(Opcode op, std::complex<R> z) {
  using C = std::complex<R>;
  switch (op) {
    case Opcode::kNegate: return -z;
    case Opcode::kExp: return std::exp(z);
    case Opcode::kExpm1: return std::exp(z) - C(1);
    case Opcode::kLog: return std::log(z);
    case Opcode::kLog1p: return std::log(C(1) + z);
    case Opcode::kSqrt: return std::sqrt(z);
    case Opcode::kRsqrt: return C(1) / std::sqrt(z);
    case Opcode::kCbrt: return std::pow(z, C(R(1) / R(3)));
    case Opcode::kSin: return std::sin(z);
    case Opcode::kCos: return std::cos(z);
    case Opcode::kTan: return std::tan(z);
    case Opcode::kTanh: return std::tanh(z);
    case Opcode::kSign: {
      // z / |z|, and 0 for 0 (NaN stays NaN).
      R a = std::abs(z);
      if (a == 0) return C(0);
      return z / a;
    }
    default: return z;
  }
}

template <typename R>
std::complex<R> Binary(Opcode op, std::complex<R> x, std::complex<R> y) {
  switch (op) {
    case Opcode::kAdd: return x + y;
    case Opcode::kSubtract: return x - y;
    case Opcode::kMultiply: return x * y;
    case Opcode::kDivide: return x / y;
    case Opcode::kPower: return std::pow(x, y);
    default: return x;
  }
}

template <typename R>
StatusOr<Literal> ElementwiseTyped(KernelArgs& k) {
  using C = std::complex<R>;
  const Instruction& instr = k.instr;
  const Opcode op = instr.opcode();
  const int64_t n = k.op(0).element_count();
  for (size_t i = 1; i < k.ops.size(); ++i)
    if (k.op(i).element_type() != k.op(0).element_type() || k.op(i).element_count() != n)
      return InstrError(instr, "operands " + k.op(0).shape().ToString(false) + " and " +
                                   k.op(i).shape().ToString(false) + " differ");
  const C* a = k.op(0).data<C>();
  Literal out = Literal::Uninitialized(k.shape());
  if (out.element_count() != n)
    return InstrError(instr, "result " + k.shape().ToString(false) + " does not match operand " +
                                 k.op(0).shape().ToString(false));
  const PrimitiveType want_out =
      op == Opcode::kCompare || op == Opcode::kIsFinite ? PrimitiveType::PRED
      : op == Opcode::kAbs ? (sizeof(R) == 4 ? PrimitiveType::F32 : PrimitiveType::F64)
                           : k.op(0).element_type();
  if (k.shape().element_type() != want_out)
    return InstrError(instr, "result type " + std::string(PrimitiveTypeName(k.shape().element_type())) +
                                 " should be " + std::string(PrimitiveTypeName(want_out)));
  if (op == Opcode::kIsFinite) {
    // XLA defines is-finite only on real types.
    return InstrError(instr, "is-finite is not defined for complex values");
  }
  if (op == Opcode::kCompare) {
    const auto& dir = instr.attrs().comparison_direction;
    if (!dir || (*dir != ComparisonDirection::kEq && *dir != ComparisonDirection::kNe))
      return InstrError(instr, "complex values compare only with EQ or NE");
    const C* b = k.op(1).data<C>();
    uint8_t* o = out.data<uint8_t>();
    const bool eq = *dir == ComparisonDirection::kEq;
    for (int64_t i = 0; i < n; ++i) o[i] = (a[i] == b[i]) == eq;
    return out;
  }
  if (op == Opcode::kAbs) {
    R* o = out.data<R>();
    for (int64_t i = 0; i < n; ++i) o[i] = std::abs(a[i]);
    return out;
  }
  C* o = out.data<C>();
  if (k.ops.size() == 2) {
    const C* b = k.op(1).data<C>();
    for (int64_t i = 0; i < n; ++i) o[i] = Binary<R>(op, a[i], b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = Unary<R>(op, a[i]);
  }
  return out;
}

// real / imag of a complex operand (of a real operand: the value / zero).
StatusOr<Literal> RealOrImag(KernelArgs& k) {
  const Literal& in = k.op(0);
  const PrimitiveType t = in.element_type();
  const int64_t n = in.element_count();
  const bool imag = k.instr.opcode() == Opcode::kImag;
  if (!IsComplex(t)) {
    if (k.shape().element_type() != t)
      return InstrError(k.instr, "result type should be " + std::string(PrimitiveTypeName(t)));
    if (!imag) return in;
    return Literal(k.shape());  // zeros
  }
  const PrimitiveType part = t == PrimitiveType::C64 ? PrimitiveType::F32 : PrimitiveType::F64;
  if (k.shape().element_type() != part || k.shape().ElementCount() != n)
    return InstrError(k.instr, "result should be " + Shape(part, in.shape().dimensions()).ToString(false));
  Literal out = Literal::Uninitialized(k.shape());
  const int64_t w = ByteWidth(part);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out.raw() + i * w, in.raw() + (2 * i + (imag ? 1 : 0)) * w, w);
  return out;
}

StatusOr<Literal> MakeComplex(KernelArgs& k) {
  const Literal& re = k.op(0);
  const Literal& im = k.op(1);
  const PrimitiveType t = re.element_type();
  const int64_t n = k.shape().IsArray() ? k.shape().ElementCount() : -1;
  if (im.element_type() != t || (t != PrimitiveType::F32 && t != PrimitiveType::F64))
    return InstrError(k.instr, "complex needs two f32 or two f64 operands");
  const PrimitiveType want = t == PrimitiveType::F32 ? PrimitiveType::C64 : PrimitiveType::C128;
  auto count_ok = [n](const Literal& l) { return l.element_count() == n || l.element_count() == 1; };
  if (k.shape().element_type() != want || !count_ok(re) || !count_ok(im))
    return InstrError(k.instr, "complex operands " + re.shape().ToString(false) + ", " +
                                   im.shape().ToString(false) + " do not make " +
                                   k.shape().ToString(false));
  Literal out = Literal::Uninitialized(k.shape());
  const int64_t w = ByteWidth(t);
  const int64_t rs = re.element_count() == 1 ? 0 : 1, is = im.element_count() == 1 ? 0 : 1;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out.raw() + 2 * i * w, re.raw() + i * rs * w, w);
    std::memcpy(out.raw() + (2 * i + 1) * w, im.raw() + i * is * w, w);
  }
  return out;
}

// A complex dot by direct summation in the operand precision. Operands are
// brought to [B, M, K] and [B, K, N] with the data-movement kernels'
// StridedCopy, so any dimension numbers work.
template <typename R>
StatusOr<Literal> DotTyped(KernelArgs& k, const Literal& lhs, const Literal& rhs) {
  using C = std::complex<R>;
  const Instruction& instr = k.instr;
  if (!instr.attrs().dot_dnums) return InstrError(instr, "dot needs dimension numbers");
  const DotDimensionNumbers& dn = *instr.attrs().dot_dnums;
  MS_ASSIGN_OR_RETURN(const DotDims dims, CheckDotDimensions(instr, dn, lhs.shape(), rhs.shape()));
  MS_RETURN_IF_ERROR(CheckDotResult(instr, dims));
  const int64_t B = dims.batch, M = dims.lhs_free_size, N = dims.rhs_free_size,
                K = dims.contracting;
  // lhs as [batch, lhs free, contracting], rhs as [batch, contracting, rhs free].
  std::vector<int64_t> lperm = dn.lhs_batch_dimensions, rperm = dn.rhs_batch_dimensions;
  lperm.insert(lperm.end(), dims.lhs_free.begin(), dims.lhs_free.end());
  lperm.insert(lperm.end(), dn.lhs_contracting_dimensions.begin(),
               dn.lhs_contracting_dimensions.end());
  rperm.insert(rperm.end(), dn.rhs_contracting_dimensions.begin(),
               dn.rhs_contracting_dimensions.end());
  rperm.insert(rperm.end(), dims.rhs_free.begin(), dims.rhs_free.end());
  auto permute = [](const Literal& in, const std::vector<int64_t>& perm) {
    const auto& in_dims = in.shape().dimensions();
    std::vector<int64_t> strides = RowMajorStrides(in_dims), out_dims(perm.size()),
                         src_strides(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      out_dims[i] = in_dims[perm[i]];
      src_strides[i] = strides[perm[i]];
    }
    Literal out(Shape(in.element_type(), out_dims));
    StridedCopy(in.raw(), src_strides, 0, out.raw(), RowMajorStrides(out_dims), 0, out_dims,
                ByteWidth(in.element_type()));
    return out;
  };
  Literal a = permute(lhs, lperm);  // [B, M, K]
  Literal b = permute(rhs, rperm);  // [B, K, N]
  Literal out(Shape(lhs.element_type(), dims.result_dims));
  const C* pa = a.data<C>();
  const C* pb = b.data<C>();
  C* pc = out.data<C>();
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        C acc(0);
        for (int64_t p = 0; p < K; ++p) acc += pa[(bi * M + i) * K + p] * pb[(bi * K + p) * N + j];
        pc[(bi * M + i) * N + j] = acc;
      }
  return out;
}

}  // namespace

bool IsComplexKernel(const KernelArgs& k) {
  const Opcode op = k.instr.opcode();
  if (op == Opcode::kReal || op == Opcode::kImag || op == Opcode::kComplex) return true;
  if (op != Opcode::kDot && !IsComplexElementwise(op)) return false;
  for (const Literal* o : k.ops)
    if (o->shape().IsArray() && IsComplex(o->element_type())) return true;
  return false;
}

StatusOr<Literal> EvalComplex(KernelArgs& k) {
  const Instruction& instr = k.instr;
  for (const Literal* o : k.ops)
    if (!o->shape().IsArray()) return InstrError(instr, "complex kernels need array operands");
  switch (instr.opcode()) {
    case Opcode::kReal: case Opcode::kImag: return RealOrImag(k);
    case Opcode::kComplex: return MakeComplex(k);
    case Opcode::kDot: return EvalComplexDot(k);
    default: break;
  }
  if (k.op(0).element_type() == PrimitiveType::C64) return ElementwiseTyped<float>(k);
  return ElementwiseTyped<double>(k);
}

StatusOr<Literal> EvalComplexDot(KernelArgs& k) {
  // Mixed operands are promoted to the result's complex type first.
  const PrimitiveType t = k.shape().element_type();
  if (!IsComplex(t)) return InstrError(k.instr, "a dot of complex operands needs a complex result");
  Literal lhs = ConvertLiteral(k.op(0), t), rhs = ConvertLiteral(k.op(1), t);
  if (t == PrimitiveType::C64) return DotTyped<float>(k, lhs, rhs);
  return DotTyped<double>(k, lhs, rhs);
}

Literal ConvertComplex(const Literal& in, PrimitiveType to) {
  const PrimitiveType from = in.element_type();
  Shape s = in.shape();
  s.set_element_type(to);
  if (from == to) return in;
  const int64_t n = in.element_count();
  Literal out = Literal::Uninitialized(s);
  if (IsComplex(from) && IsComplex(to)) {
    if (from == PrimitiveType::C64) {
      const float* p = in.data<float>();
      double* o = out.data<double>();
      for (int64_t i = 0; i < 2 * n; ++i) o[i] = p[i];
    } else {
      const double* p = in.data<double>();
      float* o = out.data<float>();
      for (int64_t i = 0; i < 2 * n; ++i) o[i] = static_cast<float>(p[i]);
    }
    return out;
  }
  if (IsComplex(to)) {
    // Real -> complex: the value becomes the real part (imag 0), converted
    // to the component type with the real convert's rounding.
    const PrimitiveType part = to == PrimitiveType::C64 ? PrimitiveType::F32 : PrimitiveType::F64;
    Literal re = ConvertLiteral(in, part);
    const int64_t w = ByteWidth(part);
    std::memset(out.raw(), 0, out.size_bytes());
    for (int64_t i = 0; i < n; ++i) std::memcpy(out.raw() + 2 * i * w, re.raw() + i * w, w);
    return out;
  }
  // Complex -> real: the real part, then the real convert.
  const PrimitiveType part = from == PrimitiveType::C64 ? PrimitiveType::F32 : PrimitiveType::F64;
  Literal re = Literal::Uninitialized(Shape(part, in.shape().dimensions()));
  const int64_t w = ByteWidth(part);
  for (int64_t i = 0; i < n; ++i) std::memcpy(re.raw() + i * w, in.raw() + 2 * i * w, w);
  return ConvertLiteral(re, to);
}

}  // namespace meshsplit::interp
