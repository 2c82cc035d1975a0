// The compile pipeline: the one way a module becomes an SPMD program. Every
// command, the planner's evaluator, the conformance runner and the
// differential tests call Compile() with their options in CompileOptions
// (never through process-wide state). It runs named passes from the pass
// table (compiler/passes.h), in this order, each only when its option asks:
//
//   apply-spec → verify → expand-batch-norm → propagate → partition
//
// and, when the options ask for pipelining (docs/pipeline.md),
//
//   ... → propagate → pipeline → propagate → partition
//
// (the spec comes first because it sets the partition count the verifier
// checks shardings against).
//
// The passes before `partition` rewrite the module in place; `partition`
// builds the SPMD program beside it, so callers keep the (propagated) input
// for the report's causes and verify's one-device run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "import/shard_spec.h"
#include "ir/module.h"
#include "partitioner/partitioner.h"
#include "pipeline/pipeline.h"
#include "propagation/propagation.h"
#include "support/status.h"
#include "text/parser.h"
#include "transforms/shrink_batch.h"
#include "transforms/shrink_shapes.h"

namespace meshsplit {

// How far Compile() goes.
enum class CompileStage {
  kPrepared,     // apply-spec, verify, expand-batch-norm
  kPropagated,   // ... then propagate
  kPartitioned,  // ... then partition
};

struct CompileOptions {
  CompileStage until = CompileStage::kPartitioned;

  // apply-spec: a sharding spec (docs/shard_spec.md) read from `spec_path`,
  // or given in memory as `spec` (the planner; `spec` wins). `mesh`
  // ("data=2,model=4") replaces the spec's mesh; without a spec it only sets
  // the module's num_partitions to the mesh size.
  std::string spec_path;
  std::shared_ptr<const ShardSpec> spec;
  std::string mesh;

  // CompileFile: how HLO text is parsed (`xla_strict`: refuse what XLA's
  // parser refuses, `--xla-strict`).
  ParseOptions parse;

  // verify: run the IR verifier on the module (after the spec).
  bool verify_input = false;

  // expand-batch-norm: rewrite the fused batch-norm ops into reductions
  // (neither propagation nor the partitioner has a rule for them), with a
  // note on stderr when any was expanded.
  bool expand_batch_norm = false;

  // The partition count (--num-partitions) when > 0; it must equal the mesh's
  // device count when there is a mesh. 0: the mesh's, else the header's, else
  // the count the shardings name (compiler/partition_count.h). Settled before
  // the verify pass; tiled shardings must then span exactly that many devices.
  int64_t num_partitions = 0;

  // propagate: sharding propagation with these options. Ops without a rule
  // are listed in CompileResult::propagation.warnings; they are printed on
  // stderr only with `print_propagation_warnings`.
  bool propagate = true;
  PropagationOptions propagation;
  bool print_propagation_warnings = false;

  // partition: the SPMD partitioner with these options
  // (partition.num_partitions 0 = the module's).
  PartitionOptions partition;
  // Run the IR verifier on the partitioned program: running an ill-typed
  // program could corrupt memory (kernels trust the declared shapes).
  bool verify_output = false;
  // Check every collective of the partitioned program against the shardings
  // it serves (compiler/collective_check.h); a disagreement fails the
  // compile with failed_pass "check-collectives". verify always asks.
  bool check_collectives = false;

  // pipeline: split the model's layer loops over a stage axis of the mesh
  // (docs/pipeline.md). `pipeline` (the --pipeline flag) wins over the
  // spec's "pipeline" key; the mesh is `pipeline_mesh`, else the spec's
  // (or --mesh). `pipeline_fill_nan`: bubble buffers hold NaN (verify).
  // `pipeline_skip_idle`: bubble stage-ticks skip their layers (the
  // benchmark turns it off to measure what skipping saves).
  std::optional<PipelineSpec> pipeline;
  std::optional<Mesh> pipeline_mesh;
  bool pipeline_fill_nan = false;
  bool pipeline_skip_idle = true;

  // Options of the passes that only `meshsplit opt` puts in a pipeline.
  ShrinkBatchOptions shrink_batch;
  ShrinkShapesOptions shrink_shapes;
};

struct CompileResult {
  // The SPMD program; null unless `until` is kPartitioned.
  std::unique_ptr<Module> partitioned;
  // Where every propagated sharding came from (empty without propagation).
  PropagationReport propagation;
  // The module's num_partitions as it came in (its header's), before the
  // options and the mesh settled it.
  int64_t declared_partitions = 1;
  // The mesh apply-spec applied ("data=2,model=4"; empty without a spec or
  // --mesh).
  std::string mesh;
  // The pipeline pass's schedules, and the module as it was before that pass
  // rewrote it (verify's one-device reference); null without pipelining.
  PipelineReport pipeline;
  std::unique_ptr<Module> unpipelined;
  // check_collectives: collectives of the partitioned program, and how many
  // of them were compared with a sharding (the rest serve no tiled value).
  int64_t collectives = 0, collectives_checked = 0;
  // The pass that failed, when Compile returned an error ("apply-spec",
  // "verify", "expand-batch-norm", "propagate", "partition").
  std::string failed_pass;
};

// What pipelining `options` ask for (the flag, else the spec's key, with the
// mesh it runs on), or nullopt. Errors: an unreadable spec, no mesh.
struct PipelineRequest {
  PipelineSpec spec;
  Mesh mesh;
  bool fill_nan = false;  // CompileOptions::pipeline_fill_nan
};
StatusOr<std::optional<PipelineRequest>> RequestedPipeline(const CompileOptions& options);

// The pipeline's pass names for `options`, in order ("partition" last when
// it partitions). `meshsplit opt --passes=...` takes the same names.
std::vector<std::string> PipelinePasses(const CompileOptions& options);

// Runs the pipeline on `module` (rewritten in place by the passes before
// partition). On error, `result->failed_pass` (when `result` is given) names
// the pass; the status is that pass's error.
Status Compile(Module& module, const CompileOptions& options, CompileResult* result);

// As above, returning the result (the failed pass is lost).
StatusOr<CompileResult> Compile(Module& module, const CompileOptions& options);

// Loads `path` (HLO text with GSPMD or Shardy shardings, or ONNX;
// import/load.h) and runs the pipeline up to `options.until` on it; the
// module comes back in `module`.
StatusOr<CompileResult> CompileFile(const std::string& path, const CompileOptions& options,
                                    std::unique_ptr<Module>* module);

}  // namespace meshsplit
