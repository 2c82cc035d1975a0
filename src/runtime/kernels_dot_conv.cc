// Contraction kernels: dot (through cblas_sgemm/dgemm after bringing operands
// to [batch, M, K] x [batch, K, N]), convolution (im2col + gemm, covering all
// dim_labels, strides, padding, lhs/rhs dilation, window reversal, feature and
// batch groups) and the batch-norm ops. bf16/f16 compute in f32 and round on
// store; integer dots accumulate in int64 and wrap to the result type.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/blas_core.h"
#include "runtime/fast_gemm.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

// The type dots and convolutions compute in for these operand/result types.
PrimitiveType ComputeTypeFor(PrimitiveType a, PrimitiveType b, PrimitiveType result) {
  if (a == PrimitiveType::F64 || b == PrimitiveType::F64 || result == PrimitiveType::F64)
    return PrimitiveType::F64;
  if (IsFloatingPoint(a) || IsFloatingPoint(b) || IsFloatingPoint(result)) return PrimitiveType::F32;
  return PrimitiveType::S64;
}

// Copies `in` (converted to `t`) with its dimensions permuted: result dim i
// is input dim perm[i]. Dimensions in `reverse` are flipped.
Literal Permuted(const Literal& in, PrimitiveType t, const std::vector<int64_t>& perm,
                 const std::vector<bool>& reverse = {}) {
  Literal conv;
  const Literal* src = &in;
  if (in.element_type() != t) {
    conv = ConvertLiteral(in, t);
    src = &conv;
  }
  const auto& dims = in.shape().dimensions();
  std::vector<int64_t> strides = RowMajorStrides(dims);
  std::vector<int64_t> out_dims(perm.size()), src_strides(perm.size());
  int64_t base = 0;
  for (size_t i = 0; i < perm.size(); ++i) {
    out_dims[i] = dims[perm[i]];
    src_strides[i] = strides[perm[i]];
    if (!reverse.empty() && reverse[perm[i]]) {
      base += (dims[perm[i]] - 1) * strides[perm[i]];
      src_strides[i] = -src_strides[i];
    }
  }
  bool identity = base == 0;
  for (size_t i = 0; i < perm.size() && identity; ++i) identity = perm[i] == static_cast<int64_t>(i);
  if (identity) {
    if (src == &conv) return conv;
    return *src;
  }
  Literal out = Literal::Uninitialized(Shape(t, out_dims));  // StridedCopy writes all of it
  StridedCopy(src->raw(), src_strides, base, out.raw(), RowMajorStrides(out_dims), 0, out_dims,
              ByteWidth(t));
  return out;
}

// At most one BLAS call per hardware thread at a time. The SPMD runtime
// evaluates every virtual device on its own thread, and OpenBLAS gives each
// concurrent caller a large work buffer from a small fixed pool; with many
// devices (and an address-space limit, as in the conformance runner's
// children) callers spin on failing buffer allocations. Admitting one caller
// per core keeps the pool small and still lets 2 devices use 2 cores.
class BlasGate {
 public:
  BlasGate() : free_(std::max(1u, std::thread::hardware_concurrency())) {
    // Links the start-up kernel choice into every program that runs dots
    // (a static library drops object files nothing refers to).
    (void)BlasCoreChoice();
  }
  void Enter() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  void Leave() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned free_;
};

BlasGate& Gate() {
  static BlasGate gate;
  return gate;
}

struct BlasTicket {
  explicit BlasTicket(bool take) : taken(take) {
    if (taken) Gate().Enter();
  }
  ~BlasTicket() {
    if (taken) Gate().Leave();
  }
  bool taken;
};

template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t kk, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc, bool accumulate = false) {
  if (m == 0 || n == 0) return;
  BlasTicket ticket(std::is_floating_point_v<T>);
  if constexpr (std::is_same_v<T, float>) {
    if (FastSgemm(ta, tb, m, n, kk, a, lda, b, ldb, c, ldc, accumulate)) return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, kk,
                1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, kk,
                1.0, a, lda, b, ldb, accumulate ? 1.0 : 0.0, c, ldc);
  } else {
    // Integers: plain loops with wrapping int64 accumulation.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        uint64_t acc = accumulate ? static_cast<uint64_t>(c[i * ldc + j]) : 0;
        for (int64_t p = 0; p < kk; ++p) {
          T x = ta ? a[p * lda + i] : a[i * lda + p];
          T y = tb ? b[j * ldb + p] : b[p * ldb + j];
          acc += static_cast<uint64_t>(x) * static_cast<uint64_t>(y);
        }
        c[i * ldc + j] = static_cast<T>(acc);
      }
  }
}

