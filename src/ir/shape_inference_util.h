// Small message-building helpers shared by the shape inference and verifier
// files. Internal to ir/; not part of any public contract.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "ir/attributes.h"
#include "ir/shape.h"
#include "support/status.h"

namespace meshsplit::shape_inference_internal {

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// An error without location; callers attach the instruction's.
template <typename... Args>
Status Err(const Args&... args) {
  return Status::Error(StrCat(args...));
}

// "[2,3]".
inline std::string Dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(d[i]);
  }
  return s + "]";
}

// Checks a list of dimension numbers of a rank-`rank` array: in range,
// unique and, if `sorted`, increasing.
Status CheckDims(const char* what, const std::vector<int64_t>& dims,
                 int64_t rank, bool sorted);

// The batching dims of a gather or scatter, as StableHLO states them: the
// operand's list (`operand_what`) and the indices' list (`indices_what`)
// have equal length; the indices' dims are valid dims of `indices`, unique
// and not `index_vector_dim`; paired dims have equal sizes; no operand
// batching dim is also indexed (in `index_map`, named `map_what`).
Status CheckBatchingDims(const char* operand_what, const std::vector<int64_t>& operand_dims,
                         const char* indices_what, const std::vector<int64_t>& indices_dims,
                         const Shape& operand, const Shape& indices, int64_t index_vector_dim,
                         const char* map_what, const std::vector<int64_t>& index_map);

// Replica ids are non-negative and unique (groups may differ in size, as
// all-reduce allows); iota groups must cover their iota.
Status CheckReplicaGroupIds(const ReplicaGroups& groups);

}  // namespace meshsplit::shape_inference_internal
