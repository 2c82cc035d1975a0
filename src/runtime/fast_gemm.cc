// FastSgemm: packed, cache-blocked GEMM whose 8x32 micro-kernel keeps 16
// AVX-512 accumulators in registers. Enabled only when the CPU has AVX-512F
// and OpenBLAS picked its generic Prescott kernels (an unknown CPU model).
#include "runtime/fast_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/fast_scalar.h"

extern "C" char* openblas_get_corename(void);

namespace meshsplit::interp {
namespace {

constexpr int64_t kMr = 8, kNr = 32, kKc = 256, kMc = 128, kNc = 1024;

bool UseFastSgemm() {
  static const bool use = [] {
    if (!__builtin_cpu_supports("avx512f")) return false;
    const char* name = openblas_get_corename();
    if (name == nullptr) return false;
    std::string s(name);
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s == "prescott";
  }();
  return use && ScalarProgramsEnabled();
}

// acc[8x32] = sum_p ap[p*8 + i] * bp[p*32 + j]; then C tile += acc.
__attribute__((target("avx512f"))) void MicroKernel(int64_t kc, const float* ap, const float* bp,
                                                    float* c, int64_t ldc, int64_t mr, int64_t nr) {
  // Sixteen named accumulators so they stay in registers (an indexed array
  // gets spilled to the stack).
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
         c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00,
         c70 = c00, c71 = c00;
  for (int64_t p = 0; p < kc; ++p) {
    __m512 b0 = _mm512_loadu_ps(bp + p * kNr);
    __m512 b1 = _mm512_loadu_ps(bp + p * kNr + 16);
    const float* a = ap + p * kMr;
#define MS_FMA_ROW(i)                         \
    {                                         \
      __m512 av = _mm512_set1_ps(a[i]);       \
      c##i##0 = _mm512_fmadd_ps(av, b0, c##i##0); \
      c##i##1 = _mm512_fmadd_ps(av, b1, c##i##1); \
    }
    MS_FMA_ROW(0) MS_FMA_ROW(1) MS_FMA_ROW(2) MS_FMA_ROW(3)
    MS_FMA_ROW(4) MS_FMA_ROW(5) MS_FMA_ROW(6) MS_FMA_ROW(7)
#undef MS_FMA_ROW
  }
  __m512 acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                        {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  if (mr == kMr && nr == kNr) {
    for (int i = 0; i < kMr; ++i) {
      float* row = c + i * ldc;
      _mm512_storeu_ps(row, _mm512_add_ps(_mm512_loadu_ps(row), acc[i][0]));
      _mm512_storeu_ps(row + 16, _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[i][1]));
    }
    return;
  }
  alignas(64) float tile[kMr][kNr];
  for (int i = 0; i < kMr; ++i) {
    _mm512_store_ps(tile[i], acc[i][0]);
    _mm512_store_ps(tile[i] + 16, acc[i][1]);
  }
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) c[i * ldc + j] += tile[i][j];
}

}  // namespace

bool FastSgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (m * n * k < 32 * 32 * 32 || !UseFastSgemm()) return false;
  if (!accumulate)
    for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, n * sizeof(float));
  auto A = [&](int64_t i, int64_t p) { return ta ? a[p * lda + i] : a[i * lda + p]; };
  auto B = [&](int64_t p, int64_t j) { return tb ? b[j * ldb + p] : b[p * ldb + j]; };
  std::vector<float> bpack, apack;
  for (int64_t jc = 0; jc < n; jc += kNc) {
    int64_t nc = std::min(kNc, n - jc);
    int64_t npanels = (nc + kNr - 1) / kNr;
    for (int64_t pc = 0; pc < k; pc += kKc) {
      int64_t kc = std::min(kKc, k - pc);
      bpack.assign(npanels * kc * kNr, 0.0f);
      for (int64_t jp = 0; jp < npanels; ++jp) {
        float* dst = bpack.data() + jp * kc * kNr;
        int64_t j0 = jc + jp * kNr, jn = std::min(kNr, jc + nc - j0);
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t j = 0; j < jn; ++j) dst[p * kNr + j] = B(pc + p, j0 + j);
      }
      for (int64_t ic = 0; ic < m; ic += kMc) {
        int64_t mc = std::min(kMc, m - ic);
        int64_t mpanels = (mc + kMr - 1) / kMr;
        apack.assign(mpanels * kc * kMr, 0.0f);
        for (int64_t ip = 0; ip < mpanels; ++ip) {
          float* dst = apack.data() + ip * kc * kMr;
          int64_t i0 = ic + ip * kMr, in = std::min(kMr, ic + mc - i0);
          for (int64_t i = 0; i < in; ++i)
            for (int64_t p = 0; p < kc; ++p) dst[p * kMr + i] = A(i0 + i, pc + p);
        }
        for (int64_t jp = 0; jp < npanels; ++jp) {
          int64_t j0 = jc + jp * kNr, jn = std::min(kNr, jc + nc - j0);
          for (int64_t ip = 0; ip < mpanels; ++ip) {
            int64_t i0 = ic + ip * kMr, in = std::min(kMr, ic + mc - i0);
            MicroKernel(kc, apack.data() + ip * kc * kMr, bpack.data() + jp * kc * kNr,
                        c + i0 * ldc + j0, ldc, in, jn);
          }
        }
      }
    }
  }
  return true;
}

}  // namespace meshsplit::interp
