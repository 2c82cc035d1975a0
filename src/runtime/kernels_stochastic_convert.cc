// stochastic-convert: a float operand converted to a signed integer type,
// rounded up or down at random. Semantics of XLA's StochasticConvert (as its
// decomposer spells them out): the fraction of |x| is scaled to the random
// operand's unsigned range, and |x| rounds up when the random value is below
// it; the sign is put back, and values at or past the integer type's range
// saturate. NaN converts to 0.
#include <cmath>
#include <cstdint>

#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

// `v` wrapped to a signed integer of `bits` bits.
int64_t Wrap(int64_t v, int bits) {
  if (bits >= 64) return v;
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if ((u >> (bits - 1)) != 0) u |= ~mask;
  return static_cast<int64_t>(u);
}

}  // namespace

StatusOr<Literal> EvalStochasticConvert(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (k.ops.size() != 2) return InstrError(instr, "stochastic-convert takes an operand and random bits");
  const Literal& x = k.op(0);
  const Literal& random = k.op(1);
  const PrimitiveType from = x.element_type(), bits_t = random.element_type();
  const PrimitiveType to = k.shape().element_type();
  if (!IsFloatingPoint(from) || IsComplex(from))
    return InstrError(instr, "stochastic-convert needs a real floating-point operand");
  if (IsSignedInteger(bits_t) || !IsInteger(bits_t) || ByteWidth(bits_t) != ByteWidth(from))
    return InstrError(instr, "stochastic-convert needs unsigned random bits as wide as the operand");
  if (!IsSignedInteger(to)) return InstrError(instr, "stochastic-convert converts to a signed integer type");
  if (x.element_count() != random.element_count() || x.element_count() != k.shape().ElementCount())
    return InstrError(instr, "stochastic-convert operands and result differ in size");
  const int to_bits = static_cast<int>(ByteWidth(to) * 8);
  const int64_t lo = to_bits >= 64 ? INT64_MIN : -(int64_t{1} << (to_bits - 1));
  const int64_t hi = to_bits >= 64 ? INT64_MAX : (int64_t{1} << (to_bits - 1)) - 1;
  const double scale = std::ldexp(1.0, static_cast<int>(ByteWidth(bits_t) * 8));
  const double range_max = scale - 1;  // the random type's largest value
  Literal out(k.shape());
  for (int64_t i = 0; i < x.element_count(); ++i) {
    const double v = x.GetDouble(i);
    int64_t r = 0;
    if (v == v) {
      const double a = std::fabs(v), whole = std::floor(a);
      // The scaled fraction, converted (truncating) to the random type.
      const double fixed = std::min(std::floor((a - whole) * scale), range_max);
      const uint64_t bits = static_cast<uint64_t>(random.GetInt(i));
      // The integer part converts saturating; rounding up and negating wrap
      // in the result type, as the integer ops of the decomposition do (the
      // saturation below then covers the values that wrapped).
      int64_t t = whole >= static_cast<double>(hi) ? hi : static_cast<int64_t>(whole);
      if (static_cast<double>(bits) < fixed) t = Wrap(t + 1, to_bits);
      r = v < 0 ? Wrap(-t, to_bits) : t;
      if (v <= static_cast<double>(lo)) r = lo;
      if (v >= static_cast<double>(hi)) r = hi;
    }
    out.SetInt(i, r);
  }
  return out;
}

}  // namespace meshsplit::interp
