// The interpreter driver: evaluation order, value lifetimes (a value is freed,
// or its buffer handed to the consuming kernel, at its last use), the
// dispatch switch over every opcode, and the tuple/control-flow ops that need
// the driver itself (while, conditional, call).
#include "runtime/interpreter.h"

#include <algorithm>
#include <ctime>
#include <optional>
#include <unordered_set>

#include "runtime/kernels.h"
#include "runtime/loop_fusion.h"
#include "runtime/streaming.h"

namespace meshsplit {
namespace interp {
namespace {

bool ShapeSupported(const Shape& s) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple_shapes())
      if (!ShapeSupported(e)) return false;
    return true;
  }
  if (s.IsToken()) return true;
  return IsSupportedType(s.element_type());
}

std::string FirstUnsupportedType(const Shape& s) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple_shapes()) {
      std::string t = FirstUnsupportedType(e);
      if (!t.empty()) return t;
    }
    return "";
  }
  if (s.IsToken() || IsSupportedType(s.element_type())) return "";
  return std::string(PrimitiveTypeName(s.element_type()));
}

Status NotSupported(const Instruction& instr) {
  return InstrError(instr, std::string(OpcodeName(instr.opcode())) +
                               " is not supported by the interpreter");
}

StatusOr<Literal> EvalTuple(KernelArgs& k) {
  std::vector<Literal> elems;
  elems.reserve(k.ops.size());
  for (size_t i = 0; i < k.ops.size(); ++i)
    elems.push_back(TakeOrCopy(k, static_cast<int>(i)));
  return Literal::MakeTuple(std::move(elems));
}

StatusOr<Literal> EvalGetTupleElement(KernelArgs& k) {
  const Literal& t = k.op(0);
  int64_t i = k.instr.attrs().tuple_index;
  if (!t.shape().IsTuple() || i < 0 || i >= static_cast<int64_t>(t.elements().size()))
    return InstrError(k.instr, "tuple index " + std::to_string(i) + " out of range for " +
                                   t.shape().ToString(false));
  if (k.donatable[0]) return std::move(k.ops[0]->elements()[i]);
  return CopyOf(t.elements()[i]);
}

StatusOr<Literal> EvalWhile(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (instr.called_computations().size() < 2)
    return InstrError(instr, "while needs a condition and a body");
  Literal state = TakeOrCopy(k, 0);
  const int64_t limit = k.interp.ctx().max_while_iterations;
  for (int64_t iter = 0;; ++iter) {
    MS_ASSIGN_OR_RETURN(Literal pred, k.interp.Call(*instr.while_condition(), {&state}));
    if (!pred.shape().IsArray() || pred.element_type() != PrimitiveType::PRED ||
        pred.element_count() != 1)
      return InstrError(instr, "while condition must return pred[]");
    if (pred.data<uint8_t>()[0] == 0) break;
    // Checked before the body runs, so a loop of exactly `limit` iterations
    // still completes; a condition that never turns false (valid HLO) would
    // otherwise hang the run.
    if (limit > 0 && iter >= limit)
      return InstrError(instr, "while loop %" + instr.name() + " did not end within " +
                                   std::to_string(limit) +
                                   " iterations (the interpreter's limit; "
                                   "--max-while-iterations raises it, 0 removes it)");
    std::vector<Literal> args;
    args.push_back(std::move(state));
    MS_ASSIGN_OR_RETURN(state, k.interp.Run(*instr.while_body(), std::move(args)));
  }
  return state;
}

static double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

