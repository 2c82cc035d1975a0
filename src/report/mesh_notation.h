// Shardings as people write them: `[data, _]` over a named mesh (the
// mesh_split notation of docs/mesh_split.md) instead of
// `{devices=[2,1,4]<=[8] last_tile_dim_replicate}`. The report labels its
// grids, causes and tables with it; a sharding that is not a mesh_split of
// the mesh keeps its raw text.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sharding/mesh.h"
#include "sharding/sharding.h"

namespace meshsplit {

// The mesh axes behind a sharding: per data dim the axes it is split over
// (major first), and the axes of its manual and unreduced subgroups (the
// mesh's remaining axes replicate the value).
struct MeshSplitAxes {
  std::vector<std::vector<std::string>> dims;
  std::vector<std::string> manual;
  std::vector<std::string> unreduced;
};

// Decodes `sharding` over `mesh`: every data tile dim and every manual or
// unreduced subgroup dim must be a product of whole mesh axes, placed the
// way MeshSplit places them (checked on every device). `rank` is the value's
// rank (a replicated sharding does not say it); -1: unknown, then a
// replicated sharding has no dims. nullopt for tuple, maximal and unknown
// shardings, and for tilings that do not follow the mesh's axes.
std::optional<MeshSplitAxes> DecodeMeshSplit(const Sharding& sharding, const Mesh& mesh,
                                             int64_t rank = -1);

// "[data, _]", "[_, (data,model)]", "[data, _] unreduced(model)",
// "[_, _] manual(stage)"; "replicated" / "unreduced" when the rank is unknown.
std::string MeshSplitAxesToString(const MeshSplitAxes& axes);

// The label of a value's sharding: its mesh_split notation over `mesh` when
// it decodes, else the sharding's own text (no metadata).
std::string ShardingLabel(const Sharding& sharding, const Mesh& mesh, int64_t rank = -1);

// As ShardingLabel for sharding text ("{devices=[2,4]<=[8]}", as causes
// record it); text that does not parse is returned as is.
std::string ShardingTextLabel(const std::string& text, const Mesh& mesh);

}  // namespace meshsplit
