// Glue between the public API's value types (include/meshsplit/meshsplit.h)
// and the compiler's internal ones; used by src/api/*.cc only.
#pragma once

#include <string>
#include <utility>

#include "meshsplit/meshsplit.h"
#include "sharding/mesh.h"
#include "sharding/sharding.h"
#include "support/status.h"

namespace meshsplit::api {

// Throws Error with the CLI's diagnostic text when `status` is an error.
inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw Error(status.ToString());
}
template <typename T>
T Unwrap(StatusOr<T> value) {
  ThrowIfError(value.status());
  return std::move(value).value();
}

meshsplit::Mesh ToInternal(const Mesh& mesh);
Mesh FromInternal(const meshsplit::Mesh& mesh);
// The HLO sharding of `s` on a tensor of rank `rank` (NamedSharding::HloSharding
// before printing). Throws Error.
meshsplit::Sharding Lower(const NamedSharding& s, int64_t rank);

}  // namespace meshsplit::api