StatusOr<Literal> EvalConditional(KernelArgs& k) {
  const Instruction& instr = k.instr;
  const auto& branches = instr.called_computations();
  if (branches.empty()) return InstrError(instr, "conditional has no branches");
  const Literal& selector = k.op(0);
  int64_t branch;
  if (selector.element_type() == PrimitiveType::PRED) {
    // pred: true runs the first computation, false the second.
    branch = selector.data<uint8_t>()[0] ? 0 : 1;
  } else {
    branch = ScalarIndex(selector);
    // XLA: an out-of-range index selects the last branch.
    if (branch < 0 || branch >= static_cast<int64_t>(branches.size()))
      branch = static_cast<int64_t>(branches.size()) - 1;
  }
  if (branch >= static_cast<int64_t>(branches.size()) ||
      branch + 1 >= static_cast<int64_t>(k.ops.size()))
    return InstrError(instr, "conditional branch " + std::to_string(branch) + " has no operand");
  std::vector<Literal> args;
  args.push_back(TakeOrCopy(k, static_cast<int>(branch + 1)));
  std::vector<BranchRun>* trace = k.interp.ctx().branch_trace;
  if (trace == nullptr) return k.interp.Run(*branches[branch], std::move(args));
  const double start = ThreadCpuSeconds();
  StatusOr<Literal> out = k.interp.Run(*branches[branch], std::move(args));
  trace->push_back({branches[branch], ThreadCpuSeconds() - start});
  return out;
}

StatusOr<Literal> EvalCall(KernelArgs& k) {
  if (k.instr.to_apply() == nullptr) return InstrError(k.instr, "call has no computation");
  std::vector<Literal> args;
  for (size_t i = 0; i < k.ops.size(); ++i)
    args.push_back(TakeOrCopy(k, static_cast<int>(i)));
  return k.interp.Run(*k.instr.to_apply(), std::move(args));
}

StatusOr<Literal> EvalCopyLike(KernelArgs& k) {
  return TakeOrCopy(k, 0);
}

// Elementwise kernels index result and operands with one linear index, so
// the dimensions (and, where the op keeps the type, the element type) must
// agree. Checked here once because the module may not have been verified.
Status CheckElementwise(const KernelArgs& k) {
  const Instruction& instr = k.instr;
  const Shape& out = instr.shape();
  if (!out.IsArray()) return InstrError(instr, "elementwise op needs an array result");
  Opcode op = instr.opcode();
  for (size_t i = 0; i < k.ops.size(); ++i) {
    const Shape& s = k.ops[i]->shape();
    bool scalar_ok = s.IsArray() && s.rank() == 0 &&
                     ((op == Opcode::kSelect && i == 0) || (op == Opcode::kClamp && i != 1));
    if (!s.IsArray() || (s.dimensions() != out.dimensions() && !scalar_ok))
      return InstrError(instr, "operand " + std::to_string(i) + " " + s.ToString(false) +
                                   " does not match the result " + out.ToString(false));
  }
  PrimitiveType want;
  switch (op) {
    case Opcode::kCompare: case Opcode::kIsFinite: want = PrimitiveType::PRED; break;
    case Opcode::kConvert: return Status::Ok();
    case Opcode::kSelect: case Opcode::kClamp: want = k.ops[1]->element_type(); break;
    default: want = k.ops.empty() ? out.element_type() : k.ops[0]->element_type(); break;
  }
  if (out.element_type() != want)
    return InstrError(instr, "result type " + std::string(PrimitiveTypeName(out.element_type())) +
                                 " should be " + std::string(PrimitiveTypeName(want)));
  return Status::Ok();
}

