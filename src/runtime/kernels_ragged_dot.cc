// The ragged-dot kernel: a dot whose lhs has one "ragged" dimension cut into
// consecutive groups by a group_sizes operand. Its three modes, chosen by the
// kind of the lhs ragged dim, follow XLA's (and StableHLO's) definition:
//  - non-contracting: lhs row r of group i is multiplied by rhs[group i]
//    (the rhs group dim is contracted away); rows outside every group give 0;
//  - contracting: result [g, ...]: slice i sums only over the contracting
//    positions of group i;
//  - batch: an ordinary dot (group sizes do not change the result).
// group_sizes has shape [p..., g]; its leading dims index the leading dims of
// the ragged operand (a [g] operand applies to every row). Group bounds are
// running sums in group_sizes' own type, as XLA's expansion computes them.
// Loops accumulate in f64 (f32 for f32 operands would be BLAS's answer; the
// difference is rounding only).
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute_text.h"
#include "ir/shape_inference.h"
#include "runtime/kernels.h"
#include "support/small_helpers.h"

namespace meshsplit::interp {
namespace {

// Reads group_sizes element `i` as the wrapped value of its type: signed
// types sign-extend, unsigned ones stay non-negative.
int64_t WrapToType(int64_t v, PrimitiveType t) {
  int64_t bits = ByteWidth(t) * 8;
  if (bits >= 64) return v;
  uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if (IsSignedInteger(t) && (u >> (bits - 1)) != 0) u |= ~mask;
  return static_cast<int64_t>(u);
}

// Which of the g groups each element of an operand falls in. Membership
// depends only on the element's group_sizes row (its leading `prefix` dims)
// and its coordinate along the ragged dim, so it is tabulated per (row,
// coordinate) rather than per element.
class GroupTable {
 public:
  GroupTable(const Shape& op, int64_t ragged_dim, const Literal& sizes, int64_t prefix, int64_t g)
      : g_(g) {
    const std::vector<int64_t>& dims = op.dimensions();
    const std::vector<int64_t> strides = RowMajorStrides(dims);
    dim_r_ = dims[ragged_dim];
    rstride_ = strides[ragged_dim];
    inner_ = prefix == 0 ? op.ElementCount() : strides[prefix - 1];
    const int64_t rows = g == 0 ? 0 : sizes.element_count() / g;
    const PrimitiveType t = sizes.element_type();
    member_.assign(rows * dim_r_ * g, 0);
    for (int64_t row = 0; row < rows; ++row) {
      // Group i spans [start, end) of running sums in group_sizes' type.
      int64_t start = 0;
      for (int64_t i = 0; i < g; ++i) {
        const int64_t end = WrapToType(start + sizes.GetInt(row * g + i), t);
        for (int64_t r = 0; r < dim_r_; ++r)
          member_[(row * dim_r_ + r) * g + i] = start <= r && r < end;
        start = end;
      }
    }
  }
  // Element `e` (a linear index of the operand) is in group i.
  bool In(int64_t e, int64_t i) const {
    if (inner_ == 0) return false;
    const int64_t row = e / inner_, r = (e / rstride_) % dim_r_;
    return member_[(row * dim_r_ + r) * g_ + i] != 0;
  }

