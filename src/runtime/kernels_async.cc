// Kernels of fusion and the asynchronous pairs. The interpreter runs one
// device in program order, so a start does the whole work at once and
// builds XLA's start tuple around the result; update passes the tuple on
// and done takes the result element out of it.
#include "ir/shape_inference_async.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

// Element `index` of operand 0, a tuple.
StatusOr<Literal> TakeElement(KernelArgs& k, int index) {
  Literal& t = *k.ops[0];
  if (!t.shape().IsTuple() || index >= static_cast<int>(t.elements().size()))
    return InstrError(k.instr, "operand is not the tuple of a start");
  if (k.donatable[0]) return std::move(t.elements()[index]);
  return CopyOf(t.elements()[index]);
}

// Zero-valued context elements: positions `from`.. of the declared tuple.
void AppendContexts(const Shape& declared, int from, std::vector<Literal>& elems) {
  if (!declared.IsTuple()) return;
  for (int i = from; i < declared.tuple_size(); ++i)
    elems.push_back(Literal(declared.tuple_shapes(i)));
}

StatusOr<Literal> RunCalled(KernelArgs& k, std::vector<Literal> args) {
  const auto& called = k.instr.called_computations();
  if (called.size() != 1 || called[0] == nullptr)
    return InstrError(k.instr, std::string(OpcodeName(k.instr.opcode())) +
                                   " needs exactly one called computation");
  return k.interp.Run(*called[0], std::move(args));
}

// A collective start evaluated as its sync collective: a detached copy of
// the instruction with the sync opcode and result shape goes to the
// collective backend, which reads only opcode, shape, attributes and the
// reducer.
StatusOr<Literal> RunSyncCollective(KernelArgs& k) {
  const Instruction& start = k.instr;
  Instruction sync(SyncCollectiveOf(start.opcode()), start.name(), DeclaredStartResult(start));
  sync.mutable_attrs() = start.attrs();
  sync.set_called_computations(start.called_computations());
  sync.set_loc(start.loc());
  KernelArgs sk{sync, k.ops, std::vector<bool>(k.ops.size(), false), k.interp};
  return EvalCollective(sk);
}

}  // namespace

StatusOr<Literal> EvalAsyncOrFusion(KernelArgs& k) {
  const Instruction& instr = k.instr;
  switch (instr.opcode()) {
    case Opcode::kFusion: {
      std::vector<Literal> args;
      for (int i = 0; i < static_cast<int>(k.ops.size()); ++i) args.push_back(TakeOrCopy(k, i));
      return RunCalled(k, std::move(args));
    }
    case Opcode::kAsyncStart: {
      std::vector<Literal> args, operands;
      for (int i = 0; i < static_cast<int>(k.ops.size()); ++i) {
        operands.push_back(*k.ops[i]);
        args.push_back(TakeOrCopy(k, i));
      }
      MS_ASSIGN_OR_RETURN(Literal result, RunCalled(k, std::move(args)));
      std::vector<Literal> elems;
      elems.push_back(Literal::MakeTuple(std::move(operands)));
      elems.push_back(std::move(result));
      AppendContexts(instr.shape(), 2, elems);
      return Literal::MakeTuple(std::move(elems));
    }
    case Opcode::kAsyncUpdate:
    case Opcode::kAllReduceDone:
      return TakeOrCopy(k, 0);
    case Opcode::kAsyncDone:
    case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteDone:
      return TakeElement(k, 1);
    case Opcode::kCopyDone:
      return TakeElement(k, 0);
    case Opcode::kAllReduceStart:
      return RunSyncCollective(k);
    case Opcode::kAllGatherStart:
    case Opcode::kCollectivePermuteStart: {
      const Shape& s = instr.shape();
      if (!s.IsTuple() || s.tuple_size() < 2)
        return InstrError(instr, "start result must be a tuple");
      // The in-place collective-permute (buffers and offsets as operands)
      // is not modelled.
      if (instr.opcode() == Opcode::kCollectivePermuteStart && k.ops.size() != 1 &&
          !s.tuple_shapes(0).IsTuple())
        return InstrError(instr, "in-place collective-permute-start is not supported");
      MS_ASSIGN_OR_RETURN(Literal result, RunSyncCollective(k));
      std::vector<Literal> elems;
      if (k.ops.size() == 1) {
        elems.push_back(*k.ops[0]);
      } else {
        std::vector<Literal> operands;
        for (Literal* op : k.ops) operands.push_back(*op);
        elems.push_back(Literal::MakeTuple(std::move(operands)));
      }
      elems.push_back(std::move(result));
      AppendContexts(s, 2, elems);
      return Literal::MakeTuple(std::move(elems));
    }
    case Opcode::kCopyStart: {
      std::vector<Literal> elems;
      elems.push_back(*k.ops[0]);
      elems.push_back(TakeOrCopy(k, 0));
      AppendContexts(instr.shape(), 2, elems);
      return Literal::MakeTuple(std::move(elems));
    }
    default:
      return InstrError(instr, "internal: not a fusion or async opcode");
  }
}

}  // namespace meshsplit::interp
