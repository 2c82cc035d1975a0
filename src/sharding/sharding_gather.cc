// Gather/scatter sharding helpers (see sharding_util.h): each is a mapping
// between the dims of two values, expressed with
// PropagateShardingAlongDimsAndReplicateOthers.
#include <algorithm>

#include "sharding/sharding_util.h"
#include "support/small_helpers.h"

namespace meshsplit::sharding_util {
namespace {

// Indices dims except the index vector dim, in order.
std::vector<int64_t> IndexBatchDims(int64_t indices_rank,
                                    int64_t index_vector_dim) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < indices_rank; ++d)
    if (d != index_vector_dim) out.push_back(d);
  return out;
}

// Dims of a rank-`rank` value not in `excluded`, in order.
std::vector<int64_t> Complement(int64_t rank,
                                const std::vector<int64_t>& excluded) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (!Contains(excluded, d)) out.push_back(d);
  return out;
}

// Pass-through pairs (operand dim, window dim of the other value) for the
// operand dims whose window covers the whole dim.
void PassthroughPairs(const std::vector<int64_t>& operand_dims,
                      const std::vector<int64_t>& window_sizes_by_operand_dim,
                      const std::vector<int64_t>& window_dims,
                      const std::vector<int64_t>& removed,
                      const std::vector<int64_t>& batching,
                      std::vector<int64_t>& from, std::vector<int64_t>& to) {
  size_t k = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(operand_dims.size()); ++d) {
    if (Contains(removed, d) || Contains(batching, d)) continue;
    if (k >= window_dims.size()) break;
    if (window_sizes_by_operand_dim[d] == operand_dims[d]) {
      from.push_back(d);
      to.push_back(window_dims[k]);
    }
    ++k;
  }
}

bool AnyTiled(const Sharding& s, const std::vector<int64_t>& dims) {
  if (!s.IsTiled()) return false;
  for (int64_t d : dims)
    if (s.TileDim(d) > 1) return true;
  return false;
}

}  // namespace

Sharding GatherOutputShardingFromIndex(const Sharding& index_sharding,
                                       int64_t index_vector_dim,
                                       const std::vector<int64_t>& offset_dims,
                                       int64_t output_rank) {
  if (!index_sharding.IsTiled()) return index_sharding;
  std::vector<int64_t> src =
      IndexBatchDims(index_sharding.TiledDataRank(), index_vector_dim);
  std::vector<int64_t> dst = Complement(output_rank, offset_dims);
  src.resize(std::min(src.size(), dst.size()));
  dst.resize(src.size());
  return PropagateShardingAlongDimsAndReplicateOthers(index_sharding, src, dst,
                                                      output_rank);
}

Sharding GatherIndexShardingFromOutput(const Sharding& output_sharding,
                                       int64_t index_vector_dim,
                                       const std::vector<int64_t>& offset_dims,
                                       int64_t indices_rank) {
  if (!output_sharding.IsTiled()) return output_sharding;
  std::vector<int64_t> src =
      Complement(output_sharding.TiledDataRank(), offset_dims);
  std::vector<int64_t> dst = IndexBatchDims(indices_rank, index_vector_dim);
  src.resize(std::min(src.size(), dst.size()));
  dst.resize(src.size());
  return PropagateShardingAlongDimsAndReplicateOthers(output_sharding, src, dst,
                                                      indices_rank);
}

std::optional<Sharding> GatherOutputShardingFromOperandPassthrough(
    const Sharding& operand_sharding, const std::vector<int64_t>& operand_dims,
    const std::vector<int64_t>& slice_sizes,
    const std::vector<int64_t>& offset_dims,
    const std::vector<int64_t>& collapsed_slice_dims,
    const std::vector<int64_t>& operand_batching_dims, int64_t output_rank) {
  if (!operand_sharding.IsTiled()) return operand_sharding;
  std::vector<int64_t> from, to;
  PassthroughPairs(operand_dims, slice_sizes, offset_dims, collapsed_slice_dims,
                   operand_batching_dims, from, to);
  if (!AnyTiled(operand_sharding, from)) return std::nullopt;
  return PropagateShardingAlongDimsAndReplicateOthers(operand_sharding, from,
                                                      to, output_rank);
}

std::optional<Sharding> GatherOperandShardingFromOutputPassthrough(
    const Sharding& output_sharding, const std::vector<int64_t>& operand_dims,
    const std::vector<int64_t>& slice_sizes,
    const std::vector<int64_t>& offset_dims,
    const std::vector<int64_t>& collapsed_slice_dims,
    const std::vector<int64_t>& operand_batching_dims) {
  if (!output_sharding.IsTiled()) return output_sharding;
  std::vector<int64_t> from, to;
  PassthroughPairs(operand_dims, slice_sizes, offset_dims, collapsed_slice_dims,
                   operand_batching_dims, from, to);
  if (!AnyTiled(output_sharding, to)) return std::nullopt;
  return PropagateShardingAlongDimsAndReplicateOthers(
      output_sharding, to, from, static_cast<int64_t>(operand_dims.size()));
}

Sharding ScatterUpdateShardingFromIndex(
    const Sharding& index_sharding, int64_t index_vector_dim,
    const std::vector<int64_t>& update_window_dims, int64_t update_rank) {
  return GatherOutputShardingFromIndex(index_sharding, index_vector_dim,
                                       update_window_dims, update_rank);
}

Sharding ScatterIndexShardingFromUpdate(
    const Sharding& update_sharding, int64_t index_vector_dim,
    const std::vector<int64_t>& update_window_dims, int64_t indices_rank) {
  return GatherIndexShardingFromOutput(update_sharding, index_vector_dim,
                                       update_window_dims, indices_rank);
}

std::optional<Sharding> ScatterUpdateShardingFromOutputPassthrough(
    const Sharding& output_sharding, const std::vector<int64_t>& operand_dims,
    const std::vector<int64_t>& update_dims,
    const std::vector<int64_t>& update_window_dims,
    const std::vector<int64_t>& inserted_window_dims,
    const std::vector<int64_t>& input_batching_dims) {
  if (!output_sharding.IsTiled()) return output_sharding;
  // Window size along each operand dim: the matching update window dim.
  std::vector<int64_t> window(operand_dims.size(), 1);
  size_t k = 0;
  for (size_t d = 0; d < operand_dims.size() && k < update_window_dims.size();
       ++d) {
    if (Contains(inserted_window_dims, d) || Contains(input_batching_dims, d))
      continue;
    window[d] = update_dims[update_window_dims[k++]];
  }
  std::vector<int64_t> from, to;
  PassthroughPairs(operand_dims, window, update_window_dims,
                   inserted_window_dims, input_batching_dims, from, to);
  if (!AnyTiled(output_sharding, from)) return std::nullopt;
  return PropagateShardingAlongDimsAndReplicateOthers(
      output_sharding, from, to, static_cast<int64_t>(update_dims.size()));
}

}  // namespace meshsplit::sharding_util
