// `run --num-partitions`: partition (or not), split, run, assemble.
#include "verify/run_spmd.h"

#include "ir/computation.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "verify/verify.h"

namespace meshsplit {
namespace {

Shape GlobalOf(const Shape& local, const Sharding& s) {
  if (local.IsTuple()) {
    std::vector<Shape> elems;
    for (int i = 0; i < local.tuple_size(); ++i)
      elems.push_back(GlobalOf(local.tuple_shapes(i), s.IsTuple() ? s.tuple_elements()[i] : s));
    return Shape::Tuple(std::move(elems));
  }
  Shape g = local;
  g.set_layout(std::nullopt);
  if (s.IsTiled() && local.IsArray() && s.TiledDataRank() == local.rank())
    for (int i = 0; i < local.rank(); ++i) g.mutable_dimensions()[i] *= s.TileDim(i);
  return g;
}

}  // namespace

std::vector<Shape> GlobalParameterShapes(const Module& partitioned) {
  std::vector<Shape> out;
  const Computation* entry = partitioned.entry();
  for (int i = 0; i < entry->parameter_count(); ++i) {
    const Instruction* p = entry->parameter(i);
    out.push_back(GlobalOf(p->shape(), ShardingOrReplicated(*p)));
  }
  return out;
}

Shape GlobalResultShape(const Module& partitioned) {
  const Instruction* root = partitioned.entry()->root();
  return GlobalOf(root->shape(), ShardingOrReplicated(*root));
}

StatusOr<Literal> RunModuleOnDevices(Module& module, std::vector<Literal> full_inputs,
                                     const SpmdRunRequest& request) {
  if (request.backend != "threads")
    return Status::Error("backend '" + request.backend +
                         "' is not available in this build (only 'threads')");
  if (request.num_partitions < 1) return Status::Error("--num-partitions must be at least 1");
  if (module.entry() == nullptr) return Status::Error("module has no entry computation");
  SpmdRunOptions run_options;
  run_options.max_while_iterations = request.max_while_iterations;
  if (request.already_partitioned) {
    if (module.num_partitions() != request.num_partitions)
      return Status::Error("the module header says num_partitions=" +
                           std::to_string(module.num_partitions()) + " but " +
                           std::to_string(request.num_partitions) + " were requested");
    MS_RETURN_IF_ERROR(meshsplit::VerifyModule(static_cast<const Module&>(module)));
    return RunSpmd(module, full_inputs, GlobalResultShape(module), request.num_partitions,
                   run_options);
  }
  Shape result_shape = module.entry()->root()->shape();
  MS_ASSIGN_OR_RETURN(std::unique_ptr<Module> partitioned,
                      PropagateAndPartition(module, request.num_partitions, request.propagate,
                                            /*strict=*/false, /*failed_stage=*/nullptr,
                                            request.partition, request.pipeline));
  return RunSpmd(*partitioned, full_inputs, result_shape, request.num_partitions, run_options);
}

}  // namespace meshsplit

namespace meshsplit {

std::unique_ptr<Computation> GlobalSignature(const Module& partitioned) {
  auto c = std::make_unique<Computation>("global_inputs");
  std::vector<Shape> shapes = GlobalParameterShapes(partitioned);
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto p = std::make_unique<Instruction>(
        Opcode::kParameter, partitioned.entry()->parameter(static_cast<int>(i))->name(),
        shapes[i]);
    p->mutable_attrs().parameter_number = static_cast<int64_t>(i);
    c->AddInstruction(std::move(p));
  }
  return c;
}

}  // namespace meshsplit