StatusOr<Literal> Dispatch(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (IsComplexKernel(k)) return EvalComplex(k);  // kernels_complex.cc
  // A copy of a tuple (XLA allows it; sharding propagation adds one at an
  // entry root whose layout it must not change) is not elementwise.
  const bool tuple_copy = instr.opcode() == Opcode::kCopy && instr.shape().IsTuple();
  if (IsElementwise(instr.opcode()) && !tuple_copy && instr.opcode() != Opcode::kStochasticConvert &&
      instr.opcode() != Opcode::kComplex && instr.opcode() != Opcode::kReal &&
      instr.opcode() != Opcode::kImag) {
    MS_RETURN_IF_ERROR(CheckElementwise(k));
  }
  switch (instr.opcode()) {
    case Opcode::kParameter:
      return InstrError(instr, "internal: parameter dispatched as a kernel");
    case Opcode::kConstant:
      if (!instr.has_literal()) return InstrError(instr, "constant has no value");
      return instr.literal();
    case Opcode::kIota: return EvalIota(k);
    case Opcode::kPartitionId: {
      Literal l(Shape(PrimitiveType::U32, {}));
      l.data<uint32_t>()[0] = static_cast<uint32_t>(k.interp.ctx().partition_id);
      return l;
    }
    case Opcode::kReplicaId: {
      Literal l(Shape(PrimitiveType::U32, {}));
      l.data<uint32_t>()[0] = static_cast<uint32_t>(k.interp.ctx().replica_id);
      return l;
    }
    case Opcode::kAfterAll: return Literal(Shape::Token());

    case Opcode::kAbs: case Opcode::kCbrt: case Opcode::kCeil: case Opcode::kClz:
    case Opcode::kCos: case Opcode::kErf: case Opcode::kExp: case Opcode::kExpm1:
    case Opcode::kFloor: case Opcode::kIsFinite: case Opcode::kLog: case Opcode::kLog1p:
    case Opcode::kLogistic: case Opcode::kNegate: case Opcode::kNot: case Opcode::kPopcnt:
    case Opcode::kRoundNearestAfz: case Opcode::kRoundNearestEven: case Opcode::kRsqrt:
    case Opcode::kSign: case Opcode::kSin: case Opcode::kSqrt: case Opcode::kTan:
    case Opcode::kTanh:
      return EvalUnary(k);
    case Opcode::kCopy: return EvalCopyLike(k);
    case Opcode::kConvert: return EvalConvert(k);
    case Opcode::kReducePrecision: return EvalReducePrecision(k);
    case Opcode::kStochasticConvert: return EvalStochasticConvert(k);
    case Opcode::kImag: case Opcode::kReal: case Opcode::kComplex:
      return NotSupported(instr);

    case Opcode::kAdd: case Opcode::kAnd: case Opcode::kAtan2: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum: case Opcode::kMultiply: case Opcode::kOr:
    case Opcode::kPower: case Opcode::kRemainder: case Opcode::kShiftLeft:
    case Opcode::kShiftRightArithmetic: case Opcode::kShiftRightLogical:
    case Opcode::kSubtract: case Opcode::kXor:
      return EvalBinary(k);
    case Opcode::kCompare: return EvalCompare(k);
    case Opcode::kSelect: return EvalSelect(k);
    case Opcode::kClamp: return EvalClamp(k);

    case Opcode::kBitcast: case Opcode::kReshape: return EvalReshape(k);
    case Opcode::kBitcastConvert: return EvalBitcastConvert(k);
    case Opcode::kBroadcast: return EvalBroadcast(k);
    case Opcode::kTranspose: return EvalTranspose(k);
    case Opcode::kSlice: return EvalSlice(k);
    case Opcode::kDynamicSlice: return EvalDynamicSlice(k);
    case Opcode::kDynamicUpdateSlice: return EvalDynamicUpdateSlice(k);
    case Opcode::kPad: return EvalPad(k);
    case Opcode::kConcatenate: return EvalConcatenate(k);
    case Opcode::kReverse: return EvalReverse(k);
    case Opcode::kGather: return EvalGather(k);
    case Opcode::kScatter: return EvalScatter(k);

    case Opcode::kReduce: return EvalReduce(k);
    case Opcode::kReduceWindow: return EvalReduceWindow(k);
    case Opcode::kSelectAndScatter: return EvalSelectAndScatter(k);
    case Opcode::kSort: return EvalSort(k);
    case Opcode::kMap: return EvalMap(k);

    case Opcode::kDot: return EvalDot(k);
    case Opcode::kConvolution: return EvalConvolution(k);
    case Opcode::kBatchNormTraining: return EvalBatchNormTraining(k);
    case Opcode::kBatchNormInference: return EvalBatchNormInference(k);
    case Opcode::kBatchNormGrad: return EvalBatchNormGrad(k);
    case Opcode::kRaggedDot: return EvalRaggedDot(k);
    case Opcode::kCholesky: return EvalCholesky(k);
    case Opcode::kTriangularSolve: return EvalTriangularSolve(k);
    case Opcode::kFft: return EvalFft(k);

    case Opcode::kTuple: return EvalTuple(k);
    case Opcode::kGetTupleElement: return EvalGetTupleElement(k);
    case Opcode::kWhile: return EvalWhile(k);
    case Opcode::kConditional: return EvalConditional(k);
    case Opcode::kCall: return EvalCall(k);
    case Opcode::kCustomCall:
      if (instr.attrs().custom_call_target == kBlockScaledDotTarget) return EvalBlockScaledDot(k);
      return EvalCustomCall(k);
    case Opcode::kOptimizationBarrier: case Opcode::kDomain: return EvalCopyLike(k);
    case Opcode::kAddDependency: return EvalCopyLike(k);  // the token only orders
    case Opcode::kTopK: return EvalTopKOp(k);
    case Opcode::kGetDimensionSize: {
      const Shape& x = instr.operand(0)->shape();
      const std::vector<int64_t>& d = instr.attrs().dimensions;
      if (!x.IsArray() || d.size() != 1 || d[0] < 0 || d[0] >= x.rank())
        return InstrError(instr, "get-dimension-size needs one dimension of its array operand");
      return Literal::ScalarS32(static_cast<int32_t>(x.dimensions(d[0])));
    }
    case Opcode::kInfeed: return EvalInfeed(k);
    case Opcode::kOutfeed: return EvalOutfeed(k);
    case Opcode::kRngGetAndUpdateState:
      return NotSupported(instr);
    case Opcode::kRng: return EvalRng(k);
    case Opcode::kRngBitGenerator: return EvalRngBitGenerator(k);

    case Opcode::kAllReduce: case Opcode::kAllGather: case Opcode::kReduceScatter:
    case Opcode::kAllToAll: case Opcode::kCollectivePermute:
      return EvalCollective(k);

    case Opcode::kFusion: case Opcode::kAsyncStart: case Opcode::kAsyncUpdate:
    case Opcode::kAsyncDone: case Opcode::kAllReduceStart: case Opcode::kAllReduceDone:
    case Opcode::kAllGatherStart: case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteStart: case Opcode::kCollectivePermuteDone:
    case Opcode::kCopyStart: case Opcode::kCopyDone:
      return EvalAsyncOrFusion(k);  // kernels_async.cc

    case Opcode::kSend: case Opcode::kSendDone: case Opcode::kRecv: case Opcode::kRecvDone:
    case Opcode::kCollectiveBroadcast: case Opcode::kRaggedAllToAll:
    case Opcode::kSetDimensionSize: case Opcode::kDynamicReshape:
      return EvalP2POrDynamicSize(k);  // kernels_p2p.cc
  }
  return NotSupported(instr);
}

}  // namespace

