// OpenBLAS kernel choice at start-up. Debian's OpenBLAS is built with
// DYNAMIC_ARCH: it picks its kernels by CPU model when it loads, and on a
// model newer than its release it falls back to the generic SSE3
// ("Prescott") kernels, several times slower than the AVX2 or AVX-512 ones
// the CPU can run. Unless OPENBLAS_CORETYPE is set, the runtime re-picks by
// CPU features once, while the program starts, before any BLAS call.
#pragma once

#include <string>

namespace meshsplit {

// The kernel set OpenBLAS runs now ("Haswell", "SkylakeX", "Zen", ...), or
// "" when the library does not say.
std::string BlasCoreName();

// What the start-up choice did, for benchmarks and `--version`-style
// reports: e.g. "Zen (as OpenBLAS detected)", "Haswell (chosen by CPU
// features; OpenBLAS detected Prescott)", "Prescott (OPENBLAS_CORETYPE)".
std::string BlasCoreChoice();

// Switches OpenBLAS to the kernels of `core` (an OPENBLAS_CORETYPE name).
// Returns false, changing nothing, when this OpenBLAS cannot switch (not
// built with DYNAMIC_ARCH). REQUIRES: no BLAS call is running in another
// thread.
bool SetBlasCore(const std::string& core);

}  // namespace meshsplit
