// Structured attributes of HLO instructions (windows, dimension numbers,
// slices, replica groups, ...). Parsed from and printed to XLA's text syntax by
// text/. Attributes that meshsplit does not interpret are kept as raw text in
// Attributes::extra, in the order they appeared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace meshsplit {

class Computation;

struct WindowDimension {
  int64_t size = 1;
  int64_t stride = 1;
  int64_t padding_low = 0;
  int64_t padding_high = 0;
  int64_t window_dilation = 1;  // rhs_dilate
  int64_t base_dilation = 1;    // lhs_dilate
  bool window_reversal = false;  // rhs_reversal
};
using Window = std::vector<WindowDimension>;

// `dim_labels=b01f_01io->b01f`.
struct ConvolutionDimensionNumbers {
  int64_t input_batch_dimension = 0;
  int64_t input_feature_dimension = 0;
  std::vector<int64_t> input_spatial_dimensions;
  int64_t kernel_input_feature_dimension = 0;
  int64_t kernel_output_feature_dimension = 0;
  std::vector<int64_t> kernel_spatial_dimensions;
  int64_t output_batch_dimension = 0;
  int64_t output_feature_dimension = 0;
  std::vector<int64_t> output_spatial_dimensions;
};

struct DotDimensionNumbers {
  std::vector<int64_t> lhs_batch_dimensions;
  std::vector<int64_t> rhs_batch_dimensions;
  std::vector<int64_t> lhs_contracting_dimensions;
  std::vector<int64_t> rhs_contracting_dimensions;
};

struct GatherDimensionNumbers {
  std::vector<int64_t> offset_dims;
  std::vector<int64_t> collapsed_slice_dims;
  std::vector<int64_t> start_index_map;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> operand_batching_dims;
  std::vector<int64_t> start_indices_batching_dims;
};

struct ScatterDimensionNumbers {
  std::vector<int64_t> update_window_dims;
  std::vector<int64_t> inserted_window_dims;
  std::vector<int64_t> scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> input_batching_dims;
  std::vector<int64_t> scatter_indices_batching_dims;
};

struct PaddingDimension {
  int64_t low = 0;
  int64_t high = 0;
  int64_t interior = 0;
};
using PaddingConfig = std::vector<PaddingDimension>;  // `padding=0_0x1_1_0`

struct SliceDimension {
  int64_t start = 0;
  int64_t limit = 0;
  int64_t stride = 1;
};

enum class ComparisonDirection { kEq, kNe, kGe, kGt, kLe, kLt };

// `replica_groups={{0,1},{2,3}}` or the iota form `[2,2]<=[4]` /
// `[2,2]<=[2,2]T(1,0)`: `group_dims` = [num_groups, group_size]; device ids
// are iota(prod(reshape_dims)) reshaped to reshape_dims, transposed by
// transpose_perm, then read row-major into group_dims.
struct ReplicaGroups {
  bool is_iota = false;
  std::vector<std::vector<int64_t>> groups;  // explicit form
  std::vector<int64_t> group_dims;           // iota form
  std::vector<int64_t> reshape_dims;
  std::vector<int64_t> transpose_perm;  // empty = identity

  bool empty() const { return !is_iota && groups.empty(); }
  // Expands the iota form (O(devices); for the runtime and tests).
  std::vector<std::vector<int64_t>> Expand() const;
};

// Every attribute an instruction may carry. Only the fields its opcode uses
// are meaningful; the parser fills them, the printer prints the ones the
// opcode has, in XLA's order.
struct Attributes {
  // parameter(N), get-tuple-element index=N, iota_dimension=N.
  int64_t parameter_number = 0;
  int64_t tuple_index = 0;
  int64_t iota_dimension = 0;
  // dimensions={...}: broadcast, transpose, reduce, reverse, concatenate,
  // sort, all-gather, all-to-all, reduce-scatter.
  std::vector<int64_t> dimensions;
  std::vector<SliceDimension> slice;            // slice={[0:2:1], ...}
  std::vector<int64_t> dynamic_slice_sizes;     // dynamic-slice
  PaddingConfig padding;                        // pad
  std::optional<Window> window;                 // conv, reduce-window, s&s
  std::optional<ConvolutionDimensionNumbers> conv_dnums;
  int64_t feature_group_count = 1;
  int64_t batch_group_count = 1;
  std::optional<DotDimensionNumbers> dot_dnums;
  std::optional<GatherDimensionNumbers> gather_dnums;
  std::vector<int64_t> gather_slice_sizes;
  std::optional<ScatterDimensionNumbers> scatter_dnums;
  bool indices_are_sorted = false;
  bool unique_indices = false;
  std::optional<ComparisonDirection> comparison_direction;
  std::string comparison_type;  // "TOTALORDER", "FLOAT", ...; empty = default
  int64_t exponent_bits = 0;    // reduce-precision
  int64_t mantissa_bits = 0;
  std::string custom_call_target;
  std::string rng_distribution;  // "rng_uniform" / "rng_normal"
  std::string rng_algorithm;     // rng-bit-generator
  bool is_stable = false;        // sort
  std::optional<ReplicaGroups> replica_groups;
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;
  std::optional<int64_t> channel_id;
  bool use_global_device_ids = false;
  bool constrain_layout = false;
  // batch-norm-*.
  float epsilon = 0;
  int64_t feature_index = 0;
  // Uninterpreted attributes, verbatim: (name, value text). metadata,
  // backend_config, frontend_attributes, precision_config and anything else.
  std::vector<std::pair<std::string, std::string>> extra;

  // The value text of an uninterpreted attribute, or nullptr.
  const std::string* FindExtra(const std::string& name) const {
    for (const auto& kv : extra)
      if (kv.first == name) return &kv.second;
    return nullptr;
  }
};

}  // namespace meshsplit
