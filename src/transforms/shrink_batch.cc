// Batch shrinking (see shrink_batch.h): propagate a batch tiling, then turn
// every tiled dim into a dim that many times smaller and check that nothing
// but shapes had to change.
#include "transforms/shrink_batch.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "ir/computation.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "propagation/propagation.h"
#include "transforms/batch_norm_expander.h"

namespace meshsplit {
namespace {

Status ErrorAt(const Instruction& instr, const std::string& what) {
  return Status::Error("cannot shrink %" + instr.name() + ": " + what, instr.loc());
}

// New dims of one array leaf laid out by `s`: each dim divided by its tile
// count. Replicated / maximal / manual leaves keep their dims.
StatusOr<std::vector<int64_t>> ShrunkDims(const Instruction& instr,
                                          const std::vector<int64_t>& dims,
                                          const Sharding& s) {
  std::vector<int64_t> out = dims;
  if (!s.IsTiled()) return out;
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t tiles = s.TileDim(static_cast<int64_t>(d));
    if (tiles == 1) continue;
    if (dims[d] % tiles != 0)
      return ErrorAt(instr, "dim " + std::to_string(d) + " (size " + std::to_string(dims[d]) +
                                ") derives from the batch but does not divide by " +
                                std::to_string(tiles));
    out[d] = dims[d] / tiles;
  }
  return out;
}

// Shrinks every array leaf of `shape`; `leaf` walks the flattened leaves of
// a tuple sharding (a non-tuple sharding applies to every leaf).
Status ShrinkShape(const Instruction& instr, Shape& shape, const Sharding& s, int64_t& leaf) {
  if (shape.IsTuple()) {
    for (Shape& e : shape.mutable_tuple_shapes())
      MS_RETURN_IF_ERROR(ShrinkShape(instr, e, s, leaf));
    return Status::Ok();
  }
  const Sharding* leaf_sharding = &s;
  if (s.IsTuple()) {
    if (leaf >= static_cast<int64_t>(s.tuple_elements().size()))
      return ErrorAt(instr, "tuple sharding has fewer elements than the shape has leaves");
    leaf_sharding = &s.tuple_elements()[leaf];
  }
  ++leaf;
  if (!shape.IsArray()) return Status::Ok();
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                      ShrunkDims(instr, shape.dimensions(), *leaf_sharding));
  shape.mutable_dimensions() = std::move(dims);
  return Status::Ok();
}

// Attributes that spell sizes along data dims. A shrunk dim must be taken
// whole (slice, dynamic-slice), untouched (pad) or not windowed (windows).
Status AdjustAttributes(Instruction& instr, const Shape& old_operand, const Shape& new_operand) {
  Attributes& a = instr.mutable_attrs();
  auto shrunk = [&](size_t d) {
    return d < old_operand.dimensions().size() &&
           old_operand.dimensions(static_cast<int>(d)) != new_operand.dimensions(static_cast<int>(d));
  };
  switch (instr.opcode()) {
    case Opcode::kSlice:
      for (size_t d = 0; d < a.slice.size(); ++d) {
        if (!shrunk(d)) continue;
        SliceDimension& s = a.slice[d];
        if (s.start != 0 || s.stride != 1 || s.limit != old_operand.dimensions(static_cast<int>(d)))
          return ErrorAt(instr, "slices part of batch-derived dim " + std::to_string(d));
        s.limit = new_operand.dimensions(static_cast<int>(d));
      }
      return Status::Ok();
    case Opcode::kDynamicSlice:
      for (size_t d = 0; d < a.dynamic_slice_sizes.size(); ++d) {
        if (!shrunk(d)) continue;
        if (a.dynamic_slice_sizes[d] != old_operand.dimensions(static_cast<int>(d)))
          return ErrorAt(instr, "dynamic-slices part of batch-derived dim " + std::to_string(d));
        a.dynamic_slice_sizes[d] = new_operand.dimensions(static_cast<int>(d));
      }
      return Status::Ok();
    case Opcode::kPad:
      for (size_t d = 0; d < a.padding.size(); ++d)
        if (shrunk(d) && (a.padding[d].low != 0 || a.padding[d].high != 0 ||
                          a.padding[d].interior != 0))
          return ErrorAt(instr, "pads batch-derived dim " + std::to_string(d));
      return Status::Ok();
    case Opcode::kReduceWindow:
    case Opcode::kSelectAndScatter:
      if (a.window)
        for (size_t d = 0; d < a.window->size(); ++d) {
          const WindowDimension& w = (*a.window)[d];
          if (shrunk(d) && (w.size != 1 || w.stride != 1 || w.padding_low != 0 ||
                            w.padding_high != 0 || w.base_dilation != 1))
            return ErrorAt(instr, "has a window along batch-derived dim " + std::to_string(d));
        }
      return Status::Ok();
    case Opcode::kGather:
    case Opcode::kScatter:
      if (old_operand.dimensions() != new_operand.dimensions())
        return ErrorAt(instr, "gathers/scatters from a batch-derived operand (not supported)");
      return Status::Ok();
    default:
      return Status::Ok();
  }
}