Literal ToResultType(Literal computed, PrimitiveType result) {
  if (computed.element_type() == result) return computed;
  return ConvertLiteral(computed, result);
}

std::string Join(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "}";
}

}  // namespace

StatusOr<DotDims> CheckDotDimensions(const Instruction& instr, const DotDimensionNumbers& dn,
                                     const Shape& lhs, const Shape& rhs) {
  if (dn.lhs_batch_dimensions.size() != dn.rhs_batch_dimensions.size() ||
      dn.lhs_contracting_dimensions.size() != dn.rhs_contracting_dimensions.size())
    return InstrError(instr, "dot batch/contracting dimension counts differ between lhs and rhs");
  const int64_t lr = lhs.rank(), rr = rhs.rank();
  const auto& ld = lhs.dimensions();
  const auto& rd = rhs.dimensions();
  std::vector<bool> lused(lr, false), rused(rr, false);
  auto use = [](int64_t d, int64_t rank, std::vector<bool>& used) {
    if (d < 0 || d >= rank || used[d]) return false;
    used[d] = true;
    return true;
  };
  DotDims dims;
  for (size_t i = 0; i < dn.lhs_batch_dimensions.size(); ++i) {
    const int64_t a = dn.lhs_batch_dimensions[i], b = dn.rhs_batch_dimensions[i];
    if (!use(a, lr, lused) || !use(b, rr, rused) || ld[a] != rd[b])
      return InstrError(instr, "dot batch dimensions " + Join(dn.lhs_batch_dimensions) + " / " +
                                   Join(dn.rhs_batch_dimensions) + " do not match (" +
                                   lhs.ToString(false) + " x " + rhs.ToString(false) + ")");
    dims.batch *= ld[a];
    dims.result_dims.push_back(ld[a]);
  }
  for (size_t i = 0; i < dn.lhs_contracting_dimensions.size(); ++i) {
    const int64_t a = dn.lhs_contracting_dimensions[i], b = dn.rhs_contracting_dimensions[i];
    if (!use(a, lr, lused) || !use(b, rr, rused) || ld[a] != rd[b])
      return InstrError(instr, "dot contracting dimensions " + Join(dn.lhs_contracting_dimensions) +
                                   " / " + Join(dn.rhs_contracting_dimensions) + " do not match (" +
                                   lhs.ToString(false) + " x " + rhs.ToString(false) + ")");
    dims.contracting *= ld[a];
  }
  for (int64_t d = 0; d < lr; ++d)
    if (!lused[d]) {
      dims.lhs_free.push_back(d);
      dims.lhs_free_size *= ld[d];
      dims.result_dims.push_back(ld[d]);
    }
  for (int64_t d = 0; d < rr; ++d)
    if (!rused[d]) {
      dims.rhs_free.push_back(d);
      dims.rhs_free_size *= rd[d];
      dims.result_dims.push_back(rd[d]);
    }
  return dims;
}

Status CheckDotResult(const Instruction& instr, const DotDims& dims) {
  if (!instr.shape().IsArray() || instr.shape().dimensions() != dims.result_dims)
    return InstrError(instr, "dot result should have dimensions " + Join(dims.result_dims) +
                                 ", not " + instr.shape().ToString(false));
  return Status::Ok();
}

