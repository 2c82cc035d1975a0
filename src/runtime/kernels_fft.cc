// The fft op: FFT and IFFT (complex to complex), RFFT (real to the
// non-redundant half spectrum) and IRFFT (back), over the trailing
// fft_length.size() dims, XLA's semantics (the inverse transforms divide by
// the product of fft_length). Every line is transformed in double precision
// (radix-2 when its length is a power of two, a direct DFT otherwise) and
// rounded once to the result type, so a line's result never depends on the
// other lines, which keeps batch-partitioned ffts bit-identical.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <string>

#include "ir/attribute_text.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

using Cd = std::complex<double>;

// In-place DFT of one line of length n (sign -1 forward, +1 inverse,
// unnormalised). `scratch` has room for n values.
void TransformLine(Cd* x, int64_t n, int sign, std::vector<Cd>& scratch) {
  if (n <= 1) return;
  const double two_pi = 2 * std::numbers::pi;
  if ((n & (n - 1)) == 0) {
    // Iterative radix-2: bit-reversal permutation, then butterflies.
    for (int64_t i = 1, j = 0; i < n; ++i) {
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(x[i], x[j]);
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      for (int64_t k = 0; k < len / 2; ++k) {
        const double angle = sign * two_pi * static_cast<double>(k) / static_cast<double>(len);
        const Cd w(std::cos(angle), std::sin(angle));
        for (int64_t s = 0; s < n; s += len) {
          Cd u = x[s + k], v = x[s + k + len / 2] * w;
          x[s + k] = u + v;
          x[s + k + len / 2] = u - v;
        }
      }
    }
    return;
  }
  // Direct DFT; the twiddle index f * j is reduced mod n so the angle stays exact.
  scratch.assign(x, x + n);
  for (int64_t f = 0; f < n; ++f) {
    Cd acc(0);
    for (int64_t j = 0; j < n; ++j) {
      const double angle = sign * two_pi * static_cast<double>((f * j) % n) / static_cast<double>(n);
      acc += scratch[j] * Cd(std::cos(angle), std::sin(angle));
    }
    x[f] = acc;
  }
}

// Transforms every line of `data` (row-major, dims `dims`) along `axis`.
void TransformAxis(std::vector<Cd>& data, const std::vector<int64_t>& dims, int axis, int sign) {
  int64_t inner = 1, outer = 1;
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  const int64_t n = dims[axis];
  std::vector<Cd> line(n), scratch;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      Cd* base = data.data() + o * n * inner + i;
      for (int64_t j = 0; j < n; ++j) line[j] = base[j * inner];
      TransformLine(line.data(), n, sign, scratch);
      for (int64_t j = 0; j < n; ++j) base[j * inner] = line[j];
    }
}

std::vector<Cd> ToComplexDouble(const Literal& in) {
  const int64_t n = in.element_count();
  std::vector<Cd> out(n);
  switch (in.element_type()) {
    case PrimitiveType::C64: {
      const float* p = in.data<float>();
      for (int64_t i = 0; i < n; ++i) out[i] = Cd(p[2 * i], p[2 * i + 1]);
      break;
    }
    case PrimitiveType::C128: {
      const double* p = in.data<double>();
      for (int64_t i = 0; i < n; ++i) out[i] = Cd(p[2 * i], p[2 * i + 1]);
      break;
    }
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = Cd(in.GetDouble(i), 0);
      break;
  }
  return out;
}

}  // namespace

