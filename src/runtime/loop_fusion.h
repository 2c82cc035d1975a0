// Fused elementwise loops, an execution plan of the interpreter (internal to
// src/runtime). Chains of elementwise ops (arithmetic, compare, select,
// clamp, convert, copy) over one shape, with broadcasts, reshapes and
// scalars of outside values at their leaves, run as one loop over memory:
// chunk by chunk, every op of the chain runs on an L1-sized span of its
// operands, and only the chain's result is written to memory. The
// intermediate values and the broadcasts are never materialised.
//
// The module is not changed (what `partition` prints stays plain HLO): the
// plan is built when a computation first runs on an interpreter. Each op of
// a chain runs through ElementwiseSpan (kernels.h), the very function the
// unfused kernels run, in the same order of ops per element, so fused and
// unfused results are bit-identical.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/instruction.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {

struct LoopFusion {
  // A value read from outside the loop.
  struct Leaf {
    int input = 0;  // index into `inputs`
    PrimitiveType type = PrimitiveType::F32;
    int64_t elem = 4;
    // Read at the loop's own linear index (same element count and order).
    bool direct = false;
    // One element stands for every index (a scalar, or a broadcast of one).
    bool constant = false;
    // Neither: the loop's dims with stride-compatible neighbours merged
    // (size-1 dims dropped) and the input's stride along each (0 along a
    // broadcast dim), in elements.
    std::vector<int64_t> dims, strides;
  };
  struct Node {
    const Instruction* instr = nullptr;
    std::vector<int> args;  // >= 0: an earlier node; < 0: leaf -1 - arg
    PrimitiveType type = PrimitiveType::F32;
    int slot = -1;  // scratch span of the result; -1 for the root
  };
  const Instruction* root = nullptr;
  std::vector<const Instruction*> inputs;  // distinct, in first-use order
  // Per input: every leaf reading it is direct, so the output may take its
  // buffer (each chunk is read before it is written).
  std::vector<bool> input_direct_only;
  std::vector<Leaf> leaves;
  std::vector<Node> nodes;  // operands first, the root last
  int slots = 0;
};

struct LoopFusionPlan {
  std::vector<std::shared_ptr<const LoopFusion>> loops;
  // Instructions computed inside a loop (not its root): they never run on
  // their own and hold no value.
  std::unordered_set<const Instruction*> absorbed;
};

// Groups the live instructions of a computation, `order` (operands first),
// into fused loops. A loop's non-root ops are used only inside it and never
// are `root` (the computation's result); broadcasts and reshapes at its
// leaves may also be read by other loops, and run on their own only when
// something other than a loop reads them. Single ops stay unfused. Nothing
// is fused when LoopFusionEnabled() is false.
LoopFusionPlan PlanLoopFusions(const std::vector<const Instruction*>& order,
                               const Instruction* root);

// Runs `loop`: k.instr is its root and k.ops the values of loop.inputs in
// order (k.donatable as for any kernel).
StatusOr<Literal> RunLoopFusion(const LoopFusion& loop, KernelArgs& k);

// On by default; the environment variable MESHSPLIT_LOOP_FUSION=0 turns it
// off at start-up (for measuring), tests switch it to compare both paths.
// Read when a computation's plan is built.
void SetLoopFusionEnabled(bool on);
bool LoopFusionEnabled();

}  // namespace meshsplit::interp