Literal KernelArgs::TakeOrAllocate(int i) const {
  if (i < static_cast<int>(ops.size()) && donatable[i] && ops[i]->shape().IsArray() &&
      ops[i]->shape().Compatible(instr.shape())) {
    Literal out = std::move(*ops[i]);
    return out;
  }
  // Callers overwrite every element, so skip zero-filling.
  return Literal::Uninitialized(instr.shape());
}

const Interpreter::Plan& Interpreter::GetPlan(const Computation& c) {
  auto it = plans_.find(&c);
  if (it != plans_.end()) return it->second;
  Plan plan;
  // Only instructions the root depends on run; dead code is skipped.
  std::unordered_set<const Instruction*> live;
  std::vector<const Instruction*> stack;
  if (c.root() != nullptr) {
    stack.push_back(c.root());
    live.insert(c.root());
  }
  // With a data sink, outfeeds are effects the caller observes: they run
  // even when the root does not depend on them.
  if (ctx_.hooks != nullptr)
    for (const auto& i : c.instructions())
      if (i->opcode() == Opcode::kOutfeed && live.insert(i.get()).second) stack.push_back(i.get());
  while (!stack.empty()) {
    const Instruction* i = stack.back();
    stack.pop_back();
    for (const Instruction* o : i->operands())
      if (live.insert(o).second) stack.push_back(o);
    // A recv-done receives what the sends of its channel sent: they run too.
    if (i->opcode() == Opcode::kRecvDone) {
      const std::optional<int64_t> channel =
          i->attrs().channel_id ? i->attrs().channel_id : i->operand(0)->attrs().channel_id;
      for (const auto& s : c.instructions())
        if (s->opcode() == Opcode::kSend && s->attrs().channel_id == channel &&
            live.insert(s.get()).second)
          stack.push_back(s.get());
    }
    for (const Instruction* o : i->control_predecessors())
      if (live.insert(o).second) stack.push_back(o);
  }
  for (const Instruction* i : c.MakePostOrder()) {
    if (!live.count(i)) continue;
    plan.slot[i] = static_cast<int>(plan.order.size());
    plan.order.push_back(i);
  }
  // Fused elementwise loops: their inner ops do not run on their own, and
  // a loop's root reads the loop's inputs instead of its operands.
  const size_t n = plan.order.size();
  plan.reads.resize(n);
  plan.loop.resize(n);
  plan.absorbed.assign(n, false);
  LoopFusionPlan fusions = PlanLoopFusions(plan.order, c.root());
  for (const Instruction* i : fusions.absorbed) plan.absorbed[plan.slot.at(i)] = true;
  for (auto& loop : fusions.loops) plan.loop[plan.slot.at(loop->root)] = std::move(loop);
  plan.uses.assign(n, 0);
  for (size_t s = 0; s < n; ++s) {
    if (plan.absorbed[s]) continue;
    if (plan.loop[s]) {
      for (const Instruction* o : plan.loop[s]->inputs) plan.reads[s].push_back(plan.slot.at(o));
    } else {
      for (const Instruction* o : plan.order[s]->operands()) plan.reads[s].push_back(plan.slot.at(o));
    }
    for (int o : plan.reads[s]) plan.uses[o]++;
  }
  if (c.root() != nullptr) plan.uses[plan.slot.at(c.root())]++;
  plan.gte_steals.assign(plan.order.size(), false);
  for (size_t s = 0; s < plan.order.size(); ++s) {
    const Instruction* gte = plan.order[s];
    if (gte->opcode() != Opcode::kGetTupleElement) continue;
    const Instruction* tuple = gte->operand(0);
    if (tuple == c.root()) continue;
    bool ok = true;
    int same_index = 0;
    for (const Instruction* u : tuple->users()) {
      if (!plan.slot.count(u)) continue;  // dead user: never runs
      if (u->opcode() != Opcode::kGetTupleElement) {
        ok = false;
        break;
      }
      if (u->attrs().tuple_index == gte->attrs().tuple_index) ++same_index;
    }
    plan.gte_steals[s] = ok && same_index == 1;
  }
  return plans_.emplace(&c, std::move(plan)).first->second;
}

