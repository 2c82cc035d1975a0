// The collectives interface the SPMD runtime calls: one Communicator per
// device (partition), with XLA's cross-partition semantics for all-reduce,
// all-gather, reduce-scatter, all-to-all and collective-permute over raw
// row-major buffers. Backends: threads_backend.h (N virtual devices in one
// process) and, later, MPI. Every backend must give bit-identical results, so
// reductions always combine contributions in one fixed order (below).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/shape.h"
#include "support/status.h"

namespace meshsplit {

// How an all-reduce / reduce-scatter combines contributions. The caller
// classifies XLA's `to_apply` computation (add, multiply, minimum, maximum,
// and, or, xor of its two parameters) into one of these.
enum class ReductionKind { kAdd, kMul, kMin, kMax, kAnd, kOr, kXor };

std::string_view ReductionKindName(ReductionKind kind);  // "add", "mul", ...

// Device groups as ReplicaGroups::Expand() returns them: each inner vector
// lists the device ids of one group, in group order. An empty list means one
// group holding every device in id order 0..N-1 (XLA's `replica_groups={}`).
// Non-empty groups must be disjoint, cover every device, and (except for
// all-reduce) all have the same size.
using CommGroups = std::vector<std::vector<int64_t>>;

// collective-permute's `source_target_pairs={{0,1},{1,2}}`.
using SourceTargetPairs = std::vector<std::pair<int64_t, int64_t>>;

// Fixed reduction order (the contract every backend keeps): within a group
// with members m0, m1, ..., m(G-1) (group order, not id order), every element
// of the result is
//     ((x_m0 op x_m1) op x_m2) ... op x_m(G-1)
// evaluated left to right, independently of thread timing. This differs from
// XLA CPU only in that XLA starts from the identity (0 op x_m0 ...), which can
// turn a -0.0 sum into +0.0; we start from the first contribution.
// Element arithmetic is the element type's own, as XLA CPU does it:
// - f16/bf16: each step is computed in f32 and rounded back to the 16-bit
//   type (round to nearest even) before the next step, i.e. pairwise
//   accumulation in the element type, not a wide accumulator.
// - signed integers wrap around (two's complement) on overflow.
// - pred: add is or, mul is and (C++ bool arithmetic, as XLA's evaluator).
// - kMin/kMax on floats follow HLO minimum/maximum: NaN propagates (the first
//   NaN met, in group order, is kept); min(-0,+0) and max(-0,+0) return the
//   earlier operand.
// - kAnd/kOr/kXor: pred and integer types only (bitwise for integers).
// - complex (c64/c128): kAdd and kMul only.

// One device's endpoint. Every device of the world must call the same
// collectives in the same order with the same arguments (except buffers):
// a mismatch of op, element type, sizes, groups or pairs is reported as an
// error Status on every device, never a hang or a crash. Input and output
// may be the same buffer (in-place) unless stated otherwise. All methods
// block until the collective is complete for this device.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int64_t device() const = 0;
  virtual int64_t num_devices() const = 0;

  // all-reduce: every member of a group receives the reduction of the
  // group's `count`-element inputs, combined in the fixed order above.
  virtual Status AllReduce(const void* input, void* output, PrimitiveType type,
                           int64_t count, ReductionKind kind,
                           const CommGroups& groups) = 0;

  // all-gather along `dimension`: the input is this device's array of shape
  // `dims` (row-major); the output has shape `dims` with dims[dimension]
  // multiplied by the group size G, and holds the members' inputs
  // concatenated along `dimension` in group order (member at position i
  // occupies [i*dims[dimension], (i+1)*dims[dimension]) of that dimension).
  virtual Status AllGather(const void* input, void* output, PrimitiveType type,
                           std::span<const int64_t> dims, int64_t dimension,
                           const CommGroups& groups) = 0;

