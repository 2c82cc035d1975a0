// The clock the compile-time benchmarks read.
#pragma once

#include <ctime>

namespace meshsplit {

// Thread CPU time: the machine running this is shared, wall time is noise.
inline double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace meshsplit
