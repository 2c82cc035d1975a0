// The partitioner driver: validates shardings, walks a computation in post
// order calling one handler per opcode (the switch below names every opcode,
// so a new one cannot be forgotten), reshards the root, and assembles the
// output module. The entry is partitioned with its parameters' own
// shardings; while/conditional/call bodies recursively with the shardings
// their caller imposes (handlers/control_flow.cc). Called computations of
// ops that run unpartitioned are copied verbatim.
#include "partitioner/partitioner.h"

#include <iostream>

#include "partitioner/context.h"
#include "support/check.h"

namespace meshsplit {
namespace spmd {

bool IsTriviallyReplicated(const Sharding& s) {
  if (s.IsTuple()) {
    for (const Sharding& e : s.tuple_elements())
      if (!IsTriviallyReplicated(e)) return false;
    return true;
  }
  return s.IsReplicated() || s.IsMaximal() || s.IsUnknown();
}

std::string SpmdShared::ComputationName(const std::string& name) {
  if (computation_names.insert(name).second) return name;
  for (int i = 1;; ++i) {
    std::string candidate = name + ".spmd" + (i == 1 ? "" : "." + std::to_string(i));
    if (computation_names.insert(candidate).second) return candidate;
  }
}

// `s` on every leaf of `shape`, nested as the shape is: a nested tuple element
// gets a tuple of its own (a bare sharding there would print as one leaf where
// the shape has several; found by fuzz_partition on a copy of a nested tuple).
static Sharding SpreadOverTuple(const Sharding& s, const Shape& shape) {
  if (!shape.IsTuple()) return s;
  std::vector<Sharding> elems;
  for (const Shape& e : shape.tuple_shapes()) elems.push_back(SpreadOverTuple(s, e));
  return Sharding::Tuple(std::move(elems));
}

Sharding SpmdContext::ShardingOf(const Instruction& instr) const {
  if (param_shardings_ != nullptr && instr.opcode() == Opcode::kParameter) {
    const int64_t i = instr.attrs().parameter_number;
    if (i >= 0 && i < static_cast<int64_t>(param_shardings_->size()))
      return (*param_shardings_)[i];
  }
  Sharding s = instr.has_sharding() ? *instr.sharding() : Sharding::Replicate();
  s = NormalizeForPartitioning(NestTupleSharding(s, instr.shape()));
  // Shardings that do not fit the shape (XLA lets infeed/outfeed annotate
  // their token too) are read as replicated.
  if (s.IsTuple() && (!instr.shape().IsTuple() ||
                      s.tuple_elements().size() != static_cast<size_t>(instr.shape().tuple_size())))
    s = Sharding::Replicate();
  if (instr.shape().IsTuple() && !s.IsTuple()) return SpreadOverTuple(s, instr.shape());
  return s;
}

const PartitionedValue& SpmdContext::Get(const Instruction* instr) const {
  auto it = values_.find(instr);
  MS_CHECK_MSG(it != values_.end(), "operand " << instr->name() << " not partitioned yet");
  return it->second;
}

Computation* SpmdContext::CloneCalled(const Computation* c) {
  auto it = shared_->verbatim.find(c);
  if (it != shared_->verbatim.end()) return it->second;
  auto out = std::make_unique<Computation>(shared_->ComputationName(c->name()));
  std::unordered_map<const Instruction*, Instruction*> map;
  for (Instruction* in : c->MakePostOrder()) {
    Opcode op = in->opcode();
    if (op == Opcode::kCustomCall && in->attrs().custom_call_target == "Sharding")
      op = Opcode::kCopy;
    auto copy = std::make_unique<Instruction>(op, in->name(), in->shape());
    copy->mutable_attrs() = in->attrs();
    if (op == Opcode::kCopy) copy->mutable_attrs().custom_call_target.clear();
    if (in->has_literal()) copy->set_literal(in->literal());
    std::vector<Computation*> called;
    for (const Computation* cc : in->called_computations()) called.push_back(CloneCalled(cc));
    copy->set_called_computations(called);
    copy->set_loc(in->loc());
    for (Instruction* o : in->operands()) copy->AppendOperand(map.at(o));
    map[in] = out->AddInstruction(std::move(copy));
  }
  if (c->root() != nullptr) out->set_root(map.at(c->root()));
  out->set_execution_thread(c->execution_thread());
  Computation* raw = out.get();
  shared_->computations.push_back(std::move(out));
  shared_->verbatim[c] = raw;
  return raw;
}

Instruction* SpmdContext::Clone(const Instruction& instr, Shape shape,
                                std::vector<Instruction*> operands) {
  std::vector<Computation*> called;
  for (const Computation* cc : instr.called_computations()) called.push_back(CloneCalled(cc));
  return CloneWithCalled(instr, std::move(shape), std::move(operands), std::move(called));
}

Instruction* SpmdContext::CloneWithCalled(const Instruction& instr, Shape shape,
                                          std::vector<Instruction*> operands,
                                          std::vector<Computation*> called) {
  // The first copy of an input instruction keeps its (reserved) name.
  std::string name = shared_->named.insert(&instr).second
                         ? instr.name()
                         : b.module()->UniqueInstructionName(instr.name());
  auto c = std::make_unique<Instruction>(instr.opcode(), name, std::move(shape));
  c->mutable_attrs() = instr.attrs();
  if (instr.has_literal()) c->set_literal(instr.literal());
  c->set_called_computations(std::move(called));
  c->set_loc(instr.loc());
  for (Instruction* o : operands) c->AppendOperand(o);
  return b.AddInstruction(std::move(c));
}

Status SpmdContext::Fallback(const Instruction& instr, const std::string& why) {
  SpmdBuilder::ScopedCause rule(b, instr, "no partitioning rule, runs on whole values");
  // Manual values with untiled data dims are whole already: running on them
  // as they are moves nothing (a stage's collective-permute, say).
  auto whole_already = [](const Sharding& s) {
    if (IsTriviallyReplicated(s) || s.IsManual()) return true;
    if (!s.IsTiled() || !s.HasManualSubgroup()) return false;
    for (int64_t d = 0; d < s.TiledDataRank(); ++d)
      if (s.TileDim(d) != 1) return false;
    return true;
  };
  bool moves_data = !whole_already(ShardingOf(instr));
  std::vector<Instruction*> operands;
  for (int i = 0; i < instr.operand_count(); ++i) {
    const PartitionedValue& v = Get(instr.operand(i));
    moves_data |= !whole_already(v.sharding);
    // Values of a (partially) manual region stay manual; only their data
    // dims are made whole.
    Sharding whole = Sharding::Replicate();
    if (!v.shape.IsTuple() && v.sharding.HasManualSubgroup()) {
      std::vector<int64_t> all(v.sharding.TiledDataRank());
      for (size_t d = 0; d < all.size(); ++d) all[d] = d;
      whole = PartiallyReplicateTiledShardingOnDims(v.sharding, all);
    }
    operands.push_back(Reshard(b, v, whole).hlo);
  }
  if (moves_data) {
    std::string msg = std::string(OpcodeName(instr.opcode())) + " %" + instr.name() +
                      " has no partitioning rule" + (why.empty() ? "" : " (" + why + ")") +
                      "; it runs replicated";
    if (options.strict) return Status::Error(msg, instr.loc());
    if (options.warn_on_fallback)
      std::cerr << FormatDiagnostic(instr.loc(), "warning", msg) << "\n";
  }
  Instruction* full = Clone(instr, instr.shape(), operands);
  PartitionedValue v{full, instr.shape(), Sharding::Replicate()};
  Set(instr, Reshard(b, v, ShardingOf(instr)));
  return Status::Ok();
}

// handlers/gather_scatter.cc
Status HandleGather(SpmdContext& ctx, const Instruction& instr);
Status HandleScatter(SpmdContext& ctx, const Instruction& instr);
// handlers/leaves.cc: an error outside manual regions, as in XLA.
Status HandlePartitionId(SpmdContext& ctx, const Instruction& instr);

namespace {

Status PartitionInstruction(SpmdContext& ctx, const Instruction& instr) {
  switch (instr.opcode()) {
    case Opcode::kParameter:
      return HandleParameter(ctx, instr);
    case Opcode::kConstant:
      return HandleConstant(ctx, instr);
    case Opcode::kIota:
      return HandleIota(ctx, instr);

    case Opcode::kAbs: case Opcode::kCbrt: case Opcode::kCeil: case Opcode::kClz:
    case Opcode::kCos: case Opcode::kErf: case Opcode::kExp: case Opcode::kExpm1:
    case Opcode::kFloor: case Opcode::kImag: case Opcode::kIsFinite: case Opcode::kLog:
    case Opcode::kLog1p: case Opcode::kLogistic: case Opcode::kNegate: case Opcode::kNot:
    case Opcode::kPopcnt: case Opcode::kReal: case Opcode::kRoundNearestAfz:
    case Opcode::kRoundNearestEven: case Opcode::kRsqrt: case Opcode::kSign:
    case Opcode::kSin: case Opcode::kSqrt: case Opcode::kTan: case Opcode::kTanh:
    case Opcode::kCopy: case Opcode::kConvert: case Opcode::kReducePrecision:
    case Opcode::kAdd: case Opcode::kAnd: case Opcode::kAtan2: case Opcode::kComplex:
    case Opcode::kDivide: case Opcode::kMaximum: case Opcode::kMinimum:
    case Opcode::kMultiply: case Opcode::kOr: case Opcode::kPower:
    case Opcode::kRemainder: case Opcode::kShiftLeft:
    case Opcode::kShiftRightArithmetic: case Opcode::kShiftRightLogical:
    case Opcode::kSubtract: case Opcode::kXor: case Opcode::kCompare:
    case Opcode::kSelect: case Opcode::kClamp: case Opcode::kStochasticConvert:
      return HandleElementwise(ctx, instr);

    case Opcode::kBroadcast:
      return HandleBroadcast(ctx, instr);
    case Opcode::kReshape:
      return HandleReshape(ctx, instr);
    case Opcode::kTranspose:
      return HandleTranspose(ctx, instr);
    case Opcode::kSlice:
      return HandleSlice(ctx, instr);
    case Opcode::kConcatenate:
      return HandleConcatenate(ctx, instr);
    case Opcode::kPad:  // handlers/data_movement.cc
      return HandlePad(ctx, instr);
    case Opcode::kReverse:
      return HandleReverse(ctx, instr);
    case Opcode::kDynamicSlice:
      return HandleDynamicSlice(ctx, instr);
    case Opcode::kDynamicUpdateSlice:
      return HandleDynamicUpdateSlice(ctx, instr);
    case Opcode::kSort:
      return HandleSort(ctx, instr);
    case Opcode::kRng:
      return HandleRng(ctx, instr);
    case Opcode::kRngBitGenerator:
      return HandleRngBitGenerator(ctx, instr);
    case Opcode::kMap:
      return HandlePassThrough(ctx, instr);
    case Opcode::kReduceWindow:
      return HandleReduceWindow(ctx, instr);  // handlers/window.cc
    case Opcode::kSelectAndScatter:
      return HandleSelectAndScatter(ctx, instr);
    case Opcode::kReduce:
      return HandleReduce(ctx, instr);
    case Opcode::kDot:
      return HandleDot(ctx, instr);
    case Opcode::kConvolution:
      return HandleConvolution(ctx, instr);
    case Opcode::kTuple:
      return HandleTuple(ctx, instr);
    case Opcode::kGetTupleElement:
      return HandleGetTupleElement(ctx, instr);
    case Opcode::kCustomCall:
      return HandleCustomCall(ctx, instr);
    case Opcode::kWhile:
      return HandleWhile(ctx, instr);
    case Opcode::kConditional:
      return HandleConditional(ctx, instr);
    case Opcode::kCall:
      return HandleCall(ctx, instr);
    case Opcode::kGather: return HandleGather(ctx, instr);  // handlers/gather_scatter.cc
    case Opcode::kScatter: return HandleScatter(ctx, instr);
    case Opcode::kOutfeed:
      return HandleOutfeed(ctx, instr);  // handlers/feeds.cc
    case Opcode::kCholesky: return HandleCholesky(ctx, instr);  // handlers/linalg.cc
    case Opcode::kTriangularSolve: return HandleTriangularSolve(ctx, instr);
    case Opcode::kRaggedDot: return HandleRaggedDot(ctx, instr);
    case Opcode::kFft:
      return HandleFft(ctx, instr);  // handlers/fft.cc
    case Opcode::kBitcastConvert:
      return HandleBitcastConvert(ctx, instr);  // handlers/shape_ops.cc
    case Opcode::kOptimizationBarrier:
      return HandleOptimizationBarrier(ctx, instr);  // handlers/annotations.cc
    case Opcode::kTopK:
      return HandleTopK(ctx, instr);  // handlers/linalg.cc, as the TopK custom-call
    case Opcode::kAddDependency:
      return HandleAddDependency(ctx, instr);  // handlers/dependency_size.cc
    case Opcode::kGetDimensionSize:
      return HandleGetDimensionSize(ctx, instr);
    case Opcode::kPartitionId:
      return HandlePartitionId(ctx, instr);  // handlers/leaves.cc

    // No rule yet: run on whole values.
    // TODO(partitioner-core): halo exchange for convolution / windowed ops,
    // gather/scatter pass-through dims.
    case Opcode::kReplicaId: case Opcode::kAfterAll:
    case Opcode::kBitcast:
    case Opcode::kBatchNormTraining: case Opcode::kBatchNormInference:
    case Opcode::kBatchNormGrad:
    case Opcode::kDomain:
    case Opcode::kRngGetAndUpdateState:
      return ctx.Fallback(instr);
    case Opcode::kInfeed:
      return HandleInfeed(ctx, instr);  // handlers/feeds.cc
    case Opcode::kAllReduce: case Opcode::kAllGather: case Opcode::kReduceScatter:
    case Opcode::kAllToAll: case Opcode::kCollectivePermute:
      return HandleInputCollective(ctx, instr);  // handlers/collectives.cc

    // Fusion and the asynchronous pairs (handlers/async_fusion.cc).
    case Opcode::kFusion:
      return HandleFusion(ctx, instr);
    case Opcode::kAsyncStart:
      return HandleAsyncStart(ctx, instr);
    case Opcode::kAsyncUpdate:
      return HandleAsyncUpdate(ctx, instr);
    case Opcode::kAsyncDone: case Opcode::kCopyDone:
      return HandleDone(ctx, instr);
    case Opcode::kCopyStart:
      return HandleCopyStart(ctx, instr);
    case Opcode::kAllReduceStart: case Opcode::kAllReduceDone:
    case Opcode::kAllGatherStart: case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteStart: case Opcode::kCollectivePermuteDone:
      return HandleAsyncCollective(ctx, instr);

    // Transfers, broadcast, ragged exchange, dynamic sizes (handlers/p2p_dynamic.cc).
    case Opcode::kSend: case Opcode::kSendDone: case Opcode::kRecv: case Opcode::kRecvDone:
      return HandleSendRecv(ctx, instr);
    case Opcode::kCollectiveBroadcast: case Opcode::kRaggedAllToAll:
      return HandleGroupCollective(ctx, instr);
    case Opcode::kSetDimensionSize:
      return HandleSetDimensionSize(ctx, instr);
    case Opcode::kDynamicReshape:
      return HandleDynamicReshape(ctx, instr);
  }
  return ctx.Fallback(instr);
}

Status ValidateShardings(const Module& input, int64_t n) {
  for (const auto& comp : input.computations()) {
    for (const auto& instr : comp->instructions()) {
      if (!instr->has_sharding()) continue;
      if (instr->opcode() == Opcode::kInfeed || instr->opcode() == Opcode::kOutfeed) continue;
      const Shape& shape = instr->shape();
      Status s;
      if (shape.IsTuple()) {
        std::vector<int64_t> ranks;
        for (const Shape& e : shape.tuple_shapes()) ranks.push_back(e.IsArray() ? e.rank() : 0);
        // A nested tuple's sharding lists its leaves (XLA's form): validate
        // them leaf by leaf; otherwise only the top level.
        const Sharding nested = NestTupleSharding(*instr->sharding(), shape);
        if (!nested.IsTuple() || nested.tuple_elements().size() != ranks.size()) {
          s = instr->sharding()->ValidateTuple(ranks, n);
        } else {
          for (size_t i = 0; i < ranks.size() && s.ok(); ++i)
            if (!shape.tuple_shapes(i).IsTuple())
              s = nested.tuple_elements()[i].Validate(ranks[i], n);
        }
      } else if (instr->sharding()->IsTuple()) {
        s = Status::Error("tuple sharding on a non-tuple value");
      } else if (shape.IsArray()) {
        s = instr->sharding()->Validate(shape.rank(), n);
      }
      if (!s.ok())
        return Status::Error(std::string(OpcodeName(instr->opcode())) + " %" +
                                 instr->name() + ": " + s.message(),
                             instr->loc());
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Instruction*> PartitionComputationBody(SpmdContext& ctx, const Computation& in,
                                                const Sharding& root_sharding) {
  SpmdBuilder& builder = ctx.b;
  for (Instruction* instr : in.MakePostOrder()) {
    SpmdBuilder::ScopedCause cause(builder, *instr);  // provenance of its collectives
    MS_RETURN_IF_ERROR(PartitionInstruction(ctx, *instr));
    if (!builder.error().ok())
      return Status::Error(std::string(OpcodeName(instr->opcode())) + " %" + instr->name() +
                               ": " + builder.error().message(),
                           instr->loc());
  }
  const Instruction* in_root = in.root();
  if (in_root == nullptr) return Status::Error("computation " + in.name() + " has no root");
  PartitionedValue root = Reshard(builder, ctx.Get(in_root), root_sharding);
  Instruction* root_hlo = root.hlo;
  if (root_hlo->opcode() == Opcode::kParameter || root_hlo->has_sharding())
    root_hlo = builder.Add(Opcode::kCopy, root_hlo->shape(), {root_hlo}, in_root->name());
  root_hlo->set_sharding(FlattenTupleSharding(root.sharding));
  MS_RETURN_IF_ERROR(builder.error());
  return root_hlo;
}

StatusOr<Computation*> SpmdContext::PartitionCalled(const Computation* c,
                                                    const std::vector<Sharding>& param_shardings,
                                                    const Sharding& root_sharding) {
  std::string key = root_sharding.ToString();
  for (const Sharding& s : param_shardings) key += ";" + s.ToString();
  auto it = shared_->partitioned.find({c, key});
  if (it != shared_->partitioned.end()) return it->second;
  auto out = std::make_unique<Computation>(shared_->ComputationName(c->name()));
  out->set_execution_thread(c->execution_thread());
  SpmdBuilder builder(&b.state(), out.get());
  SpmdContext sub(&builder, options, num_partitions, shared_, &param_shardings);
  MS_ASSIGN_OR_RETURN(Instruction* root, PartitionComputationBody(sub, *c, root_sharding));
  out->set_root(root);
  Computation* raw = out.get();
  shared_->computations.push_back(std::move(out));
  shared_->partitioned[{c, key}] = raw;
  return raw;
}

}  // namespace spmd

StatusOr<std::unique_ptr<Module>> PartitionModule(const Module& input,
                                                  const PartitionOptions& options) {
  using namespace spmd;
  const int64_t n = options.num_partitions > 0 ? options.num_partitions
                                               : input.num_partitions();
  if (n < 1) return Status::Error("num_partitions must be at least 1");
  if (input.entry() == nullptr) return Status::Error("module has no entry computation");
  MS_RETURN_IF_ERROR(ValidateShardings(input, n));

  auto out = std::make_unique<Module>(input.name());
  out->set_num_partitions(n);
  out->set_replica_count(input.replica_count());
  for (const auto& kv : input.header_attrs())
    if (kv.first != "entry_computation_layout") out->mutable_header_attrs().push_back(kv);
  // Input names keep their meaning in the output; new instructions get
  // fresh ones.
  for (const auto& comp : input.computations()) {
    out->ReserveName(comp->name());
    for (const auto& instr : comp->instructions()) out->ReserveName(instr->name());
  }

  SpmdModuleState state;
  state.module = out.get();
  SpmdShared shared;
  shared.state = &state;
  const Computation* in_entry = input.entry();
  auto entry = std::make_unique<Computation>(shared.ComputationName(in_entry->name()));
  SpmdBuilder builder(&state, entry.get());
  SpmdContext ctx(&builder, options, n, &shared);
  const Instruction* in_root = in_entry->root();
  if (in_root == nullptr) return Status::Error("entry computation has no root");
  MS_ASSIGN_OR_RETURN(Instruction* root_hlo,
                      PartitionComputationBody(ctx, *in_entry, ctx.ShardingOf(*in_root)));
  if (in_root->has_sharding()) root_hlo->set_sharding(*in_root->sharding());
  entry->set_root(root_hlo);
  MS_RETURN_IF_ERROR(builder.error());

  // Callees before callers: reducers, verbatim and partitioned called
  // computations (each after the ones it calls), then the entry.
  for (auto& c : state.new_computations) out->AddComputation(std::move(c));
  for (auto& c : shared.computations) out->AddComputation(std::move(c));
  out->set_entry(out->AddComputation(std::move(entry)));
  return out;
}

StatusOr<bool> PartitionPass::Run(Module& module) {
  MS_ASSIGN_OR_RETURN(std::unique_ptr<Module> out, PartitionModule(module, options_));
  // Move the partitioned computations into `module`, replacing its own.
  std::vector<Computation*> old;
  for (const auto& c : module.computations()) old.push_back(c.get());
  module.set_entry(nullptr);
  for (Computation* c : old) module.RemoveComputation(c);
  std::vector<Computation*> order;
  for (const auto& c : out->computations()) order.push_back(c.get());
  Computation* new_entry = nullptr;
  const Computation* out_entry = out->entry();
  for (Computation* c : order) {
    std::unique_ptr<Computation> owned = out->ReleaseComputation(c);
    for (const auto& instr : owned->instructions()) module.ReserveName(instr->name());
    Computation* added = module.AddComputation(std::move(owned));
    if (c == out_entry) new_entry = added;
  }
  module.set_entry(new_entry);
  module.set_num_partitions(out->num_partitions());
  module.mutable_header_attrs() = out->header_attrs();
  return true;
}

}  // namespace meshsplit