StatusOr<Literal> Interpreter::Call(const Computation& c,
                                    const std::vector<const Literal*>& args) {
  // The float type argument i must be converted to, or nullopt.
  auto conversion = [&](size_t i) -> std::optional<PrimitiveType> {
    const Instruction* p =
        static_cast<int>(i) < c.parameter_count() ? c.parameter(static_cast<int>(i)) : nullptr;
    if (p == nullptr) return std::nullopt;
    const Shape& want = p->shape();
    const Shape& have = args[i]->shape();
    if (!have.IsArray() || !want.IsArray() || have.rank() != 0 || want.rank() != 0 ||
        have.element_type() == want.element_type() ||
        !IsFloatingPoint(have.element_type()) || !IsFloatingPoint(want.element_type()))
      return std::nullopt;
    return want.element_type();
  };
  size_t first = 0;
  while (first < args.size() && !conversion(first)) ++first;
  if (first == args.size()) return Run(c, {}, args);  // the common case: no copy
  std::vector<Literal> converted;
  converted.reserve(args.size());  // keeps the pointers into it valid
  std::vector<const Literal*> use = args;
  for (size_t i = first; i < args.size(); ++i)
    if (std::optional<PrimitiveType> to = conversion(i)) {
      converted.push_back(ConvertLiteral(*args[i], *to));
      use[i] = &converted.back();
    }
  return Run(c, {}, use);
}

