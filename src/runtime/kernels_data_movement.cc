// Data-movement kernels: broadcast, reshape/bitcast, transpose, slice,
// dynamic-slice, dynamic-update-slice, pad, concatenate and reverse. They are
// type-agnostic: each becomes one StridedCopy over element bytes, with
// contiguous runs copied by memcpy, transposing walks blocked in tiles
// (transposed in AVX2 registers for 4- and 8-byte elements where the CPU has
// them, SSE otherwise), and outputs larger than the cache written with
// streaming stores. Every kernel checks its
// attributes against the operand shapes first, so an unverified module
// cannot read out of bounds.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "runtime/kernels.h"
#include "runtime/parallel.h"
#include "runtime/streaming.h"

namespace meshsplit::interp {
namespace {

template <typename T>
void CopyRun(const uint8_t* src, int64_t ss, uint8_t* dst, int64_t ds, int64_t n) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
}

void CopyElements(const uint8_t* src, int64_t ss, uint8_t* dst, int64_t ds, int64_t n,
                  int64_t elem, bool stream) {
  if (ss == 1 && ds == 1) {
    if (stream && n * elem >= 64) StreamCopy(dst, src, n * elem);
    else std::memcpy(dst, src, n * elem);
    return;
  }
  switch (elem) {
    case 1: CopyRun<uint8_t>(src, ss, dst, ds, n); return;
    case 2: CopyRun<uint16_t>(src, ss, dst, ds, n); return;
    case 4: CopyRun<uint32_t>(src, ss, dst, ds, n); return;
    case 8: CopyRun<uint64_t>(src, ss, dst, ds, n); return;
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ds * elem, src + i * ss * elem, elem);
  }
}

std::string DimsString(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// Output literal of the instruction's shape, with the operand's element type
// checked.
StatusOr<Literal> AllocateLike(const KernelArgs& k, const Literal& operand) {
  if (!k.shape().IsArray() || k.shape().element_type() != operand.element_type())
    return InstrError(k.instr, "result " + k.shape().ToString(false) +
                                   " does not match the operand type " +
                                   operand.shape().ToString(false));
  // Every kernel using this writes all elements.
  return Literal::Uninitialized(k.shape());
}

}  // namespace

namespace {

// Tiles of a transposing walk (see StridedCopy): kTileP elements along the
// destination-contiguous dimension p by kTileQ along the source-contiguous
// one q, 8 KiB at most. Long destination runs and short source runs: the
// tile's kTileQ destination rows are written kTileP elements (1 KiB of f32)
// at a time, and the walk goes q-fastest inside a band of kTileP source
// rows, which stays cached (measured on f32[8,3136,512] and f32[64,4096,64]
// transposes: 256x8 tiles ran ~2x faster than 32x32 ones).
constexpr int64_t kTileP = 256;
constexpr int64_t kTileBytes = 8192;
int64_t TileQ(int64_t elem) { return std::max<int64_t>(8, kTileBytes / (kTileP * elem)); }
int64_t TileP(int64_t elem) { return elem <= 4 ? kTileP : kTileBytes / (8 * elem); }

// Copies an n_rows x n_cols tile: row i, column j goes from
// src[i * s_row + j * s_col] to dst[i * d_row + j * d_col].
template <typename T>
void CopyTile(const uint8_t* src, int64_t s_row, int64_t s_col, uint8_t* dst, int64_t d_row,
              int64_t d_col, int64_t n_rows, int64_t n_cols) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n_rows; ++i) {
    const T* sr = s + i * s_row;
    T* dr = d + i * d_row;
    for (int64_t j = 0; j < n_cols; ++j) dr[j * d_col] = sr[j * s_col];
  }
}

// The ragged edge of a register-blocked transpose tile: rows >= rows_done
// entirely, and columns >= cols_done of the other rows, as words of T.
template <typename T>
void TransposeEdges(const uint8_t* src, int64_t s_col, uint8_t* dst, int64_t d_row,
                    int64_t n_rows, int64_t n_cols, int64_t rows_done, int64_t cols_done) {
  const T* su = reinterpret_cast<const T*>(src);
  T* du = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n_rows; ++i)
    for (int64_t j = i < rows_done ? cols_done : 0; j < n_cols; ++j)
      du[i * d_row + j] = su[i + j * s_col];
}

