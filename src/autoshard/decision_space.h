// The decision space of the auto-sharding search: which entry parameters and
// named constants are decided, grouped (layers of the same shape decide
// together), and for each group the mesh_split options it may take. A point
// of the space is a choice vector (one option index per group) and lowers to
// a sharding spec (import/shard_spec.h), the same file `--shard` reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "import/shard_spec.h"
#include "ir/module.h"
#include "sharding/mesh.h"
#include "support/status.h"

namespace meshsplit::autoshard {

// One mesh_split option for a tensor: per tensor dim the mesh axes (indices,
// major first) it is split over; empty = not split. An axis appears at most
// once per tensor.
using DimsMapping = std::vector<std::vector<int64_t>>;

// Tensors that share one decision: the same shape and element type and the
// same name once digit runs are ignored ("h.3.mlp.c_fc.weight" and
// "h.7.mlp.c_fc.weight"), or a single tensor when grouping is off.
struct DecisionGroup {
  std::string label;                 // the shared name pattern ('*' for digit runs)
  std::vector<std::string> members;  // tensor names, in program order
  std::string shape;                 // e.g. "f32[768,3072]"
  std::vector<int64_t> dims;
  int64_t bytes = 0;                 // total over members
  // options[0] is "not split"; the others split at least one dim.
  std::vector<DimsMapping> options;
  int initial = 0;                   // option the search starts from
  // Some member already carried a sharding in the input; choosing option 0
  // then writes an explicit "replicated" rule to override it.
  bool had_sharding = false;
  // `label` as a glob matches exactly the members among all entry
  // parameters and constants, so the spec can use one rule for the group.
  bool label_is_exact_glob = false;
};

struct DecisionSpaceOptions {
  // Tensors smaller than this are not decided (left as the input has them).
  int64_t min_bytes = 1024;
  // Only the largest groups are decided; the rest are left as they are.
  int64_t max_groups = 64;
  // Tensors that already carry a sharding are not decided at all. Otherwise
  // their sharding is the starting point when it is a mesh_split of the mesh.
  bool keep_existing = false;
  // Group tensors by shape and digit-free name (see DecisionGroup).
  bool group_layers = true;
  // At most this many mesh axes per tensor dim (1: one axis or none, as
  // GSPMD's mesh_split dims_mapping; 2 also tries e.g. [(data, model), _]).
  int max_axes_per_dim = 1;
  // Mesh axes no decision may split over (the pipeline's stage axis, which
  // the pipeline pass owns).
  std::vector<std::string> excluded_axes;
};

struct DecisionSpace {
  Mesh mesh;
  std::vector<DecisionGroup> groups;  // largest total bytes first
  // Tensors left as in the input, with why ("kept: annotated", "small", ...).
  std::vector<std::string> not_decided;
  int64_t decided_tensors = 0;
};

using Choice = std::vector<int>;  // one option index per group

// Every mapping of a tensor of `dims` onto `mesh`: each dim takes up to
// `max_axes_per_dim` axes (in either order), each axis at most once, axes of
// size 1 never, and only when the product of the sizes divides the dim (so
// no padding). The unsplit mapping comes first.
// "h.11.mlp.c_fc.weight" -> "h.*.mlp.c_fc.weight": the name with each digit
// run replaced by '*', the key repeated layers share.
std::string DigitFreePattern(const std::string& name);

std::vector<DimsMapping> EnumerateOptions(const std::vector<int64_t>& dims, const Mesh& mesh,
                                          int max_axes_per_dim = 1,
                                          const std::vector<int64_t>& excluded_axes = {});

// The decision space of `module`'s entry parameters and constants.
// Errors: no entry computation.
StatusOr<DecisionSpace> BuildDecisionSpace(const Module& module, const Mesh& mesh,
                                           const DecisionSpaceOptions& options);

// The choice that starts the search (each group's `initial`).
Choice InitialChoice(const DecisionSpace& space);

// "[_, model]" or "[(data,model), _]" for one option of a tensor.
std::string OptionToString(const DimsMapping& option, const Mesh& mesh);

// The sharding spec that applies `choice`: the mesh, `existing_axes`, and one
// rule per group whose choice differs from what the input already has (a
// glob when exact, else one per member); "unsplit" for a tensor that had a
// sharding is an explicit "replicated" rule.
ShardSpec ChoiceToSpec(const DecisionSpace& space, const Choice& choice,
                       const std::vector<std::string>& existing_axes = {});

// The spec as JSON text (docs/shard_spec.md), with a comment line.
std::string SpecToJson(const ShardSpec& spec, const std::string& comment);

}  // namespace meshsplit::autoshard
