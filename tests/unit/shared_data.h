// Optional test data outside the repository: the `shared` directory beside
// the clone (XLA's test corpus under conformance/xla, real models under
// models/). A unit test that reads it starts with
// MESHSPLIT_SKIP_WITHOUT_SHARED("conformance/xla"), which skips the test with
// one line naming what is missing when a bare clone has no ../shared.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace meshsplit::testdata {

// `sub` (a path relative to the shared directory) as an absolute path.
inline std::filesystem::path SharedPath(const std::string& sub) {
  return (std::filesystem::path(MESHSPLIT_SHARED_DIR) / sub).lexically_normal();
}

// The skip reason: the same words as the shell and lit tests use, so
// tools/test.sh can list them.
inline std::string MissingShared(const std::string& sub) {
  return "skipped: needs ../shared/" + sub + " (absent: " + SharedPath(sub).string() +
         "); README, 'Optional test data', says how to get it";
}

}  // namespace meshsplit::testdata

// Skips the current test when ../shared/`sub` does not exist.
#define MESHSPLIT_SKIP_WITHOUT_SHARED(sub)                           \
  do {                                                               \
    if (!std::filesystem::exists(::meshsplit::testdata::SharedPath(sub))) \
      GTEST_SKIP() << ::meshsplit::testdata::MissingShared(sub);     \
  } while (0)
