// Internal to src/runtime: the interface between the interpreter driver
// (interpreter.cc) and the kernels, which are split by op family into
// kernels_*.cc. Also small shared helpers: typed dispatch, index iteration,
// f32 staging of 16-bit floats and recognition of simple reducer
// computations (the fast paths of reduce, reduce-window, scatter, ...).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "ir/computation.h"
#include "support/saturating_convert.h"
#include "ir/custom_call_targets.h"
#include "ir/float8.h"
#include "ir/instruction.h"
#include "ir/literal.h"
#include "runtime/interpreter.h"
#include "support/float16.h"
#include "support/status.h"

namespace meshsplit::interp {

struct LoopFusion;  // loop_fusion.h

class Interpreter {
 public:
  explicit Interpreter(const EvalContext& ctx) : ctx_(ctx), rng_(ctx.rng_seed) {}

  // Evaluates `c`. `owned` are moved-in arguments (their buffers may be
  // reused); when `borrowed` is non-empty it is used instead and left intact.
  StatusOr<Literal> Run(const Computation& c, std::vector<Literal> owned,
                        const std::vector<const Literal*>& borrowed = {});
  // Runs a computation an instruction calls, borrowing `args`. A scalar float
  // argument of another precision than its parameter is converted to it: the
  // verifier lets a reducer's value parameters differ from the reduced
  // elements in float precision, as XLA does (f32 elements, f64 reducer).
  StatusOr<Literal> Call(const Computation& c, const std::vector<const Literal*>& args);

  const EvalContext& ctx() const { return ctx_; }
  std::mt19937_64& rng() { return rng_; }
  // Values sent by send ops, by channel id, until their recv-done takes
  // them (kernels_p2p.cc).
  std::unordered_map<int64_t, Literal>& mailbox() { return mailbox_; }

 private:
  struct Plan {
    std::vector<const Instruction*> order;  // live instructions, operands first
    std::unordered_map<const Instruction*, int> slot;
    std::vector<int> uses;  // per slot: operand uses (+1 for the root)
    // Per slot: a get-tuple-element whose tuple operand is read only by
    // get-tuple-elements of distinct indices, so it may move its element out
    // of an owned tuple even though the tuple has other uses.
    std::vector<bool> gte_steals;
    // Per slot: the slots the step reads (its operands; a fused loop's
    // inputs), the fused loop rooted there (loop_fusion.h) or null, and
    // whether it is computed inside a fused loop and so never runs.
    std::vector<std::vector<int>> reads;
    std::vector<std::shared_ptr<const LoopFusion>> loop;
    std::vector<bool> absorbed;
  };
  const Plan& GetPlan(const Computation& c);

  EvalContext ctx_;
  std::mt19937_64 rng_;
  std::unordered_map<const Computation*, Plan> plans_;
  std::unordered_map<int64_t, Literal> mailbox_;
};

// What a kernel gets: the instruction, its operand values, and whether each
// operand's buffer may be taken (this is its last use).
struct KernelArgs {
  const Instruction& instr;
  std::vector<Literal*> ops;
  std::vector<bool> donatable;
  Interpreter& interp;

