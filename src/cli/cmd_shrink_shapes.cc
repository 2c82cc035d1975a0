// `meshsplit shrink-shapes FILE [--max-memory GiB] [--num-partitions N]
// [--propagate] [--min-dim K] [--divisor K] [--shard SPEC.json] [--mesh M]`:
// prints the module with its large dims made small (same ops, same
// shardings, divisibility by every tile count kept; see
// transforms/shrink_shapes.h), the way the conformance runner executes
// cases too large for this machine. With --shard the spec is applied first,
// so the output carries its shardings and keeps its tile counts dividing.
// What changed goes to stderr.
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "cli/shard_flags.h"
#include "compiler/compile.h"
#include "verify/conformance_partitioning.h"
#include "text/printer.h"
#include "transforms/shrink_shapes.h"

namespace meshsplit::cli {
namespace {

struct ShrinkShapesCliOptions {
  std::string file;
  double max_memory_gib = 0;
  bool propagate = false;
  int64_t min_dim = 4;
  int64_t divisor = 0;
  std::string output;
  ShardFlags shard;
};

int RunShrinkShapes(const ShrinkShapesCliOptions& o) {
  ShardFlags shard = o.shard;
  shard.keep_batch_norm = true;  // same ops out as in
  StatusOr<std::unique_ptr<Module>> module = LoadShardedModule(o.file, shard);
  if (!module.ok()) return ReportError(module.status());
  Module& m = **module;
  ShrinkShapesOptions options;
  options.min_dim = o.min_dim;
  options.divisor = o.divisor;
  // Shardings that propagation would add constrain divisibility too: work
  // them out on a copy and let the shrink respect them.
  std::unique_ptr<Module> propagated;
  if (o.propagate) {
    propagated = m.Clone();
    CompileOptions popts;
    popts.until = CompileStage::kPropagated;
    popts.propagation.allow_spmd_sharding_propagation_to_output = {true};
    if (Status st = Compile(*propagated, popts, nullptr); !st.ok()) return ReportError(st);
    options.sharding_source = propagated.get();
  }
  StatusOr<ShrinkShapesReport> report = ShrinkShapes(m, options);
  if (!report.ok()) return ReportError(report.status());
  int64_t peak = EstimatePeakBytes(*m.entry());
  if (o.max_memory_gib > 0 &&
      static_cast<double>(peak) > o.max_memory_gib * static_cast<double>(int64_t{1} << 30))
    return ReportError(Status::Error(
        "shrink-shapes: the shrunk module still needs about " + std::to_string(peak >> 20) +
        " MiB on one device, over --max-memory"));
  std::cerr << "shrink-shapes: " << report->classes_shrunk << " dim classes shrunk, "
            << report->classes_frozen << " kept, " << report->dims_shrunk
            << " instructions changed shape; estimated peak " << (peak >> 10) << " KiB\n";
  for (const std::string& c : report->changes) std::cerr << "shrink-shapes: " << c << "\n";
  for (const std::string& n : report->notes) std::cerr << "shrink-shapes: note: " << n << "\n";
  std::string text = PrintModule(m);
  if (!text.empty() && text.back() != '\n') text += '\n';
  return WriteOutput(o.output, text);
}

const bool kRegistered = RegisterCommand(
    "shrink-shapes",
    "make a module's large dims small, keeping its ops, shardings and tile divisibility",
    [](CLI::App* app) -> std::function<int()> {
      auto o = std::make_shared<ShrinkShapesCliOptions>();
      app->add_option("FILE", o->file, "HLO file ('-' for stdin)")->required();
      app->add_option("--max-memory", o->max_memory_gib,
                      "fail when the shrunk module's estimated one-device peak exceeds this "
                      "many GiB");
      AddNumPartitionsFlag(app, &o->shard.num_partitions,
                           "number of partitions (default: the mesh's, else the module "
                           "header's, else the devices its shardings name)");
      app->add_flag("--propagate", o->propagate,
                    "also keep divisibility by the tile counts sharding propagation infers");
      app->add_option("--min-dim", o->min_dim, "smallest size a shrinkable dim gets")
          ->capture_default_str();
      app->add_option("--divisor", o->divisor,
                      "give a dim of size S about S/K instead of the smallest size (keeps "
                      "proportions; 0 = smallest)")
          ->capture_default_str();
      // Only the spec flags of AddShardFlags: the partitioner's options mean
      // nothing here, and batch norm is always kept.
      app->add_option("--shard", o->shard.spec,
                      "sharding spec JSON, applied first so that its tile counts keep dividing");
      app->add_option("--mesh", o->shard.mesh, "device mesh 'data=2,model=4' (overrides the spec's)");
      AddXlaStrictFlag(app, &o->shard.parse);
      AddOutputFlag(app, &o->output);
      return [o]() { return RunShrinkShapes(*o); };
    });

}  // namespace
}  // namespace meshsplit::cli