StatusOr<Literal> EvalDot(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const Literal& lhs = k.op(0);
  const Literal& rhs = k.op(1);
  int lr = lhs.shape().rank(), rr = rhs.shape().rank();
  DotDimensionNumbers dn;
  if (instr.attrs().dot_dnums) {
    dn = *instr.attrs().dot_dnums;
  } else {
    if (lr > 2 || rr > 2) return InstrError(instr, "dot needs dimension numbers for rank > 2");
    if (lr >= 1) dn.lhs_contracting_dimensions = {lr - 1};
    if (rr >= 1) dn.rhs_contracting_dimensions = {0};
  }
  MS_ASSIGN_OR_RETURN(const DotDims dims, CheckDotDimensions(instr, dn, lhs.shape(), rhs.shape()));
  MS_RETURN_IF_ERROR(CheckDotResult(instr, dims));
  const std::vector<int64_t>& lfree = dims.lhs_free;
  const std::vector<int64_t>& rfree = dims.rhs_free;
  const int64_t B = dims.batch, M = dims.lhs_free_size, N = dims.rhs_free_size,
                K = dims.contracting;
  PrimitiveType result_t = instr.shape().element_type();
  PrimitiveType ct = ComputeTypeFor(lhs.element_type(), rhs.element_type(), result_t);

  // lhs as [B, M, K] (or [B, K, M] transposed), rhs as [B, K, N] (or [B, N, K]).
  std::vector<int64_t> lperm_mk = dn.lhs_batch_dimensions, lperm_km = dn.lhs_batch_dimensions;
  lperm_mk.insert(lperm_mk.end(), lfree.begin(), lfree.end());
  lperm_mk.insert(lperm_mk.end(), dn.lhs_contracting_dimensions.begin(), dn.lhs_contracting_dimensions.end());
  lperm_km.insert(lperm_km.end(), dn.lhs_contracting_dimensions.begin(), dn.lhs_contracting_dimensions.end());
  lperm_km.insert(lperm_km.end(), lfree.begin(), lfree.end());
  std::vector<int64_t> rperm_kn = dn.rhs_batch_dimensions, rperm_nk = dn.rhs_batch_dimensions;
  rperm_kn.insert(rperm_kn.end(), dn.rhs_contracting_dimensions.begin(), dn.rhs_contracting_dimensions.end());
  rperm_kn.insert(rperm_kn.end(), rfree.begin(), rfree.end());
  rperm_nk.insert(rperm_nk.end(), rfree.begin(), rfree.end());
  rperm_nk.insert(rperm_nk.end(), dn.rhs_contracting_dimensions.begin(), dn.rhs_contracting_dimensions.end());
  auto is_identity = [](const std::vector<int64_t>& p) {
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] != static_cast<int64_t>(i)) return false;
    return true;
  };
  // Use the operand buffers in place when they already have a gemm layout.
  bool ta = !is_identity(lperm_mk) && is_identity(lperm_km);
  bool tb = !is_identity(rperm_kn) && is_identity(rperm_nk);
  Literal lbuf, rbuf;
  const Literal* a = &lhs;
  const Literal* b = &rhs;
  if (lhs.element_type() != ct || !(is_identity(lperm_mk) || ta)) {
    lbuf = Permuted(lhs, ct, ta ? lperm_km : lperm_mk);
    a = &lbuf;
  }
  if (rhs.element_type() != ct || !(is_identity(rperm_kn) || tb)) {
    rbuf = Permuted(rhs, ct, tb ? rperm_nk : rperm_kn);
    b = &rbuf;
  }
  Shape cshape(ct, dims.result_dims);
  // Every gemm writes its whole block (beta = 0), so the result is not
  // zero-filled first, except for K = 0, where BLAS refuses lda = 0 and
  // leaves it alone.
  Literal out = K == 0 ? Literal(cshape) : Literal::Uninitialized(cshape);
  auto run = [&]<typename T>() {
    const T* pa = a->data<T>();
    const T* pb = b->data<T>();
    T* pc = out.data<T>();
    for (int64_t bi = 0; bi < B; ++bi)
      Gemm<T>(ta, tb, M, N, K, pa + bi * M * K, ta ? M : K, pb + bi * K * N, tb ? K : N,
              pc + bi * M * N, N);
  };
  if (ct == PrimitiveType::F32) run.operator()<float>();
  else if (ct == PrimitiveType::F64) run.operator()<double>();
  else run.operator()<int64_t>();
  return ToResultType(std::move(out), result_t);
}

