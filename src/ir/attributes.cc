// Attribute helpers.
#include "ir/attributes.h"

#include <numeric>

namespace meshsplit {

std::vector<std::vector<int64_t>> ReplicaGroups::Expand() const {
  if (!is_iota) return groups;
  int64_t total = 1;
  for (int64_t d : reshape_dims) total *= d;
  // Transpose iota(reshape_dims) by transpose_perm, read row-major.
  std::vector<int64_t> perm = transpose_perm;
  if (perm.empty()) {
    perm.resize(reshape_dims.size());
    std::iota(perm.begin(), perm.end(), 0);
  }
  std::vector<int64_t> in_strides(reshape_dims.size(), 1);
  for (int i = static_cast<int>(reshape_dims.size()) - 2; i >= 0; --i)
    in_strides[i] = in_strides[i + 1] * reshape_dims[i + 1];
  std::vector<int64_t> out_dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out_dims[i] = reshape_dims[perm[i]];
  std::vector<int64_t> flat(total);
  std::vector<int64_t> idx(out_dims.size(), 0);
  for (int64_t n = 0; n < total; ++n) {
    int64_t src = 0;
    for (size_t i = 0; i < idx.size(); ++i) src += idx[i] * in_strides[perm[i]];
    flat[n] = src;
    for (int i = static_cast<int>(idx.size()) - 1; i >= 0; --i) {
      if (++idx[i] < out_dims[i]) break;
      idx[i] = 0;
    }
  }
  int64_t num_groups = group_dims.empty() ? 1 : group_dims[0];
  int64_t group_size = group_dims.size() < 2 ? total : group_dims[1];
  std::vector<std::vector<int64_t>> out(num_groups);
  for (int64_t g = 0; g < num_groups; ++g)
    out[g].assign(flat.begin() + g * group_size, flat.begin() + (g + 1) * group_size);
  return out;
}

}  // namespace meshsplit
