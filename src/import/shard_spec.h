// Sharding spec files (`--shard SPEC.json`): a mesh and glob rules that map
// tensor names (entry parameters and named constants, e.g. ONNX inputs and
// initializers) to mesh axes. Applied to a module before propagation; the
// schema is documented in docs/shard_spec.md.
#pragma once

#include <string>
#include <vector>

#include <optional>

#include "import/pipeline_spec.h"
#include "ir/module.h"
#include "sharding/mesh.h"
#include "support/status.h"

namespace meshsplit {

struct ShardRule {
  std::string match;                            // glob: * any run, ? one char
  bool replicated = false;                      // "replicated": true
  std::vector<std::vector<std::string>> dims;   // per tensor dim: mesh axes
  // "match_op" instead of "match": the glob names computed values (entry
  // instructions other than parameters and constants) by instruction name or
  // by metadata op_name (an ONNX node's name, a JAX op's scope), and the rule
  // is a sharding constraint on the value, as JAX's with_sharding_constraint.
  bool on_op = false;
};

struct ShardSpec {
  Mesh mesh;
  bool has_mesh = false;
  std::vector<ShardRule> rules;
  // "existing_axes": the mesh axes (major first) that the shardings already
  // in the module were written for. Those shardings are re-expressed on the
  // spec's mesh, replicated over the other axes (e.g. a data-parallel module
  // for 8 devices lifted onto data=8,model=4 before adding model rules).
  // Empty: shardings already in the module are left as they are.
  std::vector<std::string> existing_axes;
  // "outputs_follow_inputs" (default true): entry outputs that alias an
  // entry parameter (input_output_alias) or are its updated copy (an ONNX
  // training step's "new.X" for input "X") get the parameter's sharding, so
  // the next step reads them without resharding.
  bool outputs_follow_inputs = true;
  // "pipeline": split the layers of the model's layer loops over a stage
  // axis of the mesh (docs/pipeline.md). Applied by the compile pipeline's
  // `pipeline` pass, not by ApplyShardSpec.
  std::optional<PipelineSpec> pipeline;
};

// Parses spec JSON text; `name` is used in messages.
StatusOr<ShardSpec> ParseShardSpec(const std::string& text, const std::string& name);

// True if `name` matches the glob `pattern` (whole name).
bool GlobMatch(const std::string& pattern, const std::string& name);

struct ShardSpecReport {
  int annotated = 0;                    // tensors that received a sharding
  std::vector<std::string> unmatched;   // rules that matched nothing
  std::vector<bool> unmatched_on_op;    // per unmatched rule: a "match_op" rule
};

// `s`, written for a mesh of only the `existing_axes` of `mesh` (old device
// d at the row-major coordinates of d over those axes), re-expressed on
// `mesh`: every device that agrees on the existing axes holds what old device
// d held. Errors: an old device id beyond the existing axes' size.
StatusOr<Sharding> LiftSharding(const Sharding& s, const Mesh& mesh,
                                const std::vector<std::string>& existing_axes);

// Applies the first matching rule to every entry parameter and constant of
// the entry computation: parameters get the sharding directly, constants get
// a `custom-call(Sharding)` annotation in front of their users. "match_op"
// rules constrain computed values the same way: a value matches by its name,
// or by its metadata op_name when it leaves that op (a user outside it or the
// root), so a multi-instruction ONNX node is constrained at its output only. Sets the
// module's num_partitions to the mesh size. Errors: unknown axis, rank
// mismatch, axis used twice, missing mesh.
StatusOr<ShardSpecReport> ApplyShardSpec(Module& module, const ShardSpec& spec);

// Reads and parses `path`; a non-empty `mesh_override` ("data=2,model=4")
// replaces the file's mesh.
StatusOr<ShardSpec> ReadShardSpec(const std::string& path, const std::string& mesh_override = "");

// Reads `path`, applies it (a non-empty `mesh_override`, "data=2,model=4",
// replaces the file's mesh) and prints a warning on stderr for each rule that
// matched nothing. Returns the mesh applied.
StatusOr<Mesh> ApplyShardSpec(Module& module, const std::string& path,
                              const std::string& mesh_override = "");

// The outputs that are updated copies of entry parameters, as (output tuple
// index, parameter number): the header's input_output_alias, else, for an
// imported training step, the ONNX convention of naming the updated `X`
// "new.X" (import/load.h EntryOutputNames), when the two have the same shape.
// outputs_follow_inputs gives these outputs their parameter's sharding.
std::vector<std::pair<int64_t, int64_t>> UpdatedCopies(const Module& module);

}  // namespace meshsplit