StatusOr<Literal> EvalConvolution(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const Literal& lhs = k.op(0);
  const Literal& rhs = k.op(1);
  if (!instr.attrs().conv_dnums) return InstrError(instr, "convolution needs dim_labels");
  const ConvolutionDimensionNumbers& dn = *instr.attrs().conv_dnums;
  const auto& ld = lhs.shape().dimensions();
  const auto& rd = rhs.shape().dimensions();
  const auto& od = instr.shape().dimensions();
  size_t sd = dn.input_spatial_dimensions.size();
  int rank = static_cast<int>(sd) + 2;
  if (lhs.shape().rank() != rank || rhs.shape().rank() != rank || instr.shape().rank() != rank ||
      dn.kernel_spatial_dimensions.size() != sd || dn.output_spatial_dimensions.size() != sd)
    return InstrError(instr, "convolution ranks do not match dim_labels");
  Window window = instr.attrs().window.value_or(Window(sd));
  if (window.size() != sd) return InstrError(instr, "window rank does not match the spatial dimensions");
  int64_t n_in = ld[dn.input_batch_dimension], c_in = ld[dn.input_feature_dimension];
  int64_t ki = rd[dn.kernel_input_feature_dimension], ko = rd[dn.kernel_output_feature_dimension];
  int64_t n_out = od[dn.output_batch_dimension], f_out = od[dn.output_feature_dimension];
  int64_t G = instr.attrs().feature_group_count, BG = instr.attrs().batch_group_count;
  if (G < 1 || BG < 1 || (G > 1 && BG > 1))
    return InstrError(instr, "unsupported feature_group_count/batch_group_count combination");
  if (c_in != ki * G || ko % G != 0 || ko % BG != 0 || n_in % BG != 0 || n_out != n_in / BG ||
      f_out != ko)
    return InstrError(instr, "convolution feature/batch sizes are inconsistent: input " +
                                 lhs.shape().ToString(false) + ", kernel " + rhs.shape().ToString(false) +
                                 ", result " + instr.shape().ToString(false));
  std::vector<int64_t> in_sp(sd), k_sp(sd), out_sp(sd);
  for (size_t i = 0; i < sd; ++i) {
    in_sp[i] = ld[dn.input_spatial_dimensions[i]];
    k_sp[i] = rd[dn.kernel_spatial_dimensions[i]];
    out_sp[i] = od[dn.output_spatial_dimensions[i]];
    const WindowDimension& w = window[i];
    if (w.size != k_sp[i] && instr.attrs().window)
      return InstrError(instr, "window size " + std::to_string(w.size) + " differs from kernel size " +
                                   std::to_string(k_sp[i]));
    if (w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1)
      return InstrError(instr, "window strides and dilations must be positive");
  }
  if (!instr.attrs().window)
    for (size_t i = 0; i < sd; ++i) window[i].size = k_sp[i];
  PrimitiveType result_t = instr.shape().element_type();
  PrimitiveType ct = ComputeTypeFor(lhs.element_type(), rhs.element_type(), result_t);
  if (ct == PrimitiveType::S64) ct = PrimitiveType::F64;  // exact for realistic integer convs

  // Canonical layouts: input [N, spatial..., C], kernel [spatial..., I, O]
  // (flipped where the window is reversed), output [N, spatial..., O].
  std::vector<int64_t> lperm = {dn.input_batch_dimension};
  for (int64_t d : dn.input_spatial_dimensions) lperm.push_back(d);
  lperm.push_back(dn.input_feature_dimension);
  std::vector<int64_t> kperm(dn.kernel_spatial_dimensions);
  kperm.push_back(dn.kernel_input_feature_dimension);
  kperm.push_back(dn.kernel_output_feature_dimension);
  std::vector<bool> kreverse(rank, false);
  for (size_t i = 0; i < sd; ++i) kreverse[dn.kernel_spatial_dimensions[i]] = window[i].window_reversal;
  Literal in_c = Permuted(lhs, ct, lperm);
  Literal ker_c = Permuted(rhs, ct, kperm, kreverse);
  std::vector<int64_t> cout_dims = {n_out};
  cout_dims.insert(cout_dims.end(), out_sp.begin(), out_sp.end());
  cout_dims.push_back(ko);
  Literal out_c(Shape(ct, cout_dims));

  int64_t out_pos = 1, k_pos = 1;
  for (size_t i = 0; i < sd; ++i) out_pos *= out_sp[i], k_pos *= k_sp[i];
  int64_t groups = std::max(G, BG);
  int64_t cg = ki;                  // input channels per group (all of them for batch groups)
  int64_t og = ko / groups;         // output channels per group
  int64_t nb = n_in / BG;           // batches per batch group
  int64_t cols = k_pos * cg;
  int64_t rows = n_out * out_pos;
  // Precompute, per spatial dim, the input index read by (output pos,
  // kernel pos), or -1 for padding and dilation holes.
  std::vector<std::vector<int64_t>> tables(sd);
  for (size_t i = 0; i < sd; ++i) {
    const WindowDimension& w = window[i];
    tables[i].assign(out_sp[i] * k_sp[i], -1);
    for (int64_t o = 0; o < out_sp[i]; ++o)
      for (int64_t q = 0; q < k_sp[i]; ++q) {
        int64_t p = o * w.stride - w.padding_low + q * w.window_dilation;
        if (p < 0 || p % w.base_dilation != 0) continue;
        p /= w.base_dilation;
        if (p < in_sp[i]) tables[i][o * k_sp[i] + q] = p;
      }
  }
  std::vector<int64_t> in_strides = RowMajorStrides(in_c.shape().dimensions());
  int64_t elem = ByteWidth(ct);
  // im2col in row blocks of at most ~64 MiB.
  int64_t block = std::max<int64_t>(1, (int64_t{64} << 20) / std::max<int64_t>(1, cols * elem));
  block = std::min(block, std::max<int64_t>(rows, 1));
  std::vector<uint8_t> col(static_cast<size_t>(block * cols * elem));
  std::vector<int64_t> oidx(sd), kidx(sd);
  auto run = [&]<typename T>() {
    const T* in = in_c.data<T>();
    const T* ker = ker_c.data<T>();
    T* out = out_c.data<T>();
    T* colp = reinterpret_cast<T*>(col.data());
    for (int64_t g = 0; g < groups; ++g) {
      int64_t c0 = G > 1 ? g * cg : 0;
      int64_t batch0 = BG > 1 ? g * nb : 0;
      int64_t o0 = g * og;
      for (int64_t r0 = 0; r0 < rows; r0 += block) {
        int64_t rn = std::min(block, rows - r0);
        std::fill(colp, colp + rn * cols, T(0));
        for (int64_t r = 0; r < rn; ++r) {
          int64_t row = r0 + r;
          int64_t n = row / out_pos, rem = row % out_pos;
          for (int i = static_cast<int>(sd) - 1; i >= 0; --i) oidx[i] = rem % out_sp[i], rem /= out_sp[i];
          std::fill(kidx.begin(), kidx.end(), 0);
          for (int64_t kp = 0; kp < k_pos; ++kp) {
            int64_t off = (batch0 + n) * in_strides[0];
            bool valid = true;
            for (size_t i = 0; i < sd; ++i) {
              int64_t p = tables[i][oidx[i] * k_sp[i] + kidx[i]];
              if (p < 0) {
                valid = false;
                break;
              }
              off += p * in_strides[i + 1];
            }
            if (valid) std::memcpy(colp + r * cols + kp * cg, in + off + c0, cg * sizeof(T));
            NextIndex(kidx, k_sp);
          }
        }
        // [rn, k_pos*cg] x [k_pos*cg, og] (kernel rows are (kpos, i), stride ko).
        Gemm<T>(false, false, rn, og, cols, colp, cols, ker + o0, ko, out + r0 * ko + o0, ko);
      }
    }
  };
  if (ct == PrimitiveType::F32) run.operator()<float>();
  else run.operator()<double>();
  // Back to the result's dimension order.
  std::vector<int64_t> operm(rank);
  operm[dn.output_batch_dimension] = 0;
  for (size_t i = 0; i < sd; ++i) operm[dn.output_spatial_dimensions[i]] = static_cast<int64_t>(i) + 1;
  operm[dn.output_feature_dimension] = rank - 1;
  Literal out = Permuted(out_c, ct, operm);
  return ToResultType(std::move(out), result_t);
}