StatusOr<Literal> Interpreter::Run(const Computation& c, std::vector<Literal> owned,
                                   const std::vector<const Literal*>& borrowed) {
  if (c.root() == nullptr)
    return Status::Error("computation " + c.name() + " has no root", c.loc());
  const Plan& plan = GetPlan(c);
  size_t n_args = borrowed.empty() ? owned.size() : borrowed.size();
  if (n_args != static_cast<size_t>(c.parameter_count()))
    return Status::Error("computation " + c.name() + " takes " +
                             std::to_string(c.parameter_count()) + " arguments, got " +
                             std::to_string(n_args),
                         c.loc());
  size_t n = plan.order.size();
  std::vector<Literal> values(n);
  std::vector<Literal*> ptr(n, nullptr);
  std::vector<bool> owned_slot(n, true);
  std::vector<int> remaining = plan.uses;
  for (size_t s = 0; s < n; ++s) {
    const Instruction& instr = *plan.order[s];
    if (instr.opcode() == Opcode::kParameter) {
      int64_t p = instr.attrs().parameter_number;
      if (p < 0 || static_cast<size_t>(p) >= n_args)
        return InstrError(instr, "parameter number out of range");
      const Literal* arg = borrowed.empty() ? &owned[p] : borrowed[p];
      if (!arg->shape().Compatible(instr.shape()))
        return InstrError(instr, "argument has shape " + arg->shape().ToString(false) +
                                     " but the parameter is " + instr.shape().ToString(false));
      if (borrowed.empty()) {
        values[s] = std::move(owned[p]);
        ptr[s] = &values[s];
      } else {
        ptr[s] = const_cast<Literal*>(arg);
        owned_slot[s] = false;
      }
      continue;
    }
    if (!ShapeSupported(instr.shape()))
      return InstrError(instr, "element type " + FirstUnsupportedType(instr.shape()) +
                                   " is not supported by the interpreter");
    if (instr.opcode() == Opcode::kConstant && instr.has_literal()) {
      // Read in place instead of copied on every run (a model's weights are
      // constants): not owned, so no kernel takes or overwrites its buffer.
      ptr[s] = const_cast<Literal*>(&instr.literal());
      owned_slot[s] = false;
      continue;
    }
    if (plan.absorbed[s]) continue;  // computed by the fused loop that reads it
    const std::vector<int>& reads = plan.reads[s];
    KernelArgs k{instr, {}, {}, *this};
    k.ops.reserve(reads.size());
    for (int os : reads) {
      const Instruction* o = plan.order[os];
      if (ptr[os] == nullptr) return InstrError(instr, "internal: %" + o->name() + " has no value");
      k.ops.push_back(ptr[os]);
      if (!ShapeSupported(o->shape()))
        return InstrError(instr, "element type " + FirstUnsupportedType(o->shape()) +
                                     " is not supported by the interpreter");
      bool once = std::count(reads.begin(), reads.end(), os) == 1;
      k.donatable.push_back(owned_slot[os] && once && (remaining[os] == 1 || plan.gte_steals[s]));
    }
    StatusOr<Literal> r = plan.loop[s] ? RunLoopFusion(*plan.loop[s], k) : Dispatch(k);
    if (!r.ok()) return r.status();
    values[s] = std::move(r).value();
    ptr[s] = &values[s];
    for (int os : reads)
      if (--remaining[os] == 0 && owned_slot[os]) values[os] = Literal();
  }
  int root = plan.slot.at(c.root());
  if (!owned_slot[root]) return CopyOf(*ptr[root]);
  return std::move(values[root]);
}

// ---- shared helpers --------------------------------------------------------

Literal CopyOf(const Literal& lit) {
  if (lit.shape().IsTuple()) {
    std::vector<Literal> elems;
    elems.reserve(lit.elements().size());
    for (const Literal& e : lit.elements()) elems.push_back(CopyOf(e));
    return Literal::MakeTuple(std::move(elems));
  }
  if (!lit.shape().IsArray()) return lit;
  Literal out = Literal::Uninitialized(lit.shape());
  const int64_t bytes = lit.size_bytes();
  if (bytes >= StreamingBytes()) {
    StreamCopy(out.raw(), lit.raw(), bytes);
    StreamingFence();
  } else if (bytes > 0) {
    std::memcpy(out.raw(), lit.raw(), bytes);
  }
  return out;
}