// 8x8 blocks of 4-byte elements transposed in AVX2 registers (eight 32-byte
// loads, eight 32-byte stores). Bit patterns are only moved, never
// computed on, so NaN payloads survive.
__attribute__((target("avx2"))) void TransposeTile4Avx2(const uint8_t* src, int64_t s_col,
                                                        uint8_t* dst, int64_t d_row,
                                                        int64_t n_rows, int64_t n_cols) {
  const float* s = reinterpret_cast<const float*>(src);
  float* d = reinterpret_cast<float*>(dst);
  const int64_t rows8 = n_rows / 8 * 8, cols8 = n_cols / 8 * 8;
  for (int64_t i = 0; i < rows8; i += 8) {
    for (int64_t j = 0; j < cols8; j += 8) {
      const float* b = s + i + j * s_col;
      __m256 r0 = _mm256_loadu_ps(b), r1 = _mm256_loadu_ps(b + s_col);
      __m256 r2 = _mm256_loadu_ps(b + 2 * s_col), r3 = _mm256_loadu_ps(b + 3 * s_col);
      __m256 r4 = _mm256_loadu_ps(b + 4 * s_col), r5 = _mm256_loadu_ps(b + 5 * s_col);
      __m256 r6 = _mm256_loadu_ps(b + 6 * s_col), r7 = _mm256_loadu_ps(b + 7 * s_col);
      __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
      __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* o = d + i * d_row + j;
      _mm256_storeu_ps(o, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(o + d_row, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(o + 2 * d_row, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(o + 3 * d_row, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(o + 4 * d_row, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(o + 5 * d_row, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(o + 6 * d_row, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(o + 7 * d_row, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
  }
  TransposeEdges<uint32_t>(src, s_col, dst, d_row, n_rows, n_cols, rows8, cols8);
}

// 4x4 blocks of 8-byte elements in AVX2 registers.
__attribute__((target("avx2"))) void TransposeTile8Avx2(const uint8_t* src, int64_t s_col,
                                                        uint8_t* dst, int64_t d_row,
                                                        int64_t n_rows, int64_t n_cols) {
  const double* s = reinterpret_cast<const double*>(src);
  double* d = reinterpret_cast<double*>(dst);
  const int64_t rows4 = n_rows / 4 * 4, cols4 = n_cols / 4 * 4;
  for (int64_t i = 0; i < rows4; i += 4) {
    for (int64_t j = 0; j < cols4; j += 4) {
      const double* b = s + i + j * s_col;
      __m256d r0 = _mm256_loadu_pd(b), r1 = _mm256_loadu_pd(b + s_col);
      __m256d r2 = _mm256_loadu_pd(b + 2 * s_col), r3 = _mm256_loadu_pd(b + 3 * s_col);
      __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
      __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
      double* o = d + i * d_row + j;
      _mm256_storeu_pd(o, _mm256_permute2f128_pd(t0, t2, 0x20));
      _mm256_storeu_pd(o + d_row, _mm256_permute2f128_pd(t1, t3, 0x20));
      _mm256_storeu_pd(o + 2 * d_row, _mm256_permute2f128_pd(t0, t2, 0x31));
      _mm256_storeu_pd(o + 3 * d_row, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
  }
  TransposeEdges<uint64_t>(src, s_col, dst, d_row, n_rows, n_cols, rows4, cols4);
}

// CopyTile for 4-byte elements when the source is contiguous along rows and
// the destination along columns (a transpose): 4x4 blocks are loaded as four
// source vectors and transposed in registers, so every load and store moves
// 16 bytes; the ragged edges go element by element.
void TransposeTile4(const uint8_t* src, int64_t s_col, uint8_t* dst, int64_t d_row,
                    int64_t n_rows, int64_t n_cols) {
  if (HaveAvx2()) return TransposeTile4Avx2(src, s_col, dst, d_row, n_rows, n_cols);
  const float* s = reinterpret_cast<const float*>(src);
  float* d = reinterpret_cast<float*>(dst);
  const int64_t rows4 = n_rows / 4 * 4, cols4 = n_cols / 4 * 4;
  for (int64_t i = 0; i < rows4; i += 4) {
    for (int64_t j = 0; j < cols4; j += 4) {
      __m128 r0 = _mm_loadu_ps(s + i + j * s_col), r1 = _mm_loadu_ps(s + i + (j + 1) * s_col);
      __m128 r2 = _mm_loadu_ps(s + i + (j + 2) * s_col), r3 = _mm_loadu_ps(s + i + (j + 3) * s_col);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(d + i * d_row + j, r0);
      _mm_storeu_ps(d + (i + 1) * d_row + j, r1);
      _mm_storeu_ps(d + (i + 2) * d_row + j, r2);
      _mm_storeu_ps(d + (i + 3) * d_row + j, r3);
    }
  }
  TransposeEdges<uint32_t>(src, s_col, dst, d_row, n_rows, n_cols, rows4, cols4);
}

// The same for 8-byte elements, in 2x2 blocks.
void TransposeTile8(const uint8_t* src, int64_t s_col, uint8_t* dst, int64_t d_row,
                    int64_t n_rows, int64_t n_cols) {
  if (HaveAvx2()) return TransposeTile8Avx2(src, s_col, dst, d_row, n_rows, n_cols);
  const double* s = reinterpret_cast<const double*>(src);
  double* d = reinterpret_cast<double*>(dst);
  const int64_t rows2 = n_rows / 2 * 2, cols2 = n_cols / 2 * 2;
  for (int64_t i = 0; i < rows2; i += 2) {
    for (int64_t j = 0; j < cols2; j += 2) {
      __m128d r0 = _mm_loadu_pd(s + i + j * s_col), r1 = _mm_loadu_pd(s + i + (j + 1) * s_col);
      _mm_storeu_pd(d + i * d_row + j, _mm_unpacklo_pd(r0, r1));
      _mm_storeu_pd(d + (i + 1) * d_row + j, _mm_unpackhi_pd(r0, r1));
    }
  }
  TransposeEdges<uint64_t>(src, s_col, dst, d_row, n_rows, n_cols, rows2, cols2);
}

void CopyTileBytes(const uint8_t* src, int64_t s_row, int64_t s_col, uint8_t* dst,
                   int64_t d_row, int64_t d_col, int64_t n_rows, int64_t n_cols, int64_t elem) {
  if (s_row == 1 && d_col == 1 && elem == 4)
    return TransposeTile4(src, s_col, dst, d_row, n_rows, n_cols);
  if (s_row == 1 && d_col == 1 && elem == 8)
    return TransposeTile8(src, s_col, dst, d_row, n_rows, n_cols);
  switch (elem) {
    case 1: CopyTile<uint8_t>(src, s_row, s_col, dst, d_row, d_col, n_rows, n_cols); return;
    case 2: CopyTile<uint16_t>(src, s_row, s_col, dst, d_row, d_col, n_rows, n_cols); return;
    case 4: CopyTile<uint32_t>(src, s_row, s_col, dst, d_row, d_col, n_rows, n_cols); return;
    case 8: CopyTile<uint64_t>(src, s_row, s_col, dst, d_row, d_col, n_rows, n_cols); return;
    default:
      for (int64_t i = 0; i < n_rows; ++i)
        for (int64_t j = 0; j < n_cols; ++j)
          std::memcpy(dst + (i * d_row + j * d_col) * elem, src + (i * s_row + j * s_col) * elem,
                      elem);
  }
}

int64_t Abs(int64_t v) { return v < 0 ? -v : v; }

// Picks the dimension to block against the innermost one `p` (which the copy
// walks in destination order): the dimension the source is most contiguous
// along. Returns -1 when walking `p` directly is already cache-friendly, i.e.
// `p` advances the source by less than a cache line, or there is no better
// source dimension. Stride-0 (broadcast) dimensions are never blocked, and a
// stride-0 destination dimension disables blocking altogether since then the
// order of writes decides the result.
int PickBlockDim(const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
                 const std::vector<int64_t>& dst_strides, int64_t elem) {
  int r = static_cast<int>(dims.size());
  if (r < 2) return -1;
  for (int64_t s : dst_strides)
    if (s == 0) return -1;
  int p = r - 1;
  int64_t sp = Abs(src_strides[p]);
  if (sp == 0 || sp * elem < 64 || dims[p] < 2) return -1;
  int q = -1;
  for (int i = 0; i < p; ++i) {
    int64_t si = Abs(src_strides[i]);
    if (si == 0 || si >= sp || dims[i] < 2) continue;
    if (q < 0 || si < Abs(src_strides[q])) q = i;
  }
  return q;
}

// Copies at least this many bytes split over IntraOpThreads() threads: one
// core's loads stall on the strided side of a transpose (a new source line
// per row of the tile), so a second core nearly doubles the rate (f32
// [8,3136,512] -> [8,512,3136]: 0.41x of memcpy on one core, 0.82x on two).
constexpr int64_t kParallelCopyBytes = int64_t{4} << 20;

// The transposing walk of StridedCopy: the destination is contiguous along
// the innermost merged dimension p, the source along q. Walking p alone would
// touch a new source cache line per element, so the (q, p) plane is copied in
// tiles (kTileP x kTileQ) band by band; the other dimensions are an odometer.
// Units of work are (outer index, band of p), split over threads when large.
void TransposingWalk(const uint8_t* src, int64_t src_base, uint8_t* dst, int64_t dst_base,
                     const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
                     const std::vector<int64_t>& dst_strides, int q, int64_t elem, bool stream) {
  const int p = static_cast<int>(dims.size()) - 1;
  const int64_t np = dims[p], nq = dims[q];
  const int64_t sp = src_strides[p], dp = dst_strides[p], sq = src_strides[q],
                dq = dst_strides[q];
  std::vector<int64_t> o_dims, o_src, o_dst;
  for (int i = 0; i < p; ++i) {
    if (i == q) continue;
    o_dims.push_back(dims[i]);
    o_src.push_back(src_strides[i]);
    o_dst.push_back(dst_strides[i]);
  }
  int64_t outer = 1;
  for (int64_t d : o_dims) outer *= d;
  const int64_t tile_p = TileP(elem), tile_q = TileQ(elem);
  const int64_t bands = (np + tile_p - 1) / tile_p;
  const int64_t units = outer * bands;
  // A streamed tile is assembled in scratch and its rows (contiguous in the
  // destination when dp == 1) streamed out whole.
  const bool stream_tiles = stream && dp == 1 && elem <= 8;
  auto run_units = [&](int64_t u0, int64_t u1) {
    alignas(64) uint8_t scratch[kTileBytes];
    for (int64_t u = u0; u < u1; ++u) {
      int64_t rest = u / bands, so = src_base, dof = dst_base;
      for (int d = static_cast<int>(o_dims.size()) - 1; d >= 0; --d) {
        const int64_t i = rest % o_dims[d];
        rest /= o_dims[d];
        so += i * o_src[d];
        dof += i * o_dst[d];
      }
      const int64_t p0 = (u % bands) * tile_p, tp = std::min(tile_p, np - p0);
      for (int64_t q0 = 0; q0 < nq; q0 += tile_q) {
        const int64_t tq = std::min(tile_q, nq - q0);
        const uint8_t* s = src + (so + q0 * sq + p0 * sp) * elem;
        uint8_t* d = dst + (dof + q0 * dq + p0 * dp) * elem;
        if (!stream_tiles) {
          CopyTileBytes(s, sq, sp, d, dq, dp, tq, tp, elem);
          continue;
        }
        CopyTileBytes(s, sq, sp, scratch, tp, 1, tq, tp, elem);
        for (int64_t i = 0; i < tq; ++i)
          StreamCopy(d + i * dq * elem, scratch + i * tp * elem, tp * elem);
      }
    }
    // Each thread orders its own streamed stores before the result is used.
    if (stream) StreamingFence();
  };
  const int64_t bytes = outer * np * nq * elem;
  const int parts =
      bytes >= kParallelCopyBytes ? static_cast<int>(std::min<int64_t>(IntraOpThreads(), units)) : 1;
  if (parts <= 1) {
    run_units(0, units);
    return;
  }
  ParallelFor(parts, [&](int k) { run_units(units * k / parts, units * (k + 1) / parts); });
}

}  // namespace

bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}

void StridedCopy(const uint8_t* src, const std::vector<int64_t>& src_strides, int64_t src_base,
                 uint8_t* dst, const std::vector<int64_t>& dst_strides, int64_t dst_base,
                 const std::vector<int64_t>& dims, int64_t elem) {
  for (int64_t d : dims)
    if (d <= 0) return;
  int r = static_cast<int>(dims.size());
  if (r == 0) {
    std::memcpy(dst + dst_base * elem, src + src_base * elem, elem);
    return;
  }
  // Drop size-1 dimensions and merge dimensions that are contiguous in both
  // source and destination, so inner runs are as long as possible.
  std::vector<int64_t> m_dims, m_src, m_dst;
  for (int i = 0; i < r; ++i) {
    if (dims[i] == 1) continue;
    if (!m_dims.empty() && m_src.back() == src_strides[i] * dims[i] &&
        m_dst.back() == dst_strides[i] * dims[i]) {
      m_dims.back() *= dims[i];
      m_src.back() = src_strides[i];
      m_dst.back() = dst_strides[i];
      continue;
    }
    m_dims.push_back(dims[i]);
    m_src.push_back(src_strides[i]);
    m_dst.push_back(dst_strides[i]);
  }
  if (m_dims.empty()) {
    std::memcpy(dst + dst_base * elem, src + src_base * elem, elem);
    return;
  }
  int mr = static_cast<int>(m_dims.size());
  int64_t total = elem;
  for (int64_t d : m_dims) total *= d;
  const bool stream = total >= StreamingBytes();
  int q = PickBlockDim(m_dims, m_src, m_dst, elem);
  if (q >= 0) {
    TransposingWalk(src, src_base, dst, dst_base, m_dims, m_src, m_dst, q, elem, stream);
    return;
  }
  int64_t inner = m_dims[mr - 1], ss = m_src[mr - 1], ds = m_dst[mr - 1];
  std::vector<int64_t> outer_dims(m_dims.begin(), m_dims.end() - 1);
  std::vector<int64_t> idx(outer_dims.size(), 0);
  int64_t so = src_base, dof = dst_base;
  while (true) {
    CopyElements(src + so * elem, ss, dst + dof * elem, ds, inner, elem, stream);
    // Advance the odometer and the two offsets incrementally.
    int d = static_cast<int>(outer_dims.size()) - 1;
    for (; d >= 0; --d) {
      so += m_src[d];
      dof += m_dst[d];
      if (++idx[d] < outer_dims[d]) break;
      so -= m_src[d] * outer_dims[d];
      dof -= m_dst[d] * outer_dims[d];
      idx[d] = 0;
    }
    if (d < 0) break;
  }
  if (stream) StreamingFence();
}

StatusOr<Literal> EvalBroadcast(KernelArgs& k) {
  const Literal& in = k.op(0);
  MS_ASSIGN_OR_RETURN(Literal out, AllocateLike(k, in));
  const auto& map = k.instr.attrs().dimensions;
  const auto& out_dims = k.shape().dimensions();
  if (map.size() != in.shape().dimensions().size())
    return InstrError(k.instr, "broadcast dimensions " + DimsString(map) + " do not match operand rank " +
                                   std::to_string(in.shape().rank()));
  std::vector<int64_t> in_strides = RowMajorStrides(in.shape().dimensions());
  std::vector<int64_t> src_strides(out_dims.size(), 0);
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0 || map[i] >= static_cast<int64_t>(out_dims.size()) ||
        out_dims[map[i]] != in.shape().dimensions(i))
      return InstrError(k.instr, "broadcast dimensions " + DimsString(map) + " do not map " +
                                     in.shape().ToString(false) + " into " +
                                     k.shape().ToString(false));
    src_strides[map[i]] = in_strides[i];
  }
  int64_t elem = ByteWidth(in.element_type());
  if (in.element_count() == 1) {
    // Fill by doubling memcpy: fast for any element width.
    int64_t total = out.size_bytes();
    if (total == 0) return out;
    std::memcpy(out.raw(), in.raw(), elem);
    int64_t filled = elem;
    while (filled < total) {
      int64_t n = std::min(filled, total - filled);
      std::memcpy(out.raw() + filled, out.raw(), n);
      filled += n;
    }
    return out;
  }
  StridedCopy(in.raw(), src_strides, 0, out.raw(), RowMajorStrides(out_dims), 0, out_dims, elem);
  return out;
}

StatusOr<Literal> EvalReshape(KernelArgs& k) {
  const Literal& in = k.op(0);
  if (!k.shape().IsArray() || in.element_count() != k.shape().ElementCount() ||
      ByteWidth(in.element_type()) != ByteWidth(k.shape().element_type()))
    return InstrError(k.instr, "cannot reshape " + in.shape().ToString(false) + " to " +
                                   k.shape().ToString(false));
  Literal out = Literal::Uninitialized(k.shape());
  if (in.size_bytes() > 0) std::memcpy(out.raw(), in.raw(), in.size_bytes());
  return out;
}

StatusOr<Literal> EvalTranspose(KernelArgs& k) {
  const Literal& in = k.op(0);
  MS_ASSIGN_OR_RETURN(Literal out, AllocateLike(k, in));
  const auto& perm = k.instr.attrs().dimensions;
  const auto& out_dims = k.shape().dimensions();
  int r = in.shape().rank();
  std::vector<bool> seen(r, false);
  if (static_cast<int>(perm.size()) != r || static_cast<int>(out_dims.size()) != r)
    return InstrError(k.instr, "transpose dimensions " + DimsString(perm) + " do not match rank " +
                                   std::to_string(r));
  std::vector<int64_t> in_strides = RowMajorStrides(in.shape().dimensions());
  std::vector<int64_t> src(r);
  for (int i = 0; i < r; ++i) {
    if (perm[i] < 0 || perm[i] >= r || seen[perm[i]] ||
        out_dims[i] != in.shape().dimensions(perm[i]))
      return InstrError(k.instr, "transpose dimensions " + DimsString(perm) +
                                     " are not a permutation mapping " + in.shape().ToString(false) +
                                     " to " + k.shape().ToString(false));
    seen[perm[i]] = true;
    src[i] = in_strides[perm[i]];
  }
  int64_t elem = ByteWidth(in.element_type());
  // StridedCopy walks a transpose in cache-sized tiles.
  StridedCopy(in.raw(), src, 0, out.raw(), RowMajorStrides(out_dims), 0, out_dims, elem);
  return out;
}

StatusOr<Literal> EvalSlice(KernelArgs& k) {
  const Literal& in = k.op(0);
  MS_ASSIGN_OR_RETURN(Literal out, AllocateLike(k, in));
  const auto& sl = k.instr.attrs().slice;
  int r = in.shape().rank();
  const auto& out_dims = k.shape().dimensions();
  if (static_cast<int>(sl.size()) != r || static_cast<int>(out_dims.size()) != r)
    return InstrError(k.instr, "slice has " + std::to_string(sl.size()) + " ranges for rank " +
                                   std::to_string(r));
  std::vector<int64_t> in_strides = RowMajorStrides(in.shape().dimensions());
  std::vector<int64_t> src(r);
  int64_t base = 0;
  for (int i = 0; i < r; ++i) {
    const SliceDimension& s = sl[i];
    int64_t expect = s.stride > 0 ? (s.limit - s.start + s.stride - 1) / s.stride : -1;
    if (s.start < 0 || s.limit > in.shape().dimensions(i) || s.start > s.limit ||
        s.stride <= 0 || expect != out_dims[i])
      return InstrError(k.instr, "slice [" + std::to_string(s.start) + ":" + std::to_string(s.limit) +
                                     ":" + std::to_string(s.stride) + "] of dimension " +
                                     std::to_string(i) + " does not fit " +
                                     in.shape().ToString(false) + " -> " + k.shape().ToString(false));
    base += s.start * in_strides[i];
    src[i] = in_strides[i] * s.stride;
  }
  StridedCopy(in.raw(), src, base, out.raw(), RowMajorStrides(out_dims), 0, out_dims,
              ByteWidth(in.element_type()));
  return out;
}

namespace {

// Start indices of dynamic-slice / dynamic-update-slice: scalar operands from
// `first` on (or one rank-1 operand, the older form), clamped so that a
// window of `sizes` fits inside `dims`.
StatusOr<std::vector<int64_t>> ClampedStarts(const KernelArgs& k, int first,
                                             const std::vector<int64_t>& dims,
                                             const std::vector<int64_t>& sizes) {
  int r = static_cast<int>(dims.size());
  std::vector<int64_t> starts(r, 0);
  int n_idx = static_cast<int>(k.ops.size()) - first;
  if (n_idx == 1 && k.op(first).shape().rank() == 1 && r != 1) {
    const Literal& v = k.op(first);
    if (v.element_count() != r) return InstrError(k.instr, "start index vector has the wrong length");
    for (int i = 0; i < r; ++i) starts[i] = v.GetInt(i);
  } else if (n_idx == 1 && r == 1 && k.op(first).shape().rank() == 1) {
    starts[0] = k.op(first).GetInt(0);
  } else {
    if (n_idx != r)
      return InstrError(k.instr, "expected " + std::to_string(r) + " start indices, got " +
                                     std::to_string(n_idx));
    for (int i = 0; i < r; ++i) {
      if (!IsInteger(k.op(first + i).element_type()) || k.op(first + i).element_count() != 1)
        return InstrError(k.instr, "start indices must be integer scalars");
      starts[i] = ScalarIndex(k.op(first + i));
    }
  }
  for (int i = 0; i < r; ++i) {
    if (sizes[i] > dims[i] || sizes[i] < 0)
      return InstrError(k.instr, "window size " + std::to_string(sizes[i]) + " exceeds dimension " +
                                     std::to_string(i) + " of size " + std::to_string(dims[i]));
    starts[i] = std::clamp<int64_t>(starts[i], 0, dims[i] - sizes[i]);
  }
  return starts;
}

}  // namespace

StatusOr<Literal> EvalDynamicSlice(KernelArgs& k) {
  const Literal& in = k.op(0);
  MS_ASSIGN_OR_RETURN(Literal out, AllocateLike(k, in));
  const auto& dims = in.shape().dimensions();
  std::vector<int64_t> sizes = k.shape().dimensions();
  if (sizes.size() != dims.size())
    return InstrError(k.instr, "dynamic-slice result rank differs from the operand");
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ClampedStarts(k, 1, dims, sizes));
  std::vector<int64_t> in_strides = RowMajorStrides(dims);
  int64_t base = 0;
  for (size_t i = 0; i < dims.size(); ++i) base += starts[i] * in_strides[i];
  StridedCopy(in.raw(), in_strides, base, out.raw(), RowMajorStrides(sizes), 0, sizes,
              ByteWidth(in.element_type()));
  return out;
}

StatusOr<Literal> EvalDynamicUpdateSlice(KernelArgs& k) {
  const Literal& upd = k.op(1);
  if (k.op(0).element_type() != upd.element_type() ||
      upd.shape().rank() != k.op(0).shape().rank())
    return InstrError(k.instr, "update " + upd.shape().ToString(false) + " does not match operand " +
                                   k.op(0).shape().ToString(false));
  std::vector<int64_t> dims = k.op(0).shape().dimensions();
  if (!k.shape().IsArray() || !k.shape().Compatible(k.op(0).shape()))
    return InstrError(k.instr, "result " + k.shape().ToString(false) + " does not match the operand " +
                                   k.op(0).shape().ToString(false));
  const auto& sizes = upd.shape().dimensions();
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ClampedStarts(k, 2, dims, sizes));
  const uint8_t* src = k.op(0).raw();
  Literal out = k.TakeOrAllocate(0);  // may take operand 0's buffer
  if (out.raw() != src && out.size_bytes() > 0) std::memcpy(out.raw(), src, out.size_bytes());
  std::vector<int64_t> out_strides = RowMajorStrides(dims);
  int64_t base = 0;
  for (size_t i = 0; i < dims.size(); ++i) base += starts[i] * out_strides[i];
  StridedCopy(upd.raw(), RowMajorStrides(sizes), 0, out.raw(), out_strides, base, sizes,
              ByteWidth(upd.element_type()));
  return out;
}

StatusOr<Literal> EvalPad(KernelArgs& k) {
  const Literal& in = k.op(0);
  const Literal& pad = k.op(1);
  MS_ASSIGN_OR_RETURN(Literal out, AllocateLike(k, in));
  const auto& cfg = k.instr.attrs().padding;
  int r = in.shape().rank();
  const auto& out_dims = k.shape().dimensions();
  if (static_cast<int>(cfg.size()) != r || static_cast<int>(out_dims.size()) != r ||
      pad.element_count() != 1 || pad.element_type() != in.element_type())
    return InstrError(k.instr, "padding config does not match operand " + in.shape().ToString(false));
  int64_t elem = ByteWidth(in.element_type());
  // Fill with the padding value.
  int64_t total = out.size_bytes();
  if (total > 0) {
    std::memcpy(out.raw(), pad.raw(), elem);
    for (int64_t filled = elem; filled < total;) {
      int64_t n = std::min(filled, total - filled);
      std::memcpy(out.raw() + filled, out.raw(), n);
      filled += n;
    }
  }
  // Operand element i of a dimension lands at low + i * (interior + 1);
  // negative low/high crop the operand.
  std::vector<int64_t> in_strides = RowMajorStrides(in.shape().dimensions());
  std::vector<int64_t> out_strides = RowMajorStrides(out_dims);
  std::vector<int64_t> src(r), dst(r), count(r);
  int64_t src_base = 0, dst_base = 0;
  for (int d = 0; d < r; ++d) {
    const PaddingDimension& p = cfg[d];
    int64_t n = in.shape().dimensions(d);
    if (p.interior < 0)
      return InstrError(k.instr, "negative interior padding in dimension " + std::to_string(d));
    int64_t expect = p.low + p.high + n + std::max<int64_t>(n - 1, 0) * p.interior;
    if (expect != out_dims[d])
      return InstrError(k.instr, "padded dimension " + std::to_string(d) + " should be " +
                                     std::to_string(expect) + " but the result has " +
                                     std::to_string(out_dims[d]));
    int64_t step = p.interior + 1;
    int64_t first = p.low >= 0 ? 0 : (-p.low + step - 1) / step;
    int64_t last = n - 1;
    while (last >= first && p.low + last * step >= out_dims[d]) --last;
    count[d] = std::max<int64_t>(0, last - first + 1);
    src_base += first * in_strides[d];
    dst_base += (p.low + first * step) * out_strides[d];
    src[d] = in_strides[d];
    dst[d] = out_strides[d] * step;
  }
  StridedCopy(in.raw(), src, src_base, out.raw(), dst, dst_base, count, elem);
  return out;
}

StatusOr<Literal> EvalConcatenate(KernelArgs& k) {
  if (k.ops.empty() || k.instr.attrs().dimensions.size() != 1)
    return InstrError(k.instr, "concatenate needs operands and one dimension");
  MS_ASSIGN_OR_RETURN(Literal out, AllocateLike(k, k.op(0)));
  int64_t dim = k.instr.attrs().dimensions[0];
  const auto& out_dims = k.shape().dimensions();
  int r = static_cast<int>(out_dims.size());
  if (dim < 0 || dim >= r) return InstrError(k.instr, "concatenate dimension out of range");
  std::vector<int64_t> out_strides = RowMajorStrides(out_dims);
  int64_t offset = 0;
  for (size_t i = 0; i < k.ops.size(); ++i) {
    const Literal& in = k.op(i);
    const auto& d = in.shape().dimensions();
    bool ok = in.element_type() == out.element_type() && static_cast<int>(d.size()) == r;
    for (int j = 0; ok && j < r; ++j)
      if (j != dim && d[j] != out_dims[j]) ok = false;
    if (!ok || offset + d[dim] > out_dims[dim])
      return InstrError(k.instr, "operand " + std::to_string(i) + " " + in.shape().ToString(false) +
                                     " does not fit the result " + k.shape().ToString(false));
    StridedCopy(in.raw(), RowMajorStrides(d), 0, out.raw(), out_strides, offset * out_strides[dim],
                d, ByteWidth(in.element_type()));
    offset += d[dim];
  }
  if (offset != out_dims[dim])
    return InstrError(k.instr, "operands fill " + std::to_string(offset) + " of " +
                                   std::to_string(out_dims[dim]) + " along the dimension");
  return out;
}

StatusOr<Literal> EvalReverse(KernelArgs& k) {
  const Literal& in = k.op(0);
  MS_ASSIGN_OR_RETURN(Literal out, AllocateLike(k, in));
  const auto& dims = in.shape().dimensions();
  if (k.shape().dimensions() != dims) return InstrError(k.instr, "reverse changes the shape");
  std::vector<int64_t> src = RowMajorStrides(dims);
  int64_t base = 0;
  for (int64_t d : k.instr.attrs().dimensions) {
    if (d < 0 || d >= static_cast<int64_t>(dims.size()))
      return InstrError(k.instr, "reverse dimension " + std::to_string(d) + " out of range");
    if (src[d] < 0) continue;  // listed twice
    base += (dims[d] - 1) * src[d];
    src[d] = -src[d];
  }
  StridedCopy(in.raw(), src, base, out.raw(), RowMajorStrides(dims), 0, dims,
              ByteWidth(in.element_type()));
  return out;
}

}  // namespace meshsplit::interp
