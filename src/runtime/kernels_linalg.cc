// Dense linear-algebra kernels of the interpreter: cholesky and
// triangular-solve over batches of small matrices. Values are staged to f64,
// factored or solved with textbook loops (the matrices in HLO tests are small)
// and stored back in the operand's type. Semantics follow XLA's operation
// semantics and its CPU expansion (see each kernel).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

// A boolean attribute kept verbatim in Attributes::extra ("true"/"false");
// `fallback` when absent.
StatusOr<bool> BoolAttr(const Instruction& instr, const char* name, bool fallback) {
  const std::string* v = instr.attrs().FindExtra(name);
  if (v == nullptr) return fallback;
  if (*v == "true") return true;
  if (*v == "false") return false;
  return InstrError(instr, std::string(name) + "=" + *v + " is not true or false");
}

bool IsRealFloat(PrimitiveType t) {
  return t == PrimitiveType::F16 || t == PrimitiveType::BF16 || t == PrimitiveType::F32 ||
         t == PrimitiveType::F64;
}

// Reads `count` elements of `lit` from `base` on into f64.
void ReadMatrix(const Literal& lit, int64_t base, int64_t count, std::vector<double>& out) {
  out.resize(count);
  if (lit.element_type() == PrimitiveType::F32) {
    const float* p = lit.data<float>() + base;
    for (int64_t i = 0; i < count; ++i) out[i] = p[i];
  } else if (lit.element_type() == PrimitiveType::F64) {
    const double* p = lit.data<double>() + base;
    for (int64_t i = 0; i < count; ++i) out[i] = p[i];
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = lit.GetDouble(base + i);
  }
}

void WriteMatrix(Literal& lit, int64_t base, const std::vector<double>& v) {
  const int64_t count = static_cast<int64_t>(v.size());
  if (lit.element_type() == PrimitiveType::F32) {
    float* p = lit.data<float>() + base;
    for (int64_t i = 0; i < count; ++i) p[i] = static_cast<float>(v[i]);
  } else if (lit.element_type() == PrimitiveType::F64) {
    double* p = lit.data<double>() + base;
    for (int64_t i = 0; i < count; ++i) p[i] = v[i];
  } else {
    for (int64_t i = 0; i < count; ++i) lit.SetDouble(base + i, v[i]);
  }
}

}  // namespace

// cholesky(a), lower=L: for each matrix of the batch, the factor L with
// a = L L^T (lower) or U with a = U^T U (upper). Only the named triangle of
// `a` is read. The other triangle of the result is zero, and a matrix whose
// factorization meets a NaN pivot (not positive definite) comes out all NaN,
// as XLA's expansion returns it.
StatusOr<Literal> EvalCholesky(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (k.ops.size() != 1) return InstrError(instr, "cholesky takes one operand");
  const Literal& a = k.op(0);
  const Shape& s = a.shape();
  if (!s.IsArray() || s.rank() < 2 || s.dimensions(s.rank() - 1) != s.dimensions(s.rank() - 2))
    return InstrError(instr, "cholesky operand " + s.ToString(false) +
                                 " must be a batch of square matrices");
  if (!IsRealFloat(s.element_type()))
    return InstrError(instr, "cholesky of " + std::string(PrimitiveTypeName(s.element_type())) +
                                 " is not supported by the interpreter");
  if (!instr.shape().IsArray() || instr.shape().dimensions() != s.dimensions() ||
      instr.shape().element_type() != s.element_type())
    return InstrError(instr, "cholesky result must have the operand's shape");
  MS_ASSIGN_OR_RETURN(bool lower, BoolAttr(instr, "lower", false));
  const int64_t n = s.dimensions(s.rank() - 1);
  const int64_t nn = n * n;
  const int64_t batch = nn == 0 ? 0 : a.element_count() / nn;
  Literal out(Shape(s.element_type(), s.dimensions()));
  std::vector<double> m, l(nn);
  for (int64_t bi = 0; bi < batch; ++bi) {
    ReadMatrix(a, bi * nn, nn, m);
    // Work on the lower triangle; the upper case is its transpose.
    auto at = [&](int64_t i, int64_t j) { return lower ? m[i * n + j] : m[j * n + i]; };
    std::fill(l.begin(), l.end(), 0.0);
    bool failed = false;
    for (int64_t j = 0; j < n; ++j) {
      double d = at(j, j);
      for (int64_t p = 0; p < j; ++p) d -= l[j * n + p] * l[j * n + p];
      d = std::sqrt(d);
      if (std::isnan(d)) failed = true;
      l[j * n + j] = d;
      for (int64_t i = j + 1; i < n; ++i) {
        double v = at(i, j);
        for (int64_t p = 0; p < j; ++p) v -= l[i * n + p] * l[j * n + p];
        l[i * n + j] = v / d;
      }
    }
    if (failed) {
      std::fill(l.begin(), l.end(), std::numeric_limits<double>::quiet_NaN());
    } else if (!lower) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i + 1; j < n; ++j) std::swap(l[i * n + j], l[j * n + i]);
    }
    WriteMatrix(out, bi * nn, l);
  }
  return out;
}