Status InstrError(const Instruction& instr, const std::string& message) {
  return Status::Error(message + " (in %" + instr.name() + " = " +
                           std::string(OpcodeName(instr.opcode())) + ")",
                       instr.loc());
}

bool IsSupportedType(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::PRED: case PrimitiveType::S8: case PrimitiveType::S16:
    case PrimitiveType::S32: case PrimitiveType::S64: case PrimitiveType::U8:
    case PrimitiveType::U16: case PrimitiveType::U32: case PrimitiveType::U64:
    case PrimitiveType::F16: case PrimitiveType::BF16: case PrimitiveType::F32:
    case PrimitiveType::F64: case PrimitiveType::C64: case PrimitiveType::C128:
      return true;
    default:
      return IsF8Type(t);
  }
}

Literal WidenToF32(const Literal& lit) {
  Shape s = lit.shape();
  s.set_element_type(PrimitiveType::F32);
  s.set_layout(std::nullopt);
  Literal out = Literal::Uninitialized(s);
  float* o = out.data<float>();
  int64_t n = lit.element_count();
  if (IsF8Type(lit.element_type())) {
    const uint8_t* codes = lit.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) o[i] = F8ToF32(lit.element_type(), codes[i]);
    return out;
  }
  const uint16_t* in = lit.data<uint16_t>();
  if (lit.element_type() == PrimitiveType::BF16) {
    for (int64_t i = 0; i < n; ++i) o[i] = Bf16ToF32(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = F16ToF32(in[i]);
  }
  return out;
}

Literal NarrowFromF32(const Literal& f32, PrimitiveType to) {
  Shape s = f32.shape();
  s.set_element_type(to);
  Literal out = Literal::Uninitialized(s);
  const float* in = f32.data<float>();
  int64_t n = f32.element_count();
  if (IsF8Type(to)) {
    uint8_t* codes = out.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) codes[i] = F32ToF8(to, in[i]);
    return out;
  }
  uint16_t* o = out.data<uint16_t>();
  if (to == PrimitiveType::BF16) {
    for (int64_t i = 0; i < n; ++i) o[i] = F32ToBf16(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = F32ToF16(in[i]);
  }
  return out;
}

Literal ElementAsScalar(const Literal& lit, int64_t i) {
  Literal s(Shape(lit.element_type(), {}));
  int64_t w = ByteWidth(lit.element_type());
  std::memcpy(s.raw(), lit.raw() + i * w, w);
  return s;
}

void StoreScalar(const Literal& scalar, Literal& lit, int64_t i) {
  int64_t w = ByteWidth(lit.element_type());
  std::memcpy(lit.raw() + i * w, scalar.raw(), w);
}

int64_t ScalarIndex(const Literal& lit) {
  if (lit.element_type() == PrimitiveType::U64)
    return static_cast<int64_t>(std::min<uint64_t>(lit.data<uint64_t>()[0], INT64_MAX));
  return lit.GetInt(0);
}

ReducerKind ClassifyReducer(const Computation* c) {
  if (c == nullptr || c->parameter_count() != 2) return ReducerKind::kNone;
  const Instruction* root = c->root();
  if (root == nullptr || root->operand_count() != 2 || !root->shape().IsArray() ||
      root->shape().rank() != 0)
    return ReducerKind::kNone;
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if (a->opcode() != Opcode::kParameter || b->opcode() != Opcode::kParameter ||
      a == b)
    return ReducerKind::kNone;
  // Parameters must have the root's type (no converts hidden in the reducer).
  if (a->shape().element_type() != root->shape().element_type() ||
      b->shape().element_type() != root->shape().element_type())
    return ReducerKind::kNone;
  switch (root->opcode()) {
    case Opcode::kAdd: return ReducerKind::kAdd;
    case Opcode::kMultiply: return ReducerKind::kMul;
    case Opcode::kMaximum: return ReducerKind::kMax;
    case Opcode::kMinimum: return ReducerKind::kMin;
    case Opcode::kAnd: return ReducerKind::kAnd;
    case Opcode::kOr: return ReducerKind::kOr;
    case Opcode::kXor: return ReducerKind::kXor;
    default: return ReducerKind::kNone;
  }
}

}  // namespace interp