 private:
  int64_t g_, dim_r_ = 1, rstride_ = 1, inner_ = 1;
  std::vector<uint8_t> member_;
};

std::vector<double> ToDoubles(const Literal& lit) {
  std::vector<double> v(lit.element_count());
  for (int64_t i = 0; i < lit.element_count(); ++i) v[i] = lit.GetDouble(i);
  return v;
}

}  // namespace

StatusOr<Literal> EvalRaggedDot(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (k.ops.size() != 3) return InstrError(instr, "ragged-dot takes lhs, rhs and group_sizes");
  const Literal& lhs = k.op(0);
  const Literal& rhs = k.op(1);
  const Literal& sizes = k.op(2);
  const Shape& ls = lhs.shape();
  const Shape& rs = rhs.shape();
  const Shape& out_shape = instr.shape();
  if (!ls.IsArray() || !rs.IsArray() || !sizes.shape().IsArray() || !out_shape.IsArray())
    return InstrError(instr, "ragged-dot operands and result must be arrays");
  const DotDimensionNumbers dn = instr.attrs().dot_dnums.value_or(DotDimensionNumbers{});
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> lhs_ragged,
                      ReadIntListAttribute(instr, "lhs_ragged_dims"));
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> rhs_group,
                      ReadIntListAttribute(instr, "rhs_group_dims"));
  // The verifier's rule, so that the kernel runs exactly what it accepts.
  StatusOr<Shape> want = InferRaggedDotShape(ls, rs, sizes.shape(), dn, lhs_ragged, rhs_group,
                                             out_shape.element_type());
  if (!want.ok()) return InstrError(instr, want.status().message());
  const int64_t ragged = lhs_ragged[0];
  MS_ASSIGN_OR_RETURN(const DotDims dims, CheckDotDimensions(instr, dn, ls, rs));
  enum class Mode { kNonContracting, kContracting, kBatch };
  Mode mode = Contains(dn.lhs_contracting_dimensions, ragged) ? Mode::kContracting
              : Contains(dn.lhs_batch_dimensions, ragged)     ? Mode::kBatch
                                                              : Mode::kNonContracting;
  const int64_t g = sizes.shape().dimensions().back();
  const int64_t prefix = sizes.shape().rank() - 1;

  // Result dims: [g (contracting mode)] + batch + lhs free + rhs free, each
  // with its step in lhs and rhs (0 where it does not index that operand).
  const std::vector<int64_t> lstr = RowMajorStrides(ls.dimensions());
  const std::vector<int64_t> rstr = RowMajorStrides(rs.dimensions());
  std::vector<int64_t> odims, lstep, rstep;
  if (mode == Mode::kContracting) {
    odims.push_back(g);
    lstep.push_back(0);
    rstep.push_back(0);
  }
  for (size_t i = 0; i < dn.lhs_batch_dimensions.size(); ++i) {
    int64_t ld = dn.lhs_batch_dimensions[i], rd = dn.rhs_batch_dimensions[i];
    odims.push_back(ls.dimensions(ld));
    lstep.push_back(lstr[ld]);
    rstep.push_back(rstr[rd]);
  }
  for (int64_t d : dims.lhs_free) {
    odims.push_back(ls.dimensions(d));
    lstep.push_back(lstr[d]);
    rstep.push_back(0);
  }
  for (int64_t d : dims.rhs_free) {
    if (Contains(rhs_group, d)) continue;
    odims.push_back(rs.dimensions(d));
    lstep.push_back(0);
    rstep.push_back(rstr[d]);
  }
  if (odims != out_shape.dimensions())
    return InstrError(instr, "result " + out_shape.ToString(false) +
                                 " does not match the ragged-dot of " + ls.ToString(false) +
                                 " and " + rs.ToString(false));
  // Every combination of contracting positions, as offsets into lhs and rhs.
  std::vector<int64_t> lcoff{0}, rcoff{0};
  for (size_t i = 0; i < dn.lhs_contracting_dimensions.size(); ++i) {
    int64_t ld = dn.lhs_contracting_dimensions[i], rd = dn.rhs_contracting_dimensions[i];
    std::vector<int64_t> nl, nr;
    for (size_t c = 0; c < lcoff.size(); ++c)
      for (int64_t p = 0; p < ls.dimensions(ld); ++p) {
        nl.push_back(lcoff[c] + p * lstr[ld]);
        nr.push_back(rcoff[c] + p * rstr[rd]);
      }
    lcoff.swap(nl);
    rcoff.swap(nr);
  }

  std::optional<GroupTable> lmember, rmember;
  if (mode != Mode::kBatch) lmember.emplace(ls, ragged, sizes, prefix, g);
  if (mode == Mode::kContracting) {
    size_t pos = 0;
    while (dn.lhs_contracting_dimensions[pos] != ragged) ++pos;
    const int64_t rhs_ragged = dn.rhs_contracting_dimensions[pos];
    if (prefix > rs.rank())
      return InstrError(instr, "group_sizes has more leading dims than rhs");
    for (int64_t d = 0; d < prefix; ++d)
      if (sizes.shape().dimensions(d) != rs.dimensions(d))
        return InstrError(instr, "group_sizes dimension " + std::to_string(d) +
                                     " does not match rhs dimension " + std::to_string(d));
    rmember.emplace(rs, rhs_ragged, sizes, prefix, g);
  }
  const std::vector<double> lv = ToDoubles(lhs), rv = ToDoubles(rhs);
  const int64_t group_step = mode == Mode::kNonContracting ? rstr[rhs_group[0]] : 0;
  const size_t ncomb = lcoff.size();
  Literal out(Shape(out_shape.element_type(), out_shape.dimensions()));
  std::vector<int64_t> idx(odims.size(), 0);
  const int64_t count = out.element_count();
  for (int64_t o = 0; o < count; ++o, NextIndex(idx, odims)) {
    int64_t lb = 0, rb = 0;
    for (size_t d = 0; d < odims.size(); ++d) {
      lb += idx[d] * lstep[d];
      rb += idx[d] * rstep[d];
    }
    double acc = 0;
    switch (mode) {
      case Mode::kBatch:
        for (size_t c = 0; c < ncomb; ++c) acc += lv[lb + lcoff[c]] * rv[rb + rcoff[c]];
        break;
      case Mode::kNonContracting:
        for (size_t c = 0; c < ncomb; ++c) {
          const int64_t le = lb + lcoff[c];
          for (int64_t i = 0; i < g; ++i)
            if (lmember->In(le, i)) acc += lv[le] * rv[rb + rcoff[c] + i * group_step];
        }
        break;
      case Mode::kContracting: {
        const int64_t i = idx[0];
        for (size_t c = 0; c < ncomb; ++c) {
          const int64_t le = lb + lcoff[c], re = rb + rcoff[c];
          if (lmember->In(le, i) && rmember->In(re, i)) acc += lv[le] * rv[re];
        }
        break;
      }
    }
    if (IsFloatingPoint(out_shape.element_type())) out.SetDouble(o, acc);
    else out.SetInt(o, static_cast<int64_t>(acc));
  }
  return out;
}

}  // namespace meshsplit::interp