// triangular-solve(a, b): solves op(a) x = b (left_side=true) or
// x op(a) = b (left_side=false) for x, per matrix of the batch, where op is
// the identity (NO_TRANSPOSE) or the transpose (TRANSPOSE, ADJOINT: the same
// for real types). Only the `lower` (or upper) triangle of a is read; with
// unit_diagonal its diagonal is taken as ones and not read. A zero pivot gives
// inf/NaN, as plain substitution does.
StatusOr<Literal> EvalTriangularSolve(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (k.ops.size() != 2) return InstrError(instr, "triangular-solve takes two operands");
  const Literal& a = k.op(0);
  const Literal& b = k.op(1);
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  if (!as.IsArray() || !bs.IsArray() || as.rank() < 2 || as.rank() != bs.rank() ||
      as.dimensions(as.rank() - 1) != as.dimensions(as.rank() - 2))
    return InstrError(instr, "triangular-solve needs a batch of square matrices a and b of "
                             "the same rank, got " + as.ToString(false) + " and " +
                                 bs.ToString(false));
  if (!IsRealFloat(as.element_type()) || as.element_type() != bs.element_type())
    return InstrError(instr, "triangular-solve of " +
                                 std::string(PrimitiveTypeName(as.element_type())) + " and " +
                                 std::string(PrimitiveTypeName(bs.element_type())) +
                                 " is not supported by the interpreter");
  for (int64_t d = 0; d + 2 < as.rank(); ++d)
    if (as.dimensions(d) != bs.dimensions(d))
      return InstrError(instr, "batch dimension " + std::to_string(d) + " differs: a is " +
                                   as.ToString(false) + ", b is " + bs.ToString(false));
  MS_ASSIGN_OR_RETURN(bool left_side, BoolAttr(instr, "left_side", false));
  MS_ASSIGN_OR_RETURN(bool lower, BoolAttr(instr, "lower", false));
  MS_ASSIGN_OR_RETURN(bool unit_diagonal, BoolAttr(instr, "unit_diagonal", false));
  bool transpose = false;
  if (const std::string* t = instr.attrs().FindExtra("transpose_a")) {
    if (*t == "TRANSPOSE" || *t == "ADJOINT") transpose = true;
    else if (*t != "NO_TRANSPOSE")
      return InstrError(instr, "transpose_a=" + *t + " is not NO_TRANSPOSE, TRANSPOSE or ADJOINT");
  }
  const int64_t m = as.dimensions(as.rank() - 1);
  const int64_t rows = bs.dimensions(bs.rank() - 2), cols = bs.dimensions(bs.rank() - 1);
  if ((left_side ? rows : cols) != m)
    return InstrError(instr, "b " + bs.ToString(false) + " does not match a " +
                                 as.ToString(false) +
                                 (left_side ? " for left_side=true" : " for left_side=false"));
  if (!instr.shape().IsArray() || instr.shape().dimensions() != bs.dimensions() ||
      instr.shape().element_type() != bs.element_type())
    return InstrError(instr, "triangular-solve result must have the shape of b");
  const int64_t mm = m * m, bsize = rows * cols;
  const int64_t batch = bsize == 0 ? 0 : b.element_count() / bsize;
  Literal out(Shape(bs.element_type(), bs.dimensions()));
  // Every case becomes M y = v for the rhs vectors v: the columns of b
  // (left side) or its rows (right side, since x op(a) = b is
  // op(a)^T x^T = b^T). M is lower triangular exactly when `lower`, the
  // transpose and the side flip it an odd number of times.
  const bool flip = transpose != !left_side;
  const bool m_lower = lower != flip;
  std::vector<double> araw, mat(mm), x;
  for (int64_t bi = 0; bi < batch; ++bi) {
    ReadMatrix(a, bi * mm, mm, araw);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < m; ++j) {
        // Element (i, j) of the triangle of a that is read, zero elsewhere.
        bool in_tri = lower ? j <= i : j >= i;
        double v = !in_tri ? 0.0 : (i == j && unit_diagonal) ? 1.0 : araw[i * m + j];
        if (flip) mat[j * m + i] = v;
        else mat[i * m + j] = v;
      }
    ReadMatrix(b, bi * bsize, bsize, x);
    const int64_t nvec = left_side ? cols : rows;
    // Element e of rhs vector r sits at x[r*step_r + e*step_e].
    const int64_t step_r = left_side ? 1 : cols, step_e = left_side ? cols : 1;
    for (int64_t r = 0; r < nvec; ++r) {
      double* v = x.data() + r * step_r;
      if (m_lower) {
        for (int64_t i = 0; i < m; ++i) {
          double s = v[i * step_e];
          for (int64_t j = 0; j < i; ++j) s -= mat[i * m + j] * v[j * step_e];
          v[i * step_e] = s / mat[i * m + i];
        }
      } else {
        for (int64_t i = m - 1; i >= 0; --i) {
          double s = v[i * step_e];
          for (int64_t j = i + 1; j < m; ++j) s -= mat[i * m + j] * v[j * step_e];
          v[i * step_e] = s / mat[i * m + i];
        }
      }
    }
    WriteMatrix(out, bi * bsize, x);
  }
  return out;
}

}  // namespace meshsplit::interp
