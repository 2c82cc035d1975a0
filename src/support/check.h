// Internal invariants. A failing MS_CHECK is a bug in meshsplit, never a user
// error: it prints file:line and the condition, then aborts.
#pragma once

#include <sstream>
#include <string>

namespace meshsplit::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond,
                              const std::string& message);
}  // namespace meshsplit::internal

#define MS_CHECK(cond)                                                   \
  do {                                                                   \
    if (!(cond))                                                         \
      ::meshsplit::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define MS_CHECK_MSG(cond, msg)                                          \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::ostringstream _ms_os;                                         \
      _ms_os << msg;                                                     \
      ::meshsplit::internal::CheckFailed(__FILE__, __LINE__, #cond,      \
                                         _ms_os.str());                  \
    }                                                                    \
  } while (0)