StatusOr<Literal> EvalFft(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const Literal& in = k.op(0);
  const std::string* type = instr.attrs().FindExtra("fft_type");
  const std::string* len_text = instr.attrs().FindExtra("fft_length");
  if (type == nullptr || len_text == nullptr)
    return InstrError(instr, "fft needs fft_type and fft_length");
  MS_ASSIGN_OR_RETURN(const std::vector<int64_t> len, ReadIntListAttribute(instr, "fft_length"));
  const bool negative = std::any_of(len.begin(), len.end(), [](int64_t l) { return l < 0; });
  if (len.empty() || len.size() > 3 || negative)
    return InstrError(instr, "bad fft_length " + *len_text);
  if (!in.shape().IsArray() || !k.shape().IsArray())
    return InstrError(instr, "fft needs array operand and result");
  const int rank = in.shape().rank();
  const int nfft = static_cast<int>(len.size());
  if (rank < nfft) return InstrError(instr, "fft operand has fewer dims than fft_length");
  const PrimitiveType in_t = in.element_type(), out_t = k.shape().element_type();
  const bool forward = *type == "FFT" || *type == "RFFT";
  const bool real_in = *type == "RFFT", real_out = *type == "IRFFT";
  if (*type != "FFT" && *type != "IFFT" && *type != "RFFT" && *type != "IRFFT")
    return InstrError(instr, "unknown fft_type " + *type);
  if (real_in ? !(in_t == PrimitiveType::F32 || in_t == PrimitiveType::F64) : !IsComplex(in_t))
    return InstrError(instr, *type + " does not take " + std::string(PrimitiveTypeName(in_t)));
  if (real_out ? !(out_t == PrimitiveType::F32 || out_t == PrimitiveType::F64) : !IsComplex(out_t))
    return InstrError(instr, *type + " does not give " + std::string(PrimitiveTypeName(out_t)));
  // The full-spectrum dims the transform runs on, and the check of the
  // operand and result dims against them.
  std::vector<int64_t> full = in.shape().dimensions();
  for (int i = 0; i < nfft; ++i) full[rank - nfft + i] = len[i];
  std::vector<int64_t> want_in = full, want_out = full;
  if (real_out) want_in.back() = len.back() / 2 + 1;
  if (real_in) want_out.back() = len.back() / 2 + 1;
  if (in.shape().dimensions() != want_in || k.shape().dimensions() != want_out)
    return InstrError(instr, "fft operand " + in.shape().ToString(false) + " and result " +
                                 k.shape().ToString(false) + " do not fit fft_length " +
                                 *len_text);
  std::vector<Cd> data;
  if (real_out) {
    // Inverse-transform the other fft dims on the half spectrum first: each
    // resulting last-dim line is then the half spectrum of a real signal,
    // whose full spectrum follows by Hermitian symmetry X[L - j] = conj(X[j])
    // (the imaginary parts of X[0] and, for even L, X[L/2] drop out).
    std::vector<Cd> half = ToComplexDouble(in);
    const std::vector<int64_t>& hdims = in.shape().dimensions();
    for (int a = rank - nfft; a < rank - 1; ++a) TransformAxis(half, hdims, a, +1);
    const int64_t L = len.back(), H = L / 2 + 1;
    const int64_t rows = L == 0 ? 0 : static_cast<int64_t>(half.size()) / H;
    data.assign(rows * L, Cd(0));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < H && j < L; ++j) data[r * L + j] = half[r * H + j];
      for (int64_t j = H; j < L; ++j) data[r * L + j] = std::conj(half[r * H + (L - j)]);
    }
    TransformAxis(data, full, rank - 1, +1);
  } else {
    data = ToComplexDouble(in);
    for (int a = rank - nfft; a < rank; ++a) TransformAxis(data, full, a, forward ? -1 : +1);
  }
  double scale = 1;
  if (!forward)
    for (int64_t l : len) scale /= static_cast<double>(l);
  Literal out = Literal::Uninitialized(k.shape());
  const int64_t n = out.element_count();
  // RFFT keeps the first L/2+1 entries of each last-dim line.
  const int64_t L = full.back(), keep = want_out.back();
  auto src = [&](int64_t i) -> Cd {
    if (!real_in) return data[i] * scale;
    return data[(i / keep) * L + i % keep] * scale;
  };
  switch (out_t) {
    case PrimitiveType::C64: {
      float* o = out.data<float>();
      for (int64_t i = 0; i < n; ++i) {
        Cd v = src(i);
        o[2 * i] = static_cast<float>(v.real());
        o[2 * i + 1] = static_cast<float>(v.imag());
      }
      break;
    }
    case PrimitiveType::C128: {
      double* o = out.data<double>();
      for (int64_t i = 0; i < n; ++i) {
        Cd v = src(i);
        o[2 * i] = v.real();
        o[2 * i + 1] = v.imag();
      }
      break;
    }
    case PrimitiveType::F32: {
      float* o = out.data<float>();
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(src(i).real());
      break;
    }
    default: {
      double* o = out.data<double>();
      for (int64_t i = 0; i < n; ++i) o[i] = src(i).real();
      break;
    }
  }
  return out;
}

}  // namespace meshsplit::interp
