// The reference semantics for verifying a partitioned module whose original
// is not a single-device program (it has manual regions, collectives,
// partition-id, manual or unreduced entry values, infeed or outfeed): the
// original runs on N virtual devices in which
//  - every non-manual value is whole on every device;
//  - SPMDFullToShardShape gives device d its piece of the whole operand, cut
//    by the operand's sharding (what the manual region sees);
//  - SPMDShardToFullShape assembles the pieces of the devices of each manual
//    group (an all-gather by the result's sharding);
//    one rule covers both and nested / partially manual regions: device d's
//    tile of the operand under the operand's sharding is its tile of the
//    result under the result's sharding;
//  - partition-id is the device id, replica-id is 0, and collectives run
//    across the N devices with XLA's meaning (a collective without
//    channel_id is cross-replica: one replica, so each device alone);
//  - infeed returns deterministic data (whole; a partitioned infeed gets its
//    piece by the original infeed's sharding, or the whole value when it
//    kept the global shape) and outfeeds are recorded (a partitioned outfeed
//    must send its piece by the original outfeed's sharding).
// The partitioned program must then produce, per manual group, the same
// logical outputs and outfeeds.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/literal.h"
#include "ir/module.h"
#include "runtime/collective_ops.h"
#include "runtime/executor.h"
#include "support/status.h"

namespace meshsplit {

// Why `module` needs the N-device reference run ("" if one device does):
// names the first collective / partition-id / replica-id / SPMD custom-call
// / infeed / outfeed or manual / unreduced sharding.
std::string DeviceReferenceReason(const Module& module);

// Infeed data and outfeed records of one run, shared by its devices (each
// device touches only its own slots, so no locking is needed).
class FeedState {
 public:
  // `original` is the unpartitioned module (after propagation): its infeeds'
  // shapes and shardings define the data. `reference`: devices get whole
  // values, else their pieces.
  FeedState(const Module& original, int64_t num_devices, uint64_t seed, bool reference);

  StatusOr<Literal> Infeed(const Instruction& instr, int64_t device);
  void RecordOutfeed(const Instruction& instr, int64_t device, Literal data);

  struct Record {
    std::string name;  // the outfeed instruction
    Literal data;
  };
  // Per device, in call order.
  const std::vector<std::vector<Record>>& outfeeds() const { return outfeeds_; }

 private:
  const Instruction* OriginalInfeed(const std::string& name) const;

  std::map<std::string, const Instruction*> infeeds_;  // original infeeds by name
  int64_t n_;
  uint64_t seed_;
  bool reference_;
  std::vector<std::map<std::string, int64_t>> infeed_calls_;  // per device
  std::vector<std::vector<Record>> outfeeds_;
};

// SpmdRunOptions for one run: single-replica collectives and hooks for the
// SPMD custom-calls (`reference` only) and infeed / outfeed through `feeds`.
SpmdRunOptions ReferenceRunOptions(FeedState* feeds, bool reference);

}  // namespace meshsplit
