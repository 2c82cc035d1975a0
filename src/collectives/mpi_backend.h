// The `mpi` collectives backend: one process per partition under mpirun,
// rank r = device r. Built only when CMake finds MPI, as the separate
// library ms_collectives_mpi (which defines MESHSPLIT_HAVE_MPI for its
// users); include this header only then. Results are bit-identical to the
// threads backend: reductions gather the contributions and fold them with
// the same kernel in group order (reduction.h), never with MPI's own
// reduction order, except where the order cannot matter (integer and pred
// min/max/and/or/xor, and wrapping integer add/mul).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectives/collectives.h"

namespace meshsplit {

// Calls MPI_Init_thread on construction (unless MPI is already initialised)
// and MPI_Finalize on destruction (only if it initialised it).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

// This rank's endpoint over MPI_COMM_WORLD. REQUIRES: MPI is initialised.
// Communicators for replica groups are split from the world the first time
// a group list is used and cached (every rank sees the same sequence of
// collectives, so every rank splits at the same point).
//
// Unlike the threads backend, Abort() cannot wake the other ranks with an
// error Status: it prints the message and calls MPI_Abort, which ends every
// rank of the job with exit status 1. Argument mismatches between ranks are
// still reported as an error Status on every rank (one small MPI_Allgather
// of a signature before each collective; disable with set_check_agreement
// for speed once a program is trusted).
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();
  ~MpiCommunicator() override;

  int64_t device() const override { return rank_; }
  int64_t num_devices() const override { return size_; }

  Status AllReduce(const void* input, void* output, PrimitiveType type,
                   int64_t count, ReductionKind kind,
                   const CommGroups& groups) override;
  Status AllGather(const void* input, void* output, PrimitiveType type,
                   std::span<const int64_t> dims, int64_t dimension,
                   const CommGroups& groups) override;
  Status ReduceScatter(const void* input, void* output, PrimitiveType type,
                       std::span<const int64_t> dims, int64_t dimension,
                       ReductionKind kind, const CommGroups& groups) override;
  Status AllToAll(const void* input, void* output, PrimitiveType type,
                  std::span<const int64_t> dims, int64_t split_dimension,
                  int64_t concat_dimension, const CommGroups& groups) override;
  Status AllToAllTuple(std::span<const void* const> inputs,
                       std::span<void* const> outputs, PrimitiveType type,
                       int64_t count, const CommGroups& groups) override;
  Status CollectivePermute(const void* input, void* output, PrimitiveType type,
                           int64_t count,
                           const SourceTargetPairs& pairs) override;
  Status Barrier() override;
  void Abort(const std::string& message) override;

  void set_check_agreement(bool check) { check_agreement_ = check; }

 private:
  struct Group {
    MPI_Comm comm = MPI_COMM_NULL;
    GroupMembership membership;
  };

  // Checks `local` and that every rank passes the same `signature`; returns
  // the same verdict on every rank.
  Status Agree(uint64_t signature, const Status& local);
  // The split communicator of this rank's group in `groups` (cached).
  StatusOr<const Group*> GetGroup(const CommGroups& groups,
                                  std::string_view op,
                                  bool require_equal_sizes);

  int64_t rank_ = 0;
  int64_t size_ = 1;
  bool check_agreement_ = true;
  std::map<CommGroups, std::unique_ptr<Group>> groups_;
  std::vector<unsigned char> send_, recv_;
};

}  // namespace meshsplit