namespace {

struct BnLayout {
  int64_t features = 0, inner = 1, count = 0;  // count = elements per feature
};

StatusOr<BnLayout> BatchNormLayout(const Instruction& instr, const Shape& s) {
  int64_t f = instr.attrs().feature_index;
  if (!s.IsArray() || f < 0 || f >= s.rank())
    return InstrError(instr, "feature_index " + std::to_string(f) + " out of range");
  BnLayout l;
  l.features = s.dimensions(f);
  for (int i = static_cast<int>(f) + 1; i < s.rank(); ++i) l.inner *= s.dimensions(i);
  l.count = l.features == 0 ? 0 : s.ElementCount() / l.features;
  return l;
}

std::vector<double> AsDoubles(const Literal& l) {
  std::vector<double> v(l.element_count());
  for (int64_t i = 0; i < l.element_count(); ++i) v[i] = l.GetDouble(i);
  return v;
}

Literal FromDoubles(const std::vector<double>& v, const Shape& s) {
  Literal out(Shape(s.element_type(), s.dimensions()));
  for (size_t i = 0; i < v.size(); ++i) out.SetDouble(static_cast<int64_t>(i), v[i]);
  return out;
}

Status CheckFeatureVectors(const KernelArgs& k, const BnLayout& l, std::initializer_list<int> ops) {
  for (int i : ops)
    if (k.op(i).element_count() != l.features)
      return InstrError(k.instr, "operand " + std::to_string(i) + " must have one value per feature (" +
                                     std::to_string(l.features) + ")");
  return Status::Ok();
}

}  // namespace

