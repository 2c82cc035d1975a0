// `run` and `verify` on the `mpi` collectives backend: one process per
// partition under mpirun, rank r = partition r. Every rank parses the same
// module and partitions it the same way; rank 0 reads the full inputs and
// sends every rank its shard; each rank runs the interpreter with the MPI
// communicator; the per-device results are gathered to rank 0, which alone
// assembles (and compares, and writes) them.
// Without MPI in the build these entry points return a clear error.
#pragma once

#include <vector>

#include "ir/literal.h"
#include "ir/module.h"
#include "verify/run_spmd.h"
#include "verify/verify.h"
#include "support/status.h"

namespace meshsplit {

// Whether this binary was built with the MPI backend.
bool MpiBackendBuilt();

struct MpiRunOutcome {
  // Rank 0: `result` holds the assembled full result. Other ranks: empty.
  bool is_root = false;
  Literal result;
};

// `inputs`: on rank 0, its attempt at reading the full inputs; rank 0 cuts
// them into shards and sends each rank its own, so the other ranks read
// nothing (pass an empty vector). An error on any rank (and a world size
// other than request.num_partitions) comes back as the same error Status on
// every rank, and so does a mismatch between the ranks' programs (a
// fingerprint of the partitioned module text and the number of partitions is
// compared at start-up). A failure while the partitioned
// program runs (when the other ranks may be waiting in a collective) prints
// the message and ends the whole job with MPI_Abort (exit status 1).
StatusOr<MpiRunOutcome> RunModuleOnMpi(Module& module, StatusOr<std::vector<Literal>> inputs,
                                       const SpmdRunRequest& request);

struct MpiVerifyOutcome {
  bool is_root = false;
  // On rank 0 the verdict; on the other ranks only status/message are set
  // (the same as rank 0's).
  VerifyResult result;
};

// VerifyModule with the partitioned program run across the MPI ranks (world
// size must equal options.num_partitions). Every rank generates the same
// seeded inputs; rank 0 runs the reference and compares. Divergence
// localisation is not done on this backend (the message says so).
MpiVerifyOutcome VerifyModuleOnMpi(Module& module, const VerifyOptions& options);

// Starts MPI if needed and says whether this process is rank 0 (the one that
// reads inputs and writes outputs). Without MPI: true.
bool MpiIsRoot();

// Collective over all ranks (call it on every rank, or none): returns Ok
// when `local` is Ok on every rank, else the lowest failing rank's error
// ("rank r: ..."), on every rank. `run` uses it after rank 0 wrote the
// outputs, so a failed write fails the whole job. Without MPI: `local`.
Status AgreeAcrossRanks(const Status& local);

}  // namespace meshsplit
