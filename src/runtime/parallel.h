// Intra-op parallelism (internal to src/runtime): a small pool of worker
// threads that one device's kernels split large loops over, so that a
// single device on a multi-core machine uses every core. The SPMD executor
// gives each of N devices cores / N threads (as it does OpenBLAS threads),
// so devices never oversubscribe the machine.
#pragma once

#include <functional>

namespace meshsplit::interp {

// Threads a kernel may run on, the calling one included: the machine's
// hardware threads (or MESHSPLIT_INTRA_OP_THREADS) unless set (RunOnDevices
// sets cores / devices while its devices run, the MPI runner cores / ranks;
// at least 1).
int IntraOpThreads();
void SetIntraOpThreads(int threads);

// Runs fn(0) .. fn(parts - 1) on up to IntraOpThreads() threads (the caller
// takes parts too) and returns when every part has run. Parts must be safe
// to run concurrently. When another caller holds the pool (another device's
// kernel), every part runs on the calling thread instead.
void ParallelFor(int parts, const std::function<void(int)>& fn);

}  // namespace meshsplit::interp