  const Literal& op(int i) const { return *ops[i]; }
  const Shape& shape() const { return instr.shape(); }
  // Takes operand i's buffer when allowed and it already has the result's
  // array shape; otherwise a fresh zeroed literal of the result shape.
  Literal TakeOrAllocate(int i) const;
};

// Kernel entry points, one per op or small group of ops.
// kernels_elementwise.cc
StatusOr<Literal> EvalUnary(KernelArgs& k);
StatusOr<Literal> EvalBinary(KernelArgs& k);
StatusOr<Literal> EvalCompare(KernelArgs& k);
StatusOr<Literal> EvalSelect(KernelArgs& k);
StatusOr<Literal> EvalClamp(KernelArgs& k);
StatusOr<Literal> EvalConvert(KernelArgs& k);
StatusOr<Literal> EvalBitcastConvert(KernelArgs& k);
StatusOr<Literal> EvalStochasticConvert(KernelArgs& k);  // kernels_stochastic_convert.cc
StatusOr<Literal> EvalReducePrecision(KernelArgs& k);
StatusOr<Literal> EvalIota(KernelArgs& k);
// kernels_data_movement.cc
StatusOr<Literal> EvalBroadcast(KernelArgs& k);
StatusOr<Literal> EvalReshape(KernelArgs& k);  // reshape and bitcast
StatusOr<Literal> EvalTranspose(KernelArgs& k);
StatusOr<Literal> EvalSlice(KernelArgs& k);
StatusOr<Literal> EvalDynamicSlice(KernelArgs& k);
StatusOr<Literal> EvalDynamicUpdateSlice(KernelArgs& k);
StatusOr<Literal> EvalPad(KernelArgs& k);
StatusOr<Literal> EvalConcatenate(KernelArgs& k);
StatusOr<Literal> EvalReverse(KernelArgs& k);
// kernels_reduce.cc
StatusOr<Literal> EvalReduce(KernelArgs& k);
StatusOr<Literal> EvalReduceWindow(KernelArgs& k);
StatusOr<Literal> EvalSelectAndScatter(KernelArgs& k);
StatusOr<Literal> EvalSort(KernelArgs& k);
StatusOr<Literal> EvalMap(KernelArgs& k);
// kernels_dot_conv.cc
StatusOr<Literal> EvalDot(KernelArgs& k);
StatusOr<Literal> EvalConvolution(KernelArgs& k);
StatusOr<Literal> EvalBatchNormTraining(KernelArgs& k);
StatusOr<Literal> EvalBatchNormInference(KernelArgs& k);
StatusOr<Literal> EvalBatchNormGrad(KernelArgs& k);
// kernels_linalg.cc, kernels_ragged_dot.cc
StatusOr<Literal> EvalCholesky(KernelArgs& k);
StatusOr<Literal> EvalTriangularSolve(KernelArgs& k);
StatusOr<Literal> EvalRaggedDot(KernelArgs& k);
// kernels_topk.cc: the TopK custom-call with any comparator (the plain
// GT/LT one has a faster path in EvalCustomCall).
StatusOr<Literal> EvalTopKWithComparator(KernelArgs& k);
// kernels_control.cc: the topk opcode (k=, largest= attributes).
StatusOr<Literal> EvalTopKOp(KernelArgs& k);
// kernels_gather_scatter.cc
StatusOr<Literal> EvalGather(KernelArgs& k);
StatusOr<Literal> EvalScatter(KernelArgs& k);
// kernels_rng.cc
StatusOr<Literal> EvalRng(KernelArgs& k);
StatusOr<Literal> EvalRngBitGenerator(KernelArgs& k);
// The PartitionInvariantRng custom-call (ir/partitioned_rng.h): a tile of a
// partitioned rng, drawing the unpartitioned values of its elements.
StatusOr<Literal> EvalPartitionInvariantRng(KernelArgs& k);
// The PartitionInvariantRngBitGenerator custom-call: the new state and this
// partition's tile of a tiled rng-bit-generator's bits.
StatusOr<Literal> EvalPartitionInvariantRngBitGenerator(KernelArgs& k);
// kernels_control.cc
StatusOr<Literal> EvalCustomCall(KernelArgs& k);
// Infeed / outfeed through EvalContext::hooks (an error without hooks).
StatusOr<Literal> EvalInfeed(KernelArgs& k);
StatusOr<Literal> EvalOutfeed(KernelArgs& k);
StatusOr<Literal> EvalCollective(KernelArgs& k);
// kernels_p2p.cc: send / recv and their -done ops, collective-broadcast,
// ragged-all-to-all, set-dimension-size and dynamic-reshape.
StatusOr<Literal> EvalP2POrDynamicSize(KernelArgs& k);
// kernels_async.cc: fusion (a call of its fused computation) and the
// start / update / done pairs (the start does the work).
StatusOr<Literal> EvalAsyncOrFusion(KernelArgs& k);
// kernels_complex.cc: c64/c128 elementwise ops, real/imag/complex, converts
// to and from complex, and complex dots.
bool IsComplexKernel(const KernelArgs& k);  // true when EvalComplex handles k
StatusOr<Literal> EvalComplex(KernelArgs& k);
Literal ConvertComplex(const Literal& in, PrimitiveType to);  // either side complex
StatusOr<Literal> EvalComplexDot(KernelArgs& k);
// kernels_fft.cc: fft (FFT, IFFT, RFFT, IRFFT) over the trailing dims.
StatusOr<Literal> EvalFft(KernelArgs& k);
// A dot's dimension numbers checked against its operand shapes, with the
// operand dims sorted by role. Shared by the dot kernels (real, complex,
// ragged, and block-scaled through the real one) so that they accept the
// same dimension numbers.
struct DotDims {
  std::vector<int64_t> lhs_free, rhs_free;  // neither batch nor contracting, ascending
  std::vector<int64_t> result_dims;         // batch sizes, lhs free sizes, rhs free sizes
  // Element counts of the batch, lhs free, rhs free and contracting dims.
  int64_t batch = 1, lhs_free_size = 1, rhs_free_size = 1, contracting = 1;
};
// Errors (naming `instr`) unless lhs and rhs batch and contracting lists
// have equal lengths, every listed dim is in range and listed once per
// operand, and paired dims have equal sizes. REQUIRES: both shapes arrays.
StatusOr<DotDims> CheckDotDimensions(const Instruction& instr, const DotDimensionNumbers& dn,
                                     const Shape& lhs, const Shape& rhs);
// Errors unless `instr`'s shape is an array with dims.result_dims.
Status CheckDotResult(const Instruction& instr, const DotDims& dims);
// kernels_block_scaled_dot.cc: custom-call kBlockScaledDotTarget
// (ir/custom_call_targets.h).
StatusOr<Literal> EvalBlockScaledDot(KernelArgs& k);

// ---- helpers ---------------------------------------------------------------

// "error in %name (opcode): message", located at the instruction.
Status InstrError(const Instruction& instr, const std::string& message);

// Element types the kernels compute on natively.
bool IsSupportedType(PrimitiveType t);
// Maps floats to integers whose order is IEEE totalOrder
// (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN): comparisons with
// comparison_type=TOTALORDER and sorts compare these keys.
inline int64_t TotalOrderKey(double v) {
  int64_t i;
  std::memcpy(&i, &v, 8);
  return i < 0 ? (i ^ INT64_MAX) : i;
}
inline int32_t TotalOrderKey(float v) {
  int32_t i;
  std::memcpy(&i, &v, 4);
  return i < 0 ? (i ^ INT32_MAX) : i;
}

// `a <dir> b` for one comparison direction (compare kernels, the compiled
// scalar programs, select-and-scatter's select).
template <typename T>
inline bool CompareByDirection(ComparisonDirection d, T a, T b) {
  switch (d) {
    case ComparisonDirection::kEq: return a == b;
    case ComparisonDirection::kNe: return a != b;
    case ComparisonDirection::kGe: return a >= b;
    case ComparisonDirection::kGt: return a > b;
    case ComparisonDirection::kLe: return a <= b;
    case ComparisonDirection::kLt: return a < b;
  }
  return false;
}

inline bool Is16BitFloat(PrimitiveType t) {
  return t == PrimitiveType::F16 || t == PrimitiveType::BF16;
}

// Floats stored narrower than they are computed: f16, bf16 and the f8 types
// are widened to f32, computed and rounded back (XLA's CPU semantics).
inline bool IsStagedFloat(PrimitiveType t) { return Is16BitFloat(t) || IsF8Type(t); }

// Copies `lit` converted to f32 (REQUIRES: IsStagedFloat) and back with
// round-to-nearest-even.
Literal WidenToF32(const Literal& lit);
Literal NarrowFromF32(const Literal& f32, PrimitiveType to);
inline float RoundTo16(float v, PrimitiveType t) {
  return t == PrimitiveType::BF16 ? Bf16ToF32(F32ToBf16(v)) : F16ToF32(F32ToF16(v));
}
// RoundTo16 for every staged float type.
inline float RoundToStaged(float v, PrimitiveType t) {
  return IsF8Type(t) ? F8ToF32(t, F32ToF8(t, v)) : RoundTo16(v, t);
}

// One operand of an elementwise op run on contiguous spans: `data` holds
// the elements of `type` (when `scalar`, one element that stands for all).
struct SpanOperand {
  const uint8_t* data = nullptr;
  PrimitiveType type = PrimitiveType::PRED;
  bool scalar = false;
};
// Runs `instr`'s elementwise op (unary and binary arithmetic, compare,
// select, clamp, convert, copy) on `n` elements: out[i] = op(in[0][i], ...),
// `out` of type `out_type`, which may alias an operand span at the same
// index. Only select's predicate and clamp's bounds may be scalar. Staged
// floats (f16, bf16, f8) are widened to f32, computed and rounded back per
// element. The whole-array kernels (kernels_elementwise.cc) and the fused
// loops (loop_fusion.cc) both run through this one function, so a fused
// chain computes each element exactly as the unfused ops do. Returns false
// when the op is not defined for these types or operands; with n == 0 it
// only answers that (nothing is read or written).
bool ElementwiseSpan(const Instruction& instr, const SpanOperand* in, int n_in,
                     PrimitiveType out_type, uint8_t* out, int64_t n);
// convert's element loop on spans (`in` and `out` must not overlap unless
// equal with from == to); false for complex and unsupported types.
bool ConvertSpan(PrimitiveType from, PrimitiveType to, const uint8_t* in, uint8_t* out,
                 int64_t n);

// A copy of `lit` (tuples element by element). Literal's own copy
// constructor copies its bytes one element construction at a time; this
// copies them with memcpy (streamed for outputs larger than the cache).
Literal CopyOf(const Literal& lit);
// Operand i of `k`: its buffer when it may be taken, else a copy.
inline Literal TakeOrCopy(KernelArgs& k, int i) {
  if (k.donatable[i]) return std::move(*k.ops[i]);
  return CopyOf(*k.ops[i]);
}

// Converts every element of an array literal to `to` with XLA's convert
// semantics (float -> int saturating, NaN -> 0; x -> pred is x != 0).
Literal ConvertLiteral(const Literal& in, PrimitiveType to);

// A scalar literal holding element `i` of `lit`, and the reverse.
Literal ElementAsScalar(const Literal& lit, int64_t i);
void StoreScalar(const Literal& scalar, Literal& lit, int64_t i);
// Reads an integer scalar (any integer type) as int64.
int64_t ScalarIndex(const Literal& lit);

// Calls `f.template operator()<T>()` with T the storage type of `t` (pred as
// uint8_t, f16/bf16 as uint16_t). Returns false for unsupported types.
template <typename F>
bool DispatchStorage(PrimitiveType t, F&& f) {
  switch (t) {
    case PrimitiveType::PRED: case PrimitiveType::U8: f.template operator()<uint8_t>(); return true;
    case PrimitiveType::S8: f.template operator()<int8_t>(); return true;
    case PrimitiveType::S16: f.template operator()<int16_t>(); return true;
    case PrimitiveType::S32: f.template operator()<int32_t>(); return true;
    case PrimitiveType::S64: f.template operator()<int64_t>(); return true;
    case PrimitiveType::U16: case PrimitiveType::F16: case PrimitiveType::BF16:
      f.template operator()<uint16_t>(); return true;
    case PrimitiveType::U32: f.template operator()<uint32_t>(); return true;
    case PrimitiveType::U64: f.template operator()<uint64_t>(); return true;
    case PrimitiveType::F32: f.template operator()<float>(); return true;
    case PrimitiveType::F64: f.template operator()<double>(); return true;
    default: return false;
  }
}

// Like DispatchStorage but for types computed directly (not f16/bf16, which
// callers stage through f32).
template <typename F>
bool DispatchCompute(PrimitiveType t, F&& f) {
  if (Is16BitFloat(t)) return false;
  return DispatchStorage(t, std::forward<F>(f));
}

// Advances a row-major multi-index; returns false after the last one.
inline bool NextIndex(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// Copies elements of width `elem` bytes: for every index I over `dims`,
// dst[dst_base + I.dst_strides] = src[src_base + I.src_strides] (offsets and
// strides in elements; strides may be 0 or negative).
void StridedCopy(const uint8_t* src, const std::vector<int64_t>& src_strides, int64_t src_base,
                 uint8_t* dst, const std::vector<int64_t>& dst_strides, int64_t dst_base,
                 const std::vector<int64_t>& dims, int64_t elem);

// Whether this CPU runs AVX2 (asked once): kernels with a target("avx2")
// copy choose it by this (kernels_data_movement.cc, kernels_elementwise.cc).
bool HaveAvx2();

// A reducer computation recognised as one binary op of its two parameters.
enum class ReducerKind { kNone, kAdd, kMul, kMax, kMin, kAnd, kOr, kXor };
ReducerKind ClassifyReducer(const Computation* c);

// Applies a recognised reducer to two values of compute type T.
template <typename T>
inline T ApplyReducerKind(ReducerKind kind, T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Integers wrap as in XLA: the sum and product are taken in an unsigned
    // type at least as wide as int (signed overflow, and the int promotion of
    // u16 * u16, are undefined behaviour; UBSan found s32 sums overflowing).
    using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                 std::make_unsigned_t<T>>;
    if (kind == ReducerKind::kAdd) return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
    if (kind == ReducerKind::kMul) return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
  }
  switch (kind) {
    case ReducerKind::kAdd: return static_cast<T>(a + b);
    case ReducerKind::kMul: return static_cast<T>(a * b);
    case ReducerKind::kMax:
      if constexpr (std::is_floating_point_v<T>) {
        if (a != a) return a;
        if (b != b) return b;
      }
      return a > b ? a : b;
    case ReducerKind::kMin:
      if constexpr (std::is_floating_point_v<T>) {
        if (a != a) return a;
        if (b != b) return b;
      }
      return a < b ? a : b;
    case ReducerKind::kAnd:
      if constexpr (std::is_integral_v<T>) return a & b; else return (a != 0 && b != 0) ? 1 : 0;
    case ReducerKind::kOr:
      if constexpr (std::is_integral_v<T>) return a | b; else return (a != 0 || b != 0) ? 1 : 0;
    case ReducerKind::kXor:
      if constexpr (std::is_integral_v<T>) return a ^ b; else return (a != 0) != (b != 0) ? 1 : 0;
    case ReducerKind::kNone: break;
  }
  return a;
}

}  // namespace meshsplit::interp