  // reduce-scatter along `dimension`: the input of shape `dims` is reduced
  // over the group (fixed order) and cut into G equal blocks along
  // `dimension`; the member at position i receives block i, of shape `dims`
  // with dims[dimension] / G. REQUIRES (else an error): dims[dimension] % G
  // == 0.
  virtual Status ReduceScatter(const void* input, void* output,
                               PrimitiveType type,
                               std::span<const int64_t> dims,
                               int64_t dimension, ReductionKind kind,
                               const CommGroups& groups) = 0;

  // all-to-all (array form; XLA's `dimensions={d}` is split = concat = d):
  // each member cuts its input of shape `dims` into G equal blocks along
  // `split_dimension` and sends block j to the member at position j; each
  // member concatenates the blocks it receives along `concat_dimension`, in
  // the senders' group order. Output shape: `dims` with dims[split] / G, then
  // dims[concat] * G. REQUIRES (else an error): dims[split] % G == 0.
  virtual Status AllToAll(const void* input, void* output, PrimitiveType type,
                          std::span<const int64_t> dims,
                          int64_t split_dimension, int64_t concat_dimension,
                          const CommGroups& groups) = 0;

  // all-to-all (tuple form): G inputs and G outputs of `count` elements each;
  // output j of the member at position r is input r of the member at
  // position j. REQUIRES (else an error): inputs.size() == outputs.size() ==
  // G.
  virtual Status AllToAllTuple(std::span<const void* const> inputs,
                               std::span<void* const> outputs,
                               PrimitiveType type, int64_t count,
                               const CommGroups& groups) = 0;

  // collective-permute: for each pair (s, t), device t receives device s's
  // `count`-element input; a device that is no pair's target receives zeros.
  // Sources and targets must each be unique and in [0, num_devices).
  virtual Status CollectivePermute(const void* input, void* output,
                                   PrimitiveType type, int64_t count,
                                   const SourceTargetPairs& pairs) = 0;

  // Returns once every device has called Barrier().
  virtual Status Barrier() = 0;

  // Declares that this device failed (e.g. its interpreter hit an error): all
  // devices waiting in or later entering a collective return an error Status
  // that carries `message`, instead of waiting forever. Idempotent; the
  // first message wins. Safe to call from any thread.
  virtual void Abort(const std::string& message) = 0;
};

// ---------------------------------------------------------------------------
// Helpers shared by the backends (collectives.cc). They are pure functions of
// their arguments, so every device reaches the same verdict.

// The group containing `device`, and its position in that group.
struct GroupMembership {
  std::vector<int64_t> members;  // device ids in group order
  int64_t position = 0;          // index of `device` in members
};

// Checks `groups` (ids in range, disjoint, covering all devices; equal sizes
// when `require_equal_sizes`) and returns `device`'s group. `op` names the
// collective in error messages.
StatusOr<GroupMembership> FindGroup(const CommGroups& groups,
                                    int64_t num_devices, int64_t device,
                                    std::string_view op,
                                    bool require_equal_sizes);

// Checks that the reduction kind applies to the element type.
Status CheckReduction(PrimitiveType type, ReductionKind kind);

// Checks ids in range and unique sources / unique targets.
Status CheckSourceTargetPairs(const SourceTargetPairs& pairs,
                              int64_t num_devices);

// Product of dims[begin, end).
int64_t Product(std::span<const int64_t> dims, size_t begin, size_t end);

// Checks a shape and a dimension index for an op ("all-gather", ...).
Status CheckDims(std::span<const int64_t> dims, int64_t dimension,
                 std::string_view op, std::string_view what);

// Copies a block of shape `block` between two row-major arrays: element
// index i of the block is read at src + sum(i_k * src_strides[k]) and written
// at dst + sum(i_k * dst_strides[k]) (strides in elements). Contiguous
// trailing runs are copied with memcpy.
void CopyStridedBlock(const void* src, std::span<const int64_t> src_strides,
                      void* dst, std::span<const int64_t> dst_strides,
                      std::span<const int64_t> block, int64_t elem_bytes);

}  // namespace meshsplit