StatusOr<Literal> EvalBatchNormTraining(KernelArgs& k) {
  MS_ASSIGN_OR_RETURN(BnLayout l, BatchNormLayout(k.instr, k.op(0).shape()));
  MS_RETURN_IF_ERROR(CheckFeatureVectors(k, l, {1, 2}));
  std::vector<double> x = AsDoubles(k.op(0)), scale = AsDoubles(k.op(1)), offset = AsDoubles(k.op(2));
  std::vector<double> mean(l.features, 0), var(l.features, 0);
  int64_t n = static_cast<int64_t>(x.size());
  for (int64_t i = 0; i < n; ++i) mean[(i / l.inner) % l.features] += x[i];
  for (double& m : mean) m /= std::max<int64_t>(l.count, 1);
  for (int64_t i = 0; i < n; ++i) {
    double d = x[i] - mean[(i / l.inner) % l.features];
    var[(i / l.inner) % l.features] += d * d;
  }
  for (double& v : var) v /= std::max<int64_t>(l.count, 1);
  double eps = k.instr.attrs().epsilon;
  std::vector<double> y(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t f = (i / l.inner) % l.features;
    y[i] = (x[i] - mean[f]) / std::sqrt(var[f] + eps) * scale[f] + offset[f];
  }
  std::vector<Literal> outs;
  outs.push_back(FromDoubles(y, k.op(0).shape()));
  outs.push_back(FromDoubles(mean, k.op(1).shape()));
  outs.push_back(FromDoubles(var, k.op(1).shape()));
  return Literal::MakeTuple(std::move(outs));
}

StatusOr<Literal> EvalBatchNormInference(KernelArgs& k) {
  MS_ASSIGN_OR_RETURN(BnLayout l, BatchNormLayout(k.instr, k.op(0).shape()));
  MS_RETURN_IF_ERROR(CheckFeatureVectors(k, l, {1, 2, 3, 4}));
  std::vector<double> x = AsDoubles(k.op(0)), scale = AsDoubles(k.op(1)), offset = AsDoubles(k.op(2)),
                      mean = AsDoubles(k.op(3)), var = AsDoubles(k.op(4));
  double eps = k.instr.attrs().epsilon;
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t f = (static_cast<int64_t>(i) / l.inner) % l.features;
    x[i] = (x[i] - mean[f]) / std::sqrt(var[f] + eps) * scale[f] + offset[f];
  }
  return FromDoubles(x, k.op(0).shape());
}

StatusOr<Literal> EvalBatchNormGrad(KernelArgs& k) {
  MS_ASSIGN_OR_RETURN(BnLayout l, BatchNormLayout(k.instr, k.op(0).shape()));
  MS_RETURN_IF_ERROR(CheckFeatureVectors(k, l, {1, 2, 3}));
  if (k.op(4).element_count() != k.op(0).element_count())
    return InstrError(k.instr, "grad_output must have the operand's shape");
  std::vector<double> x = AsDoubles(k.op(0)), scale = AsDoubles(k.op(1)), mean = AsDoubles(k.op(2)),
                      var = AsDoubles(k.op(3)), dy = AsDoubles(k.op(4));
  double eps = k.instr.attrs().epsilon;
  int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> sum_dy(l.features, 0), sum_dy_xc(l.features, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t f = (i / l.inner) % l.features;
    sum_dy[f] += dy[i];
    sum_dy_xc[f] += dy[i] * (x[i] - mean[f]);
  }
  std::vector<double> dx(n), dscale(l.features), doffset(l.features);
  double cnt = static_cast<double>(std::max<int64_t>(l.count, 1));
  for (int64_t f = 0; f < l.features; ++f) {
    double inv = 1.0 / std::sqrt(var[f] + eps);
    dscale[f] = sum_dy_xc[f] * inv;
    doffset[f] = sum_dy[f];
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t f = (i / l.inner) % l.features;
    double inv = 1.0 / std::sqrt(var[f] + eps);
    double xc = x[i] - mean[f];
    dx[i] = scale[f] * inv / cnt * (cnt * dy[i] - sum_dy[f] - xc * sum_dy_xc[f] / (var[f] + eps));
  }
  std::vector<Literal> outs;
  outs.push_back(FromDoubles(dx, k.op(0).shape()));
  outs.push_back(FromDoubles(dscale, k.op(1).shape()));
  outs.push_back(FromDoubles(doffset, k.op(1).shape()));
  return Literal::MakeTuple(std::move(outs));
}

}  // namespace meshsplit::interp
