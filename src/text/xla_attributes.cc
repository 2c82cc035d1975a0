// XLA's attribute tables (see xla_attributes.h), one switch over every opcode
// with no default, so a new opcode cannot be added without saying what XLA
// accepts on it.
#include "text/xla_attributes.h"

#include <algorithm>
#include <span>

namespace meshsplit::text_internal {
namespace {

using Names = std::span<const std::string_view>;

// `return NAMES("a", "b");`: a static array, so the span outlives the call.
#define NAMES(...)                                              \
  [] {                                                          \
    static constexpr std::string_view kNames[] = {__VA_ARGS__}; \
    return Names(kNames);                                       \
  }()

// ParseInstructionRhs: taken by every opcode.
constexpr std::string_view kCommon[] = {"sharding",       "frontend_attributes",  "statistics",
                           "parameter_replication", "control-predecessors", "origin",
                           "metadata",       "backend_config"};

// The ops XLA parses with a result_accuracy attribute.
constexpr std::string_view kResultAccuracy[] = {"result_accuracy"};
constexpr Names kNone = {};
constexpr std::string_view kAllGather[] = {"replica_groups", "channel_id", "dimensions", "constrain_layout",
                              "use_global_device_ids"};
constexpr std::string_view kAllReduce[] = {"to_apply", "replica_groups", "channel_id", "constrain_layout",
                              "use_global_device_ids", "mode"};
constexpr std::string_view kReduceScatter[] = {"to_apply",         "replica_groups",        "channel_id",
                                  "constrain_layout", "use_global_device_ids", "mode",
                                  "dimensions"};
constexpr std::string_view kCollectivePermute[] = {"source_target_pairs", "channel_id", "slice_sizes"};
constexpr std::string_view kSendRecv[] = {"channel_id", "is_host_transfer"};
constexpr std::string_view kDimensions[] = {"dimensions"};
constexpr std::string_view kBatchNorm[] = {"epsilon", "feature_index"};
constexpr std::string_view kDot[] = {"lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims",
                        "rhs_batch_dims", "operand_precision", "algorithm"};
constexpr std::string_view kRaggedDot[] = {"lhs_contracting_dims", "rhs_contracting_dims",
                              "lhs_batch_dims",       "rhs_batch_dims",
                              "lhs_ragged_dims",      "rhs_group_dims",
                              "operand_precision"};
constexpr std::string_view kAsync[] = {"async_execution_thread", "calls", "output_to_operand_aliasing"};

Names OwnAttributes(Opcode op) {
  switch (op) {
    case Opcode::kParameter: case Opcode::kConstant: case Opcode::kPartitionId:
    case Opcode::kReplicaId: case Opcode::kAfterAll: case Opcode::kAddDependency:
    case Opcode::kDynamicUpdateSlice: case Opcode::kDynamicReshape: case Opcode::kTuple:
    case Opcode::kConvert: case Opcode::kBitcastConvert: case Opcode::kBitcast:
    case Opcode::kStochasticConvert:
    // Unary ops without result accuracy.
    case Opcode::kAbs: case Opcode::kCeil: case Opcode::kClz: case Opcode::kCopy:
    case Opcode::kFloor: case Opcode::kImag: case Opcode::kIsFinite: case Opcode::kNegate:
    case Opcode::kNot: case Opcode::kPopcnt: case Opcode::kReal:
    case Opcode::kRoundNearestAfz: case Opcode::kRoundNearestEven: case Opcode::kSign:
    case Opcode::kOptimizationBarrier: case Opcode::kAllReduceDone:
    case Opcode::kAllGatherDone: case Opcode::kCollectivePermuteDone: case Opcode::kCopyDone:
    // Binary and ternary ops.
    case Opcode::kAdd: case Opcode::kAnd: case Opcode::kAtan2: case Opcode::kComplex:
    case Opcode::kDivide: case Opcode::kMaximum: case Opcode::kMinimum:
    case Opcode::kMultiply: case Opcode::kOr: case Opcode::kPower: case Opcode::kRemainder:
    case Opcode::kShiftLeft: case Opcode::kShiftRightArithmetic:
    case Opcode::kShiftRightLogical: case Opcode::kSubtract: case Opcode::kXor:
    case Opcode::kSelect: case Opcode::kClamp:
      return kNone;
    case Opcode::kCbrt: case Opcode::kCos: case Opcode::kErf: case Opcode::kExp:
    case Opcode::kExpm1: case Opcode::kLog: case Opcode::kLog1p: case Opcode::kLogistic:
    case Opcode::kRsqrt: case Opcode::kSin: case Opcode::kSqrt: case Opcode::kTan:
    case Opcode::kTanh:
      return kResultAccuracy;
    case Opcode::kIota:
      return NAMES("iota_dimension");
    case Opcode::kTopK:
      return NAMES("k", "largest");
    case Opcode::kCompare:
      return NAMES("direction", "type");
    case Opcode::kReducePrecision:
      return NAMES("exponent_bits", "mantissa_bits");
    case Opcode::kBroadcast: case Opcode::kConcatenate: case Opcode::kReverse:
    case Opcode::kTranspose: case Opcode::kGetDimensionSize: case Opcode::kSetDimensionSize:
      return kDimensions;
    case Opcode::kReshape:
      return NAMES("inferred_dimension");
    case Opcode::kSlice:
      return NAMES("slice");
    case Opcode::kDynamicSlice:
      return NAMES("dynamic_slice_sizes");
    case Opcode::kPad:
      return NAMES("padding");
    case Opcode::kGather:
      return NAMES("offset_dims",      "collapsed_slice_dims",  "start_index_map",
              "index_vector_dim", "slice_sizes",           "indices_are_sorted",
              "operand_batching_dims", "start_indices_batching_dims");
    case Opcode::kScatter:
      return NAMES("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
              "index_vector_dim",   "to_apply",             "indices_are_sorted",
              "unique_indices",     "input_batching_dims",  "scatter_indices_batching_dims");
    case Opcode::kReduce: case Opcode::kMap:
      return NAMES("to_apply", "dimensions");
    case Opcode::kReduceWindow:
      return NAMES("window", "to_apply");
    case Opcode::kSelectAndScatter:
      return NAMES("select", "scatter", "window");
    case Opcode::kSort:
      return NAMES("dimensions", "is_stable", "to_apply");
    case Opcode::kDot:
      return kDot;
    case Opcode::kRaggedDot:
      return kRaggedDot;
    case Opcode::kConvolution:
      return NAMES("window", "dim_labels", "feature_group_count", "batch_group_count", "conv_kind",
              "operand_precision");
    case Opcode::kFft:
      return NAMES("fft_type", "fft_length");
    case Opcode::kCholesky:
      return NAMES("lower");  // CholeskyOptions, parsed as a proto
    case Opcode::kTriangularSolve:
      return NAMES("left_side", "lower", "unit_diagonal", "transpose_a");  // TriangularSolveOptions
    case Opcode::kBatchNormTraining: case Opcode::kBatchNormInference:
    case Opcode::kBatchNormGrad:
      return kBatchNorm;
    case Opcode::kGetTupleElement:
      return NAMES("index");
    case Opcode::kWhile:
      return NAMES("condition", "body");
    case Opcode::kConditional:
      // true/false_computation for a pred branch index, branch_computations
      // for s32; which one applies is checked by the verifier.
      return NAMES("true_computation", "false_computation", "branch_computations");
    case Opcode::kCall:
      return NAMES("to_apply", "is_composite");
    case Opcode::kCustomCall:
      return NAMES("custom_call_target",         "window",
              "dim_labels",                 "feature_group_count",
              "batch_group_count",          "operand_layout_constraints",
              "custom_call_has_side_effect", "to_apply",
              "called_computations",        "output_to_operand_aliasing",
              "padding_type",               "literal",
              "operand_precision",          "schedule",
              "api_version");
    case Opcode::kDomain:
      return NAMES("domain");
    case Opcode::kInfeed:
      return NAMES("infeed_config");
    case Opcode::kOutfeed:
      return NAMES("outfeed_config", "outfeed_shape");
    case Opcode::kRng:
      return NAMES("distribution");
    case Opcode::kRngBitGenerator:
      return NAMES("algorithm");
    case Opcode::kRngGetAndUpdateState:
      return NAMES("delta");
    case Opcode::kAllReduce: case Opcode::kAllReduceStart:
      return kAllReduce;
    case Opcode::kReduceScatter:
      return kReduceScatter;
    case Opcode::kAllGather: case Opcode::kAllGatherStart:
      return kAllGather;
    case Opcode::kAllToAll:
      return NAMES("replica_groups", "channel_id", "dimensions", "constrain_layout");
    case Opcode::kRaggedAllToAll:
      return NAMES("replica_groups", "channel_id", "dimensions");
    case Opcode::kCollectiveBroadcast:
      return NAMES("replica_groups", "channel_id");
    case Opcode::kCollectivePermute: case Opcode::kCollectivePermuteStart:
      return kCollectivePermute;
    case Opcode::kSend: case Opcode::kSendDone: case Opcode::kRecv: case Opcode::kRecvDone:
      return kSendRecv;
    case Opcode::kFusion:
      return NAMES("calls", "kind", "output_to_operand_aliasing");
    case Opcode::kAsyncStart: case Opcode::kAsyncUpdate: case Opcode::kAsyncDone:
      return kAsync;
    case Opcode::kCopyStart:
      return NAMES("cross_program_prefetch_index");
  }
  return kNone;
}

bool Contains(Names names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

bool XlaAcceptsAttribute(Opcode op, std::string_view name, bool async_sugar) {
  return Contains(kCommon, name) || Contains(OwnAttributes(op), name) ||
         (async_sugar && Contains(kAsync, name) && name != "calls");
}

std::string XlaOpcodeAttributeList(Opcode op) {
  std::string out;
  for (std::string_view n : OwnAttributes(op)) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

bool XlaAcceptsModuleAttribute(std::string_view key) {
  static constexpr std::string_view kModule[] = {"is_scheduled",
                                    "replica_count",
                                    "num_partitions",
                                    "input_output_alias",
                                    "buffer_donor",
                                    "alias_passthrough_params",
                                    "entry_computation_layout",
                                    "frontend_attributes",
                                    "allow_spmd_sharding_propagation_to_parameters",
                                    "allow_spmd_sharding_propagation_to_output",
                                    "origin_recovery_table"};
  return Contains(kModule, key);
}

}  // namespace meshsplit::text_internal
