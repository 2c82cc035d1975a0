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

// Calls MPI_Init_thread (MPI_THREAD_SINGLE) on construction (unless MPI is
// already initialised) and MPI_Finalize on destruction (only if it
// initialised it). On
// MPI_COMM_WORLD (and so on every communicator split from it) it installs an
// error handler that prints which rank saw which MPI error and then ends the
// whole job with MPI_Abort: an MPI error here almost always means that a peer
// died, and no caller could recover from it.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

// Guards against waiting forever for a peer that is alive but never comes
// (stopped, deadlocked, spinning outside MPI, unreachable host): a rank that
// spends longer than the timeout inside one MpiWait scope prints a message
// naming the wait and exits with status 1 without finalising MPI, which
// makes mpirun end every other rank. A watchdog thread notices it within a
// tenth of the timeout (at most 0.5 s) after the timeout passes; the scope
// itself only stores a few words, since it wraps every collective. (A peer that dies is noticed by mpirun
// itself, in about a second.) The timeout comes from the environment
// variable MESHSPLIT_MPI_TIMEOUT in seconds (default 300; 0 disables) and is
// per wait, not per run, so it only has to exceed the longest stretch one
// rank can compute while another waits for it.
class MpiWait {
 public:
  // `what` must outlive the scope (a string literal).
  explicit MpiWait(const char* what);
  ~MpiWait();
  MpiWait(const MpiWait&) = delete;
  MpiWait& operator=(const MpiWait&) = delete;

  // The timeout in seconds (0: none). Set by tests; the first read of the
  // environment happens on the first MpiWait otherwise.
  static double timeout_seconds();
  static void set_timeout_seconds(double seconds);

 private:
  const char* previous_;
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
// of a signature before each collective, which carries the data itself when
// it is small; disable with set_check_agreement for speed once a program is
// trusted).
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

  // Agrees on the whole history of collective arguments so far (see below:
  // an inlined collective compares only kWordHashMask bits of it). Call it
  // before trusting the results of a run; the same verdict on every rank.
  // Ok when the check is off.
  Status CheckHistory();

  // The agreement is one exchange of a fixed-size envelope per rank between
  // every pair of ranks (fixed so that ranks that disagree on the sizes
  // still make matching MPI calls; point to point up to 8 ranks, else
  // MPI_Allgather over the world): 8 bytes, then a 16-bit word. The word is
  // 0 when the rank's own checks failed, else kWordOk, kWordInline when the 8 bytes
  // carry the payload (collectives of up to kInlineBytes, which then cost one
  // exchange, not two), and 14 bits of the history: a running hash of the
  // signatures of every collective so far. When the payload is not inlined
  // the 8 bytes carry the whole 64-bit history. So an inlined collective
  // whose arguments differ between ranks slips through with probability
  // 2^-14, but the histories stay different, so the next collective catches
  // it again (and the next non-inlined one or CheckHistory for certain).
  // The envelope is this small because its size sets the latency of every
  // small collective: Open MPI's shared-memory transport exchanges up to 10
  // bytes per rank in about 0.38 us and 16 bytes in about 0.48 us (np 2,
  // MPI_Allgather, best of 400 rounds).
  static constexpr int64_t kInlineBytes = 8;
  static constexpr int64_t kEnvelopeBytes = kInlineBytes + 2;
  static constexpr uint16_t kWordOk = 0x8000;
  static constexpr uint16_t kWordInline = 0x4000;
  static constexpr uint16_t kWordHashMask = 0x3fff;

 private:
  // What this rank knows about one replica-group list: its own group, and
  // the communicator for it, split from the world on first use after an
  // agreement (so every rank splits at the same point).
  struct Group {
    MPI_Comm comm = MPI_COMM_NULL;
    GroupMembership membership;
    bool equal_sizes = true;
    uint64_t hash = 0;  // of the list, for signatures
  };

  // Checks `local` and that every rank has the same history of signatures
  // (this `signature` appended); returns the same verdict on every rank.
  // With `inline_bytes` >= 0 (at most kInlineBytes; `payload` may be null
  // when `local` failed) the payload rides along and, on success, Inline(d)
  // is device d's copy (8-byte aligned). With `per_destination` (only where
  // InlinedPerDestination holds), `payload` holds kInlineBytes for each
  // world rank, payload[q] goes to rank q only, and Inline(d) is what device
  // d sent to this rank.
  Status Agree(uint64_t signature, const Status& local, const void* payload = nullptr,
               int64_t inline_bytes = -1, bool per_destination = false);
  // The error of an agreement that failed: `local`'s own, else the first
  // device whose own checks failed, else the first whose envelope differs.
  Status Disagreement(const Status& local, uint16_t word, const unsigned char* mine,
                      bool inlined) const;
  const unsigned char* Inline(int64_t device) const {
    return reinterpret_cast<const unsigned char*>(&inline_[device]);
  }
  // Whether a payload of `bytes` (the same on every rank once agreed) goes
  // through the agreement envelope.
  bool Inlined(int64_t bytes) const { return check_agreement_ && bytes <= kInlineBytes; }
  // Whether parts of `bytes` that differ per destination (reduce-scatter and
  // all-to-all) go through the agreement envelope: only its point-to-point
  // forms send each rank an envelope of its own.
  bool InlinedPerDestination(int64_t bytes) const {
    return Inlined(bytes) && UsesPointToPointAgreement();
  }
  // This rank's group in `groups`, validated once per distinct list
  // (FindGroup is O(devices) and allocates); the last list used is
  // remembered, since programs repeat the same groups back to back.
  Status Lookup(const CommGroups& groups, std::string_view op, bool require_equal_sizes,
                Group** out);
  // Whether the agreement exchanges its envelopes as point-to-point messages
  // on agreement_comm_ (2 to 8 ranks; one MPI_Sendrecv at 2) rather than
  // with MPI_Allgather over the world.
  bool UsesPointToPointAgreement() const;
  // `group` with its communicator (split on first use). A collective MPI
  // call the first time: call it only after an agreement.
  const Group* Comm(Group* group);
  // The sliced all-reduce of a group small enough for point-to-point
  // exchanges (`comm`, this member at position p of g, slices of `per`
  // elements), pipelined in pieces. REQUIRES: the arguments were agreed.
  void AllReduceSlicedLinear(const void* input, void* output, PrimitiveType type,
                             ReductionKind kind, MPI_Comm comm, int64_t g, int64_t p,
                             int64_t per, int64_t count);

  int64_t rank_ = 0;
  int64_t size_ = 1;
  bool check_agreement_ = true;
  MPI_Comm agreement_comm_ = MPI_COMM_NULL;
  std::map<CommGroups, std::unique_ptr<Group>> groups_;
  const CommGroups* last_key_ = nullptr;  // a key of groups_
  Group* last_group_ = nullptr;
  static constexpr uint64_t kHistorySeed = 0x243f6a8885a308d3ull;
  uint64_t history_ = kHistorySeed;
  std::vector<uint64_t> inline_;  // one inlined payload per device
  std::vector<const void*> inputs_;
  std::vector<MPI_Request> requests_;
  std::vector<unsigned char> send_, recv_, envelopes_;
  // AllToAll's geometry (block and output dims, strides), kept for reuse.
  struct AllToAllScratch {
    std::vector<int64_t> block, out_dims, in_strides, block_strides, out_strides;
  } a2a_;
  // The envelope to each rank when the payload differs per destination.
  std::vector<unsigned char> outgoing_;
  // Per-destination payloads (kInlineBytes per world rank), filled by the
  // caller of Agree.
  std::vector<unsigned char> per_destination_;
};

}  // namespace meshsplit
