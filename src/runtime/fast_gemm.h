// A single-precision GEMM with an AVX-512 micro-kernel, used instead of
// OpenBLAS when OpenBLAS did not recognise the CPU and fell back to its
// generic SSE3 ("Prescott") kernels, which are several times slower.
#pragma once

#include <cstdint>

namespace meshsplit::interp {

// Row-major C = op(A) * op(B) (+ C when `accumulate`), op = transpose when
// ta/tb. Returns false (doing nothing) when this path does not apply; the
// caller then uses BLAS.
bool FastSgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

}  // namespace meshsplit::interp