StatusOr<Literal> Evaluate(const Computation& computation, std::vector<Literal> args,
                           const EvalContext& ctx) {
  if (args.size() != static_cast<size_t>(computation.parameter_count()))
    return Status::Error("computation " + computation.name() + " takes " +
                         std::to_string(computation.parameter_count()) + " arguments, got " +
                         std::to_string(args.size()));
  for (int i = 0; i < computation.parameter_count(); ++i) {
    const Instruction* p = computation.parameter(i);
    if (p == nullptr) continue;
    if (!args[i].shape().Compatible(p->shape()))
      return Status::Error("parameter " + std::to_string(i) + " (%" + p->name() + ") is " +
                               p->shape().ToString(false) + " but the argument is " +
                               args[i].shape().ToString(false),
                           p->loc());
  }
  interp::Interpreter interpreter(ctx);
  return interpreter.Run(computation, std::move(args));
}

StatusOr<Literal> EvaluateBorrowed(const Computation& computation,
                                   const std::vector<const Literal*>& args, const EvalContext& ctx) {
  if (args.size() != static_cast<size_t>(computation.parameter_count()))
    return Status::Error("computation " + computation.name() + " takes " +
                         std::to_string(computation.parameter_count()) + " arguments, got " +
                         std::to_string(args.size()));
  if (args.empty()) return Evaluate(computation, {}, ctx);
  for (int i = 0; i < computation.parameter_count(); ++i) {
    const Instruction* p = computation.parameter(i);
    if (p != nullptr && !args[i]->shape().Compatible(p->shape()))
      return Status::Error("parameter " + std::to_string(i) + " (%" + p->name() + ") is " +
                               p->shape().ToString(false) + " but the argument is " +
                               args[i]->shape().ToString(false),
                           p->loc());
  }
  interp::Interpreter interpreter(ctx);
  return interpreter.Run(computation, {}, args);
}

StatusOr<Literal> EvaluateModule(const Module& module, std::vector<Literal> args,
                                 const EvalContext& ctx) {
  if (module.entry() == nullptr) return Status::Error("module has no entry computation");
  return Evaluate(*module.entry(), std::move(args), ctx);
}

StatusOr<Literal> ApplyReducer(const Computation& reducer, const Literal& a, const Literal& b) {
  if (!a.shape().Compatible(b.shape()) || !a.shape().IsArray())
    return Status::Error("ApplyReducer: operands " + a.shape().ToString(false) + " and " +
                         b.shape().ToString(false) + " differ");
  PrimitiveType t = a.element_type();
  interp::ReducerKind kind = interp::ClassifyReducer(&reducer);
  int64_t n = a.element_count();
  if (kind != interp::ReducerKind::kNone && !interp::IsStagedFloat(t) && !IsComplex(t) &&
      !(t == PrimitiveType::PRED &&
        (kind == interp::ReducerKind::kAdd || kind == interp::ReducerKind::kMul))) {
    Literal out(a.shape());
    interp::DispatchCompute(t, [&]<typename T>() {
      const T* x = a.data<T>();
      const T* y = b.data<T>();
      T* o = out.data<T>();
      for (int64_t i = 0; i < n; ++i) o[i] = interp::ApplyReducerKind<T>(kind, x[i], y[i]);
    });
    return out;
  }
  interp::Interpreter interpreter(EvalContext{});
  Literal out(a.shape());
  for (int64_t i = 0; i < n; ++i) {
    Literal x = interp::ElementAsScalar(a, i), y = interp::ElementAsScalar(b, i);
    MS_ASSIGN_OR_RETURN(Literal r, interpreter.Call(reducer, {&x, &y}));
    if (!r.shape().IsArray() || r.element_type() != t)
      return Status::Error("ApplyReducer: reducer " + reducer.name() + " returns " +
                           r.shape().ToString(false));
    interp::StoreScalar(r, out, i);
  }
  return out;
}

}  // namespace meshsplit