// Keeps the layouts written in `from` on the same leaves of `to`.
void CopyLayouts(const Shape& from, Shape& to) {
  if (from.IsTuple() && to.IsTuple() && from.tuple_size() == to.tuple_size()) {
    for (int i = 0; i < to.tuple_size(); ++i)
      CopyLayouts(from.tuple_shapes(i), to.mutable_tuple_shapes()[i]);
  } else if (from.IsArray() && to.IsArray() && from.rank() == to.rank()) {
    to.set_layout(from.layout());
  }
}

// Ops whose result shape is a function of operand shapes and attributes
// (so InferShape recomputes it), as opposed to ops that spell it.
bool ShapeFollowsOperands(Opcode op) {
  switch (op) {
    case Opcode::kParameter: case Opcode::kConstant: case Opcode::kIota:
    case Opcode::kBroadcast: case Opcode::kReshape: case Opcode::kRng:
    case Opcode::kRngBitGenerator: case Opcode::kCustomCall: case Opcode::kInfeed:
    case Opcode::kBitcast:
      return false;
    default:
      return true;
  }
}

}  // namespace

StatusOr<ShrinkBatchReport> ShrinkBatch(Module& module, const ShrinkBatchOptions& options) {
  if (options.factor < 1) return Status::Error("the shrink factor must be at least 1");
  if (options.parameters.empty()) return Status::Error("name at least one batch parameter");
  Computation* entry = module.entry();
  if (!entry) return Status::Error("module has no entry computation");
  ShrinkBatchReport report;

  // Batch norms have no propagation rule; as reductions they shrink like
  // any other op.
  std::vector<BatchNormDivisor> divisors;
  MS_ASSIGN_OR_RETURN(int64_t expanded, ExpandBatchNorm(module, &divisors));
  if (expanded > 0)
    report.notes.push_back("expanded " + std::to_string(expanded) +
                           " batch-norm ops into reductions and elementwise ops");

  // 1. Only the batch tiling is propagated: the module's own shardings go.
  // `Sharding` custom-calls (ill-formed without a sharding) stand in as
  // copies meanwhile and come back with their sharding at the end.
  std::map<Instruction*, std::unique_ptr<Instruction>> annotations;  // copy -> original
  for (const auto& comp : module.computations()) {
    std::vector<Instruction*> calls;
    for (const auto& instr : comp->instructions())
      if (instr->opcode() == Opcode::kCustomCall && instr->operand_count() == 1 &&
          instr->attrs().custom_call_target == "Sharding")
        calls.push_back(instr.get());
    for (Instruction* call : calls) {
      auto copy = std::make_unique<Instruction>(Opcode::kCopy, call->name() + ".annotation",
                                                call->shape());
      copy->AppendOperand(call->operand(0));
      copy->set_loc(call->loc());
      Instruction* stand_in = comp->AddInstruction(std::move(copy));
      auto kept = std::make_unique<Instruction>(Opcode::kCustomCall, call->name(), call->shape());
      kept->mutable_attrs() = call->attrs();
      if (call->has_sharding()) kept->set_sharding(*call->sharding());
      kept->set_loc(call->loc());
      call->ReplaceAllUsesWith(stand_in);
      if (comp->root() == call) comp->set_root(stand_in);
      comp->RemoveInstruction(call);
      annotations.emplace(stand_in, std::move(kept));
    }
    comp->SortTopologically();
  }
  for (const auto& comp : module.computations())
    for (const auto& instr : comp->instructions()) instr->clear_sharding();
  std::vector<Instruction*> open_parameters;  // tuples whose elements' reads decide their shapes
  for (const std::string& name : options.parameters) {
    Instruction* p = nullptr;
    for (Instruction* q : entry->parameters())
      if (q->name() == name) p = q;
    if (!p) return Status::Error("no entry parameter named '" + name + "'");
    // The batch tiling of one array: `factor` tiles along `dim`.
    auto batch_tiling = [&](const Shape& shape, int64_t dim,
                            const std::string& what) -> StatusOr<Sharding> {
      if (!shape.IsArray() || dim < 0 || dim >= shape.rank())
        return Status::Error(what + " (" + shape.ToString(false) + ") has no dim " +
                             std::to_string(dim));
      int64_t batch = shape.dimensions(static_cast<int>(dim));
      if (batch % options.factor != 0)
        return Status::Error(what + ": batch " + std::to_string(batch) +
                             " does not divide by " + std::to_string(options.factor));
      std::vector<int64_t> tiles(shape.rank(), 1);
      tiles[dim] = options.factor;
      return Sharding::Tile(TileAssignment::Iota(tiles));
    };
    if (options.tuple_batch_dims.empty()) {
      MS_ASSIGN_OR_RETURN(Sharding tiled, batch_tiling(p->shape(), options.batch_dim,
                                                       "parameter '" + name + "'"));
      p->set_sharding(std::move(tiled));
      continue;
    }
    if (!p->shape().IsTuple())
      return Status::Error("parameter '" + name + "' (" + p->shape().ToString(false) +
                           ") is not a tuple");
    std::vector<Sharding> elements;
    for (int64_t e = 0; e < p->shape().tuple_size(); ++e) {
      const Shape& element = p->shape().tuple_shapes(static_cast<int>(e));
      if (!element.IsArray())
        return Status::Error("parameter '" + name + "': element " + std::to_string(e) +
                             " is not an array");
      elements.push_back(Sharding::Replicate());
    }
    for (const auto& [e, dim] : options.tuple_batch_dims) {
      if (e < 0 || e >= p->shape().tuple_size())
        return Status::Error("parameter '" + name + "' has no tuple element " + std::to_string(e));
      MS_ASSIGN_OR_RETURN(elements[e],
                          batch_tiling(p->shape().tuple_shapes(static_cast<int>(e)), dim,
                                       "parameter '" + name + "' element " + std::to_string(e)));
    }
    if (options.open_tuple_elements.empty()) {
      p->set_sharding(Sharding::Tuple(std::move(elements)));
      continue;
    }
    // Open elements: the fixed ones are pinned on their reads and the
    // parameter itself is left to propagation.
    std::set<int64_t> open(options.open_tuple_elements.begin(), options.open_tuple_elements.end());
    for (Instruction* user : p->users()) {
      if (user->opcode() != Opcode::kGetTupleElement)
        return Status::Error("parameter '" + name + "' has open elements but is read whole by %" +
                             user->name());
      const int64_t e = user->attrs().tuple_index;
      if (!open.count(e)) user->set_sharding(elements[e]);
    }
    open_parameters.push_back(p);
  }
  if (options.factor == 1) return report;
  int64_t saved_partitions = module.num_partitions();
  module.set_num_partitions(options.factor);
  PropagationOptions popts;
  popts.allow_spmd_sharding_propagation_to_output = {true};
  MS_RETURN_IF_ERROR(PropagateShardings(module, popts).status());

  // 2. New shapes from the propagated tilings; attributes that spell sizes
  // are adjusted against the operands' old and new shapes.
  std::map<const Instruction*, Shape> old_shapes;
  for (const auto& comp : module.computations())
    for (const auto& instr : comp->instructions()) old_shapes[instr.get()] = instr->shape();
  for (const auto& comp : module.computations())
    for (const auto& instr : comp->instructions()) {
      if (!instr->has_sharding()) continue;
      Shape shape = instr->shape();
      int64_t leaf = 0;
      MS_RETURN_IF_ERROR(ShrinkShape(*instr, shape, *instr->sharding(), leaf));
      if (shape != instr->shape()) {
        if (instr->opcode() == Opcode::kConstant)
          return ErrorAt(*instr, "is a constant with a batch-derived dim");
        instr->set_shape(std::move(shape));
        ++report.instructions_shrunk;
      }
    }
  for (Instruction* p : open_parameters) {
    Shape shape = p->shape();
    for (const Instruction* read : p->users())
      shape.mutable_tuple_shapes()[read->attrs().tuple_index] = read->shape();
    if (shape != p->shape()) {
      p->set_shape(std::move(shape));
      ++report.instructions_shrunk;
    }
  }
  // Ops whose result shape follows from their operands are re-inferred, so
  // that an op without a propagation rule (batch-norm-training, say) still
  // follows its shrunk operands.
  for (const auto& comp : module.computations())
    for (Instruction* instr : comp->MakePostOrder()) {
      if (!ShapeFollowsOperands(instr->opcode())) continue;
      auto inferred = InferShape(*instr);
      if (inferred.ok() && !inferred->Compatible(instr->shape())) {
        Shape shape = *inferred;
        CopyLayouts(instr->shape(), shape);
        instr->set_shape(std::move(shape));
        ++report.instructions_shrunk;
      }
    }
  for (const auto& comp : module.computations())
    for (const auto& instr : comp->instructions()) {
      if (instr->operand_count() == 0) continue;
      const Instruction* operand = instr->operand(0);
      if (operand->shape().IsArray())
        MS_RETURN_IF_ERROR(AdjustAttributes(*instr, old_shapes[operand], operand->shape()));
    }

  // Expanded batch norms average over the shrunk batch, so that activations
  // stay normalised (other divisors, e.g. of a mean loss, are the model's).
  for (const BatchNormDivisor& d : divisors)
    d.constant->set_literal(Literal::ScalarOfType(
        d.constant->shape().element_type(), ElementsPerFeature(d.operand->shape(), d.feature_index)));

  // 3. The result is an ordinary module without propagated shardings;
  // stale layout text goes.
  for (const auto& comp : module.computations())
    for (const auto& instr : comp->instructions()) instr->clear_sharding();
  for (auto& [stand_in, kept] : annotations) {
    Computation* comp = stand_in->parent();
    kept->set_shape(stand_in->shape());
    kept->AppendOperand(stand_in->operand(0));
    Instruction* call = comp->AddInstruction(std::move(kept));
    stand_in->ReplaceAllUsesWith(call);
    if (comp->root() == stand_in) comp->set_root(call);
    comp->RemoveInstruction(stand_in);
  }
  for (const auto& comp : module.computations()) comp->SortTopologically();
  auto& header = module.mutable_header_attrs();
  auto it = std::remove_if(header.begin(), header.end(), [](const auto& kv) {
    return kv.first == "entry_computation_layout";
  });
  if (it != header.end()) {
    header.erase(it, header.end());
    report.notes.push_back("dropped entry_computation_layout (its shapes changed)");
  }
  module.set_num_partitions(saved_partitions);
  // Anything the tiling did not reach consistently shows up here.
  MS_RETURN_IF_ERROR(VerifyModule(module));
  return report;
}

}  // namespace meshsplit
