// Lowering one Shardy tensor sharding (import/shardy_attr.h) to our
// Sharding: axes (and sub-axes) to tile dims, manual axes to a manual
// subgroup, the rest to a replicated one. Used by the Shardy reader
// (import/shardy_input.cc); kept apart so the axis arithmetic reads alone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "import/shardy_attr.h"
#include "sharding/sharding.h"
#include "support/status.h"

namespace meshsplit::sdy {

// The module's meshes by name (`xla.sdy.meshes`).
using MeshTable = std::map<std::string, MeshDecl>;

// Checks a declared mesh: device ids, when given, a permutation of
// 0..N-1 of the axes' size product (or one id for a maximal mesh); axis
// names distinct.
Status ValidateMesh(const MeshDecl& mesh);

// What a lowering needs beyond the sharding.
struct LowerRequest {
  int64_t rank = 0;
  // Axes manual in the value's region (shard_map bodies): a manual subgroup.
  std::vector<std::string> manual_axes;
  // Axes removed from the dims (they must lead each dim they appear in): a
  // shard_map's own manual axes on its local values.
  std::vector<std::string> drop_from_dims;
};

struct Lowered {
  Sharding sharding;
  // Open dims with no axes left, which Shardy may still shard
  // (`{?}`); a Sharding custom-call marks them `unspecified_dims`.
  std::vector<int64_t> open_empty_dims;
  // The mesh the sharding is on (nullptr for an inlined one).
  const MeshDecl* mesh = nullptr;
  std::string mesh_name;  // empty for an inlined mesh
};

// Lowers `s`; errors name what does not fit (unknown mesh or axis, rank,
// overlapping or malformed sub-axes, unreduced axes).
StatusOr<Lowered> Lower(const TensorSharding& s, const MeshTable& meshes,
                        const LowerRequest& request);

}  // namespace meshsplit::sdy
