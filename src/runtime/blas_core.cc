// OpenBLAS kernel choice at start-up (see blas_core.h).
#include "runtime/blas_core.h"

#include <cctype>
#include <cstdlib>

extern "C" {
char* openblas_get_corename(void);
// DYNAMIC_ARCH builds export these: quit forgets the chosen kernel table,
// init picks one again (reading OPENBLAS_CORETYPE). Weak, so a build
// without them links and simply never switches.
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace meshsplit {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The best OpenBLAS kernel set this CPU can run, by its features; "" when
// nothing beats the generic kernels.
std::string CoreForCpuFeatures() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
  return "";
}

std::string Choose() {
  const std::string detected = BlasCoreName();
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return detected + " (OPENBLAS_CORETYPE)";
  if (Lower(detected) != "prescott") return detected + " (as OpenBLAS detected)";
  const std::string want = CoreForCpuFeatures();
  if (want.empty() || !SetBlasCore(want)) return detected + " (as OpenBLAS detected)";
  return BlasCoreName() + " (chosen by CPU features; OpenBLAS detected " + detected + ")";
}

// Runs while the program starts (after OpenBLAS, a shared library, has
// initialised itself), so no BLAS call can be under way.
const std::string& Choice() {
  static const std::string choice = Choose();
  return choice;
}
[[maybe_unused]] const bool kChosenAtStartUp = !Choice().empty();

}  // namespace

std::string BlasCoreName() {
  const char* name = openblas_get_corename();
  return name != nullptr ? std::string(name) : std::string();
}

std::string BlasCoreChoice() { return Choice(); }

bool SetBlasCore(const std::string& core) {
  if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) return false;
  const char* old = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = old != nullptr ? old : "";
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  // Leave the environment as it was: child processes choose for themselves.
  if (old != nullptr) setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  else unsetenv("OPENBLAS_CORETYPE");
  return Lower(BlasCoreName()) == Lower(core);
}

}  // namespace meshsplit
